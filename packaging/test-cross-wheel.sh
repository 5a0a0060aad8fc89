#!/usr/bin/env bash
# packaging/test-cross-wheel.sh [OUT] - the Linux arm64 wheel: cross-compiled from the committed tree with
# packaging/cross/aarch64-linux-gnu.cmake for CPython 3.11 (the arm64 interpreter this machine can run:
# Debian's, whose headers come from libpython3.11-dev:arm64), repaired by auditwheel (the :arm64 hiredis and
# OpenSSL bundled in floodwall.libs/; auditwheel picks the manylinux tag, its --plat lists only the host's
# architecture), then tested under qemu-user-static by Debian's arm64 python3.11 (python3.11-minimal:arm64
# unpacked into build-cross-aarch64-linux-gnu/py-root; its standard library is the multiarch one): the wheel installed for manylinux_2_34_aarch64 into a directory of its own, with
# pytest, and tests/python/test_api.py and test_redis.py run against redis-servers here, except the two
# tests that start more Python processes (an arm64 executable started from under qemu needs binfmt_misc,
# which this machine has not registered). The wheel goes to OUT (default build-cross-aarch64-linux-gnu/dist).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
triple=aarch64-linux-gnu
work=$root/build-cross-$triple
out=${1:-$work/dist}
mkdir -p "$out"
out=$(cd "$out" && pwd)
command -v qemu-aarch64-static >/dev/null || { echo "test-cross-wheel: qemu-aarch64-static is missing (packaging/install-deps.sh platforms)" >&2; exit 1; }
[ -f /usr/include/aarch64-linux-gnu/python3.11/pyconfig.h ] || { echo "test-cross-wheel: libpython3.11-dev:arm64 is missing (packaging/install-deps.sh platforms)" >&2; exit 1; }
py=$root/build-wheels/venv-3.11/bin/python
tools=$root/build-wheels/tools/bin
[ -x "$py" ] && [ -x "$tools/python" ] || bash packaging/build-wheels.sh 3.11 >/dev/null

src=$(bash packaging/snapshot.sh "$work/py-src" "${FW_REF:-HEAD}")
raw=$work/wheel-raw
rm -rf "$raw"
# The extension's name and the wheel's tag are the target's, not those of the Python that runs the build.
(cd "$src" && _PYTHON_HOST_PLATFORM=linux-aarch64 nice -n "${FW_NICE:-10}" "$py" -m pip --disable-pip-version-check wheel -q --no-deps \
  --no-build-isolation -C build-dir="$work/wheel-tree/{wheel_tag}" \
  -C cmake.define.CMAKE_TOOLCHAIN_FILE="$root/packaging/cross/$triple.cmake" \
  -C cmake.define.Python_INCLUDE_DIR=/usr/include/python3.11 \
  -C cmake.define.PYTHON_MODULE_EXTENSION=.cpython-311-aarch64-linux-gnu.so -w "$raw" .) >&2
rm -f "$out"/floodwall-*-cp311-cp311-*aarch64.whl
PATH="$tools:$PATH" "$tools/python" -m auditwheel repair --plat auto -w "$out" "$raw"/floodwall-*.whl >&2
wheel=$(ls "$out"/floodwall-*-cp311-cp311-manylinux*_aarch64.whl)
unzip -l "$wheel" >"$work/wheel.files"
for lib in libhiredis libssl libcrypto; do
  grep -q "floodwall.libs/$lib" "$work/wheel.files" || { echo "test-cross-wheel: $lib is not bundled in $wheel" >&2; exit 1; }
done

pyroot=$work/py-root
if [ ! -x "$pyroot/usr/bin/python3.11" ]; then
  rm -rf "$pyroot" && mkdir -p "$pyroot/debs"
  (cd "$pyroot/debs" && apt-get download python3.11-minimal:arm64 >/dev/null 2>&1) ||
    { echo "test-cross-wheel: apt-get download python3.11-minimal:arm64 failed" >&2; exit 1; }
  dpkg -x "$pyroot"/debs/python3.11-minimal_*_arm64.deb "$pyroot"
fi
site=$work/py-site
rm -rf "$site"
"$py" -m pip --disable-pip-version-check install -q --target "$site" --no-deps --platform manylinux_2_34_aarch64 \
  --python-version 3.11 --implementation cp --only-binary=:all: "$wheel"
"$py" -m pip --disable-pip-version-check install -q --target "$site" pytest >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
arm_python() { PYTHONPATH=$site qemu-aarch64-static -L "$pyroot" "$pyroot/usr/bin/python3.11" "$@"; }
arm_python -c 'import platform, floodwall, sys; assert platform.machine() == "aarch64"; assert floodwall.__file__.startswith(sys.argv[1]), floodwall.__file__; print("test-cross-wheel: Python", platform.python_version(), platform.machine(), "imports", floodwall.__file__)' "$site"
arm_python -m pytest -q -p no:cacheprovider "$src/tests/python/test_api.py" "$src/tests/python/test_redis.py" \
  -k 'not test_processes_on_one_tenant_get_exactly_the_burst and not test_processes_holding_slots_never_exceed_the_concurrency_limit'
echo "test-cross-wheel: passed $(basename "$wheel")"
