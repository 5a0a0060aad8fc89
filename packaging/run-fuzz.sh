#!/usr/bin/env bash
# packaging/run-fuzz.sh [BUILD_DIR] - the entry of `make fuzz` (and of packaging/test-fuzz.sh, for CI).
#
# Builds the libFuzzer targets of fuzz/ with clang, ASan and UBSan into BUILD_DIR (default build-fuzz, a
# project of its own: the main build is untouched), then runs each for FUZZ_SECONDS (default 60), FUZZ_PARALLEL
# of them at a time (default: one per core), from its seed corpus fuzz/corpus/<target>/. What a run finds
# beyond the seeds goes to BUILD_DIR/corpus/<target> (kept between runs, never into the tree). Any crash,
# leak, UB, time-out or out-of-memory fails the run and leaves the input in BUILD_DIR/artifacts/, with the
# command that replays it.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${1:-build-fuzz}
[[ $BUILD = /* ]] || BUILD=$ROOT/$BUILD
SECONDS_EACH=${FUZZ_SECONDS:-60}
JOBS=${JOBS:-2}

# One line saying what to install, never a skip: a fuzz suite that quietly did nothing would pass.
install_hint="run packaging/install-deps.sh (Debian: apt-get install clang libclang-rt-14-dev)"
command -v clang++ >/dev/null || { echo "fuzz: clang++ is missing: $install_hint" >&2; exit 1; }
runtime="$(clang++ -print-resource-dir)/lib/linux/libclang_rt.fuzzer-$(uname -m).a"
[[ -f $runtime ]] || { echo "fuzz: libFuzzer ($runtime) is missing: $install_hint" >&2; exit 1; }

if [[ ! -f $BUILD/CMakeCache.txt ]]; then
  generator=()
  command -v ninja >/dev/null && generator=(-G Ninja)
  CC=clang CXX=clang++ cmake -S "$ROOT/fuzz" -B "$BUILD" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
cmake --build "$BUILD" -j "$JOBS"

# -max_len per target: big enough for what the input means (a policy document, a request's headers, a
# decision and a docs_url, a cluster's slot map), small enough that a minute is spent on shapes rather than
# on long inputs.
targets=(policy_fuzz:4096 tenant_key_fuzz:256 request_tenant_fuzz:2048 formatter_fuzz:640 resp_fuzz:1024
  cluster_map_fuzz:2048)

# UBSan must stop at the first report (the objects are built with -fno-sanitize-recover too), and leaks
# count: libFuzzer checks for them after each input that allocated.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

mkdir -p "$BUILD/artifacts" "$BUILD/logs"

# One target's run: its exit status into logs/<target>.rc. Each target is single-threaded, so they run
# FUZZ_PARALLEL at a time (default: one per core), each for the whole FUZZ_SECONDS.
fuzz_one() {
  local target=$1 max_len=$2 seeds=$ROOT/fuzz/corpus/$1 work=$BUILD/corpus/$1 log=$BUILD/logs/$1.log rc=0
  local dict=()
  mkdir -p "$work"
  [[ -f $ROOT/fuzz/$target.dict ]] && dict=(-dict="$ROOT/fuzz/$target.dict")
  # -timeout: one input taking 10 s is a hang, which is a finding too. -rss_limit_mb: libFuzzer's default.
  "$BUILD/$target" -max_total_time="$SECONDS_EACH" -max_len="$max_len" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$BUILD/artifacts/$target-" "${dict[@]}" "$work" "$seeds" >"$log" 2>&1 || rc=$?
  echo "$rc" >"$BUILD/logs/$target.rc"
}

parallel=${FUZZ_PARALLEL:-$(nproc)}
running=0
for entry in "${targets[@]}"; do
  target=${entry%%:*}
  [[ -d $ROOT/fuzz/corpus/$target ]] || { echo "fuzz: $target has no seed corpus at fuzz/corpus/$target" >&2; exit 1; }
  rm -f "$BUILD/logs/$target.rc"
  echo "fuzz: $target for ${SECONDS_EACH}s (max_len ${entry##*:})"
  fuzz_one "$target" "${entry##*:}" &
  running=$((running + 1))
  if [[ $running -ge $parallel ]]; then
    wait -n || true
    running=$((running - 1))
  fi
done
wait

failed=()
for entry in "${targets[@]}"; do
  target=${entry%%:*}
  log=$BUILD/logs/$target.log
  rc=$(cat "$BUILD/logs/$target.rc" 2>/dev/null || echo "no status")
  stats=$(grep -E '^stat::(number_of_executed_units|peak_rss_mb)' "$log" | awk '{printf "%s %s  ", $1, $2}' || true)
  cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -n 1 || true)
  if [[ $rc == 0 ]]; then
    echo "fuzz: $target passed: ${cov}  ${stats}"
  else
    failed+=("$target")
    echo "fuzz: $target FAILED (exit $rc); the sanitizer's report (full log: $log):"
    # The first report, up to its SUMMARY line, without libFuzzer's progress lines and its own frames.
    awk '/runtime error|ERROR: |invariant failed|terminate called|is not JSON/ {p = 1} p {print} p && /^SUMMARY:/ {exit}' "$log" |
      grep -vE '^#[0-9]+|^INFO:|in fuzzer::|in __libc_start|in _start|in main ' | head -n 30
    artifact=$(ls -t "$BUILD/artifacts/$target-"* 2>/dev/null | head -n 1 || true)
    [[ -n $artifact ]] && echo "fuzz: replay with: $BUILD/$target $artifact"
  fi
done
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "fuzz: FAILED: ${failed[*]}"
  exit 1
fi
echo "fuzz: every target ran ${SECONDS_EACH}s without a finding"
