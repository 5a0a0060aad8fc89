#!/usr/bin/env bash
# packaging/test-cross.sh [TRIPLE] - the core and the C ABI cross-compiled for another machine (default
# aarch64-linux-gnu: Linux arm64, glibc) from the committed tree, with packaging/cross/TRIPLE.cmake, into
# build-cross-TRIPLE/, and the C ABI's tests run under qemu-user-static against redis-servers of this
# machine (the tests start them; an x86_64 redis-server serves an arm64 client over TCP as any other).
#
# What runs: ctest -L capi (the C ABI's GoogleTest suite: admit, release, the headers, 429s, the Redis path,
# close and async; c_test, the plain-C program; exported_symbols), except Cli.*: those exec the floodwall
# command from inside the test, and an arm64 executable started by a process under qemu needs binfmt_misc,
# which this machine has not registered. The floodwall command is run under qemu here instead (--version,
# check, an override set and read back through Redis). FW_CROSS_CORE=1 runs the core's suite (ctest -L core) too.
# Needs: packaging/install-deps.sh platforms (the cross compiler, the :arm64 libraries, qemu-user-static).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
triple=${1:-aarch64-linux-gnu}
toolchain=$root/packaging/cross/$triple.cmake
[ -f "$toolchain" ] || { echo "test-cross: no toolchain file packaging/cross/$triple.cmake" >&2; exit 1; }
case $triple in
  aarch64-*) qemu=qemu-aarch64-static ;;
  x86_64-*) qemu= ;;
  *) echo "test-cross: which qemu runs $triple?" >&2; exit 1 ;;
esac
if [ -n "$qemu" ]; then
  command -v "$qemu" >/dev/null || { echo "test-cross: $qemu is missing (Debian: qemu-user-static; packaging/install-deps.sh platforms)" >&2; exit 1; }
fi
command -v redis-server >/dev/null || { echo "test-cross: redis-server is missing (packaging/install-deps.sh)" >&2; exit 1; }
work=$root/build-cross-$triple
src=$(bash packaging/snapshot.sh "$work/src" "${FW_REF:-HEAD}")
build=$work/build
# Release, as the packages are built. Warnings are not errors here: GCC 12's -Wrestrict reports a false
# positive in libstdc++'s operator+ at -O3 in the tests' helpers (GCC bug 105329); the core and the C ABI
# compile without warnings (make test's -Werror build checks them natively).
[ -f "$build/CMakeCache.txt" ] ||
  cmake -S "$src" -B "$build" -G Ninja -DCMAKE_TOOLCHAIN_FILE="$toolchain" -DCMAKE_BUILD_TYPE=Release \
    -DFW_BUILD_BENCH=OFF -DFW_BUILD_EXAMPLES=OFF -DFW_WERROR=OFF >/dev/null
targets=(capi_tests c_test floodwall floodwall_cli)
[ "${FW_CROSS_CORE:-0}" = 1 ] && targets+=(core_tests hot_tenants_tests)
nice -n "${FW_NICE:-10}" cmake --build "$build" -j "${JOBS:-2}" --target "${targets[@]}"
arch=$(file -b "$build/bin/floodwall")
echo "test-cross: $triple: bin/floodwall is $arch"
labels=capi
[ "${FW_CROSS_CORE:-0}" = 1 ] && labels='capi|core'
# A failed test is run once more (and said so by ctest): under emulation a call takes ten times as long,
# and a few tests take two admits 10 ms apart as back to back (CApiResponse.HeadersComeAsNameValuePairs...:
# rate 100, burst 1, the second admit a 429 only within 10 ms).
ctest --test-dir "$build" -L "$labels" -E '^Cli\.' -j "${JOBS:-2}" --timeout 300 --output-on-failure --repeat until-pass:2

# The floodwall command under qemu: its version, a policy check, and two decisions on a redis-server here.
run() { if [ -n "$qemu" ]; then "$qemu" "$build/bin/floodwall" "$@"; else "$build/bin/floodwall" "$@"; fi; }
version=$(run --version)
[ "$version" = "floodwall $(cat "$src/VERSION")" ] || { echo "test-cross: floodwall --version says '$version'" >&2; exit 1; }
tmp=$(mktemp -d)
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes --pidfile "$tmp/redis.pid" >/dev/null
trap '[ ! -s "$tmp/redis.pid" ] || kill "$(cat "$tmp/redis.pid")"; rm -rf "$tmp"' EXIT
for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.05; done
printf '{"store": "redis://127.0.0.1:%s/0", "prefix": "cross", "request_rate": {"rate": 0.001, "burst": 1}}\n' "$port" >"$tmp/policy.json"
run check --policy "$tmp/policy.json" >/dev/null
# An override written by the arm64 command is what Redis holds and what the command reads back.
run override set acme --rate 5 --burst 10 --policy "$tmp/policy.json" >/dev/null
keys=$(redis-cli -p "$port" --scan --pattern 'cross:*' | sort | tr '\n' ' ')
[ -n "$keys" ] || { echo "test-cross: the override reached no key under cross:" >&2; exit 1; }
run tenant show acme --policy "$tmp/policy.json" --json >"$tmp/show.json"
python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); assert "5" in json.dumps(d) and "10" in json.dumps(d), d' "$tmp/show.json"
echo "test-cross: $triple: the C ABI suite passed under ${qemu:-no emulator}; floodwall --version, check, override set and tenant show on Redis (keys: $keys)"
