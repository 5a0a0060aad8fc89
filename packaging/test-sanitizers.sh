#!/usr/bin/env bash
# packaging/test-sanitizers.sh [asan|tsan|all] [build|test|all] - the core and C ABI tests under ASan+UBSan
# (a Debug build in build-asan) and under TSan (build-tsan). make test-sanitizers runs all of it; make test
# runs the builds and the tests as stages of their own, so that a build overlaps another suite's waiting.
#
# ASan+UBSan runs every core and C ABI test but these:
# - ForkingWhileOtherThreads forks while other threads allocate: GCC 12's ASan does not hold its
#   allocator's locks across fork(), so a thread the child starts can hang inside ASan's own allocator
#   (seen with gdb: AsanThread::Init -> free -> SizeClassAllocator64 mutex); the plain build runs it.
# - Fork.AChildNeverReleasesTheParentsTickets forks while the Redis store's I/O thread runs: its child hung
#   once in three ASan runs of make test (2026-12-07; never in 60 runs alone, never in the plain build),
#   most likely the same ASan allocator lock; the plain build runs it.
# - AdmitsBeyondWhatRedisAnswersInTime (20,000 admits at once must find Redis answering within 50 ms): a
#   sanitizer's slowdown on two cores starves Redis for whole deadlines, which the breaker rightly takes
#   for silence. Neither sanitizer runs it; the plain build does.
# TSan runs the concurrency, Redis, TLS, Sentinel, close and lease tests, not the Fork tests nor the lease
# and sentinel ones that fork a client: TSan does not support a child that starts threads after a
# multi-threaded fork, which is what they do.
set -euo pipefail
cd "$(dirname "$0")/.."
which=${1:-all}
step=${2:-all}
jobs=${JOBS:-$(nproc)}
asan_build=${SAN_BUILD:-build-asan}
tsan_build=${TSAN_BUILD:-build-tsan}
skip='ForkingWhileOtherThreads|AChildNeverReleasesTheParentsTickets|AdmitsBeyondWhatRedisAnswersInTime'

if [[ $which = asan || $which = all ]]; then
  if [[ $step = build || $step = all ]]; then
    cmake -S . -B "$asan_build" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DFW_WERROR=ON -DFW_SANITIZE=address,undefined \
      -DFW_BUILD_BENCH=OFF >/dev/null
    cmake --build "$asan_build" -j "$jobs" --target core_tests hot_tenants_tests capi_tests c_test
  fi
  if [[ $step = test || $step = all ]]; then
    ASAN_OPTIONS=detect_leaks=1 ctest --test-dir "$asan_build" --output-on-failure -j "$jobs" -LE install -E "$skip"
  fi
fi
if [[ $which = tsan || $which = all ]]; then
  if [[ $step = build || $step = all ]]; then
    cmake -S . -B "$tsan_build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFW_WERROR=ON -DFW_SANITIZE=thread \
      -DFW_BUILD_BENCH=OFF >/dev/null
    cmake --build "$tsan_build" -j "$jobs" --target core_tests hot_tenants_tests capi_tests
  fi
  if [[ $step = test || $step = all ]]; then
    TSAN_OPTIONS=halt_on_error=1 ctest --test-dir "$tsan_build" --output-on-failure -j "$jobs" \
      -R 'Concurren|Threads|Redis|Lease|Close|NeverInline|Tls|Acl|Sentinel(Tls)?\.' \
      -E "^Fork\\.|Lease.AForkedChild|Sentinel.AForkedChild|$skip"
  fi
fi
