#!/usr/bin/env bash
# packaging/test-cross-node.sh [TARBALL] - the npm package's Linux arm64 prebuilt addon, run by an arm64 Node
# under qemu-user-static against a redis-server of this machine.
#
# Without TARBALL, the addon is cross-compiled from the committed tree (build.js --prebuild with
# FLOODWALL_CMAKE_TOOLCHAIN=packaging/cross/aarch64-linux-gnu.cmake: hiredis, OpenSSL and libstdc++ linked
# in from the :arm64 packages) and packed; with it (make packages), that tarball is tested. The tarball is
# installed with --ignore-scripts into an empty project by this machine's npm (unpacking is the same on
# every machine); then, with Debian's arm64 node (nodejs:arm64 and libnode108:arm64 unpacked into
# build-cross-aarch64-linux-gnu/node-root, its shared libraries from multiarch), the package's own install
# script must pick linux-arm64 and load it, and packaging/cross/node_smoke.js must see admit, release, the
# headers, a 429 and three decisions by Redis.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
triple=aarch64-linux-gnu
work=$root/build-cross-$triple
command -v qemu-aarch64-static >/dev/null || { echo "test-cross-node: qemu-aarch64-static is missing (packaging/install-deps.sh platforms)" >&2; exit 1; }
command -v redis-server >/dev/null || { echo "test-cross-node: redis-server is missing" >&2; exit 1; }

# Debian's arm64 node, unpacked (not installed: nodejs:arm64 cannot sit beside this machine's node). Its
# externalized builtins (acorn, cjs-module-lexer, undici) are arch-independent packages, unpacked too.
noderoot=$work/node-root
if [ ! -x "$noderoot/usr/bin/node" ]; then
  rm -rf "$noderoot" && mkdir -p "$noderoot/debs"
  (cd "$noderoot/debs" && apt-get download nodejs:arm64 libnode108:arm64 node-acorn node-cjs-module-lexer node-undici node-busboy >/dev/null 2>&1) ||
    { echo "test-cross-node: apt-get download of Debian's arm64 nodejs failed" >&2; exit 1; }
  for deb in "$noderoot"/debs/*.deb; do dpkg -x "$deb" "$noderoot"; done
fi
arm_node() { LD_LIBRARY_PATH=$noderoot/usr/lib/aarch64-linux-gnu qemu-aarch64-static -L "$noderoot" "$noderoot/usr/bin/node" "$@"; }
echo "test-cross-node: $(arm_node -p '`node ${process.version} ${process.arch}`') under qemu-aarch64-static"

tmp=$(mktemp -d)
trap '[ ! -s "$tmp/redis.pid" ] || kill "$(cat "$tmp/redis.pid")"; rm -rf "$tmp"' EXIT
tarball=${1:-}
if [ -z "$tarball" ]; then
  src=$(bash packaging/snapshot.sh "$work/npm-src" "${FW_REF:-HEAD}")
  [ -d "$root/node_modules/node-addon-api" ] || { echo "test-cross-node: run npm install in $root first (node-addon-api)" >&2; exit 1; }
  ln -sfn "$root/node_modules" "$src/node_modules"
  (cd "$src" && FLOODWALL_JOBS=${JOBS:-2} FLOODWALL_PLATFORM=linux FLOODWALL_ARCH=arm64 FLOODWALL_LIBC=glibc \
    FLOODWALL_CMAKE_TOOLCHAIN=$root/packaging/cross/$triple.cmake nice -n "${FW_NICE:-10}" node bindings/node/scripts/build.js --prebuild \
    >"$work/npm-build.log" 2>&1) || { tail -n 40 "$work/npm-build.log"; echo "test-cross-node: the arm64 addon did not build" >&2; exit 1; }
  (cd "$src" && npm pack --silent --pack-destination "$tmp" >/dev/null)
  tarball=$(ls "$tmp"/floodwall-*.tgz)
fi
tar tzf "$tarball" >"$tmp/files"
grep -qx 'package/prebuilds/linux-arm64/floodwall.node' "$tmp/files" ||
  { echo "test-cross-node: $tarball carries no prebuilds/linux-arm64/floodwall.node" >&2; exit 1; }
mkdir "$tmp/app"
echo '{"name":"app","version":"1.0.0","private":true}' >"$tmp/app/package.json"
(cd "$tmp/app" && npm install --ignore-scripts --no-audit --no-fund --no-package-lock --loglevel=error "$tarball" >/dev/null)
addon=$tmp/app/node_modules/floodwall/prebuilds/linux-arm64/floodwall.node
needed=$(aarch64-linux-gnu-readelf -d "$addon" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
case $needed in *hiredis* | *libssl* | *libcrypto* | *stdc++*) echo "test-cross-node: the arm64 addon needs $needed" >&2; exit 1 ;; esac
picked=$(cd "$tmp/app" && arm_node node_modules/floodwall/bindings/node/scripts/install.js)
[ "$picked" = "floodwall: using the prebuilt addon for linux-arm64" ] || { echo "test-cross-node: the install script said: $picked" >&2; exit 1; }
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes --pidfile "$tmp/redis.pid" >/dev/null
for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.05; done
cp packaging/cross/node_smoke.js "$tmp/app/"
result=$(cd "$tmp/app" && arm_node node_smoke.js "$port")
echo "test-cross-node: $picked (needs only: $needed); $result"
