#!/usr/bin/env bash
# Installs what building and testing floodwall needs on Debian 12, idempotently: only missing packages
# are installed, and `apt-get update` runs once, only when something is missing.
# `install-deps.sh platforms` adds what make packages' cross builds need: Debian's arm64 cross compiler,
# the arm64 libraries through multiarch (dpkg --add-architecture arm64), qemu-user-static to run tests and
# musl-tools (musl-gcc) for the musl CPython that runs the musllinux wheel.
set -euo pipefail

debs=(
  build-essential cmake ninja-build ccache pkg-config clang-format clang libclang-rt-14-dev
  libhiredis-dev libssl-dev openssl nlohmann-json3-dev libgtest-dev googletest redis-server redis-tools
  python3-dev python3-venv
  ruby ruby-dev swig ruby-rack ruby-rack-test ruby-minitest ruby-webrick puma ruby-sinatra ruby-rack-attack ruby-redis
  ruby-bundler ruby-rails
  prometheus
)
# Node and npm from Debian (nodejs 18.x on Debian 12; package.json asks for >= 18.17) only when the commands
# are missing: a Node installed another way (NodeSource, nvm) bundles its own npm, which Debian's npm
# package would conflict with.
command -v node >/dev/null || debs+=(nodejs)
command -v npm >/dev/null || debs+=(npm)
if [ "${1:-}" = platforms ]; then
  dpkg --print-foreign-architectures | grep -qx arm64 || {
    echo "install-deps: adding the arm64 architecture (multiarch)"
    $([ "$(id -u)" -eq 0 ] || echo sudo) dpkg --add-architecture arm64
  }
  debs+=(crossbuild-essential-arm64 qemu-user-static libc6:arm64 libstdc++6:arm64 libhiredis-dev:arm64 libssl-dev:arm64
    libgtest-dev:arm64)
  # The shared libraries of Debian's arm64 node, which packaging/test-cross-node.sh unpacks beside them.
  debs+=(libbrotli1:arm64 libc-ares2:arm64 libicu72:arm64 libnghttp2-14:arm64 libuv1:arm64 zlib1g:arm64 libssl3:arm64)
  # The arm64 wheel's headers and the standard library of Debian's arm64 python3.11 (test-cross-wheel.sh).
  debs+=(libpython3.11-dev:arm64 libpython3.11-stdlib:arm64)
  # musl-gcc, which builds the musl CPython that runs the musllinux wheel (build-musl-wheel.sh).
  debs+=(musl-tools)
fi

missing=()
for p in "${debs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  # Wait for a lock another apt run holds (a shared CI machine) instead of failing at once.
  $SUDO apt-get -o DPkg::Lock::Timeout=600 update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}"
fi
# Redis from the package is started by the tests themselves on free ports; the system service is not
# needed (and on a CI machine may not be running at all).
command -v redis-server >/dev/null || { echo "install-deps: redis-server missing after install" >&2; exit 1; }
