#!/usr/bin/env bash
# packaging/test-soak.sh [BUILD_DIR] - the soak of bench/soak/soak.cpp; make soak runs it at full length.
# Short by default for CI (1,000,000 admits on memory://, 200,000 on a throwaway redis-server the program
# starts on a free port and stops by its pid); SOAK_MEMORY_ADMITS and SOAK_REDIS_ADMITS set the lengths.
# Fails if RSS grows more than 5% after the warm-up or descriptors grow at all.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${1:-build}
[[ $BUILD = /* ]] || BUILD=$ROOT/$BUILD

command -v redis-server >/dev/null || { echo "soak: redis-server is missing: run packaging/install-deps.sh (Debian: apt-get install redis-server)" >&2; exit 1; }
# The soak is one of the benchmarks' targets: configure a build for it when there is none yet.
if [[ ! -f $BUILD/CMakeCache.txt ]]; then
  generator=()
  command -v ninja >/dev/null && generator=(-G Ninja)
  cmake -S "$ROOT" -B "$BUILD" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFW_BUILD_BENCH=ON >/dev/null
fi
cmake --build "$BUILD" --target floodwall_soak -j "${JOBS:-2}"
exec "$BUILD/bench/floodwall_soak" --memory "${SOAK_MEMORY_ADMITS:-1000000}" --redis "${SOAK_REDIS_ADMITS:-200000}"
