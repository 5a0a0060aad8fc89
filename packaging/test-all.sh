#!/usr/bin/env bash
# make test: installs what the suites need, builds, and runs every suite; fails if any fails. Each suite
# that needs Redis starts its own throwaway redis-server on a free port; none skips itself when something
# is missing.
#
# After the dependencies, the build and the two checks, the stages run in lanes: the stages of one lane in
# order, the lanes side by side, so that one suite's waiting (a failover, a server starting, a timer) is
# another's compiling. A stage's output goes to $LOGS/<stage>.log and is printed whole when the stage ends
# (no interleaving); each stage's wall time, CPU seconds and compiler-cache hits and misses are printed as it
# ends and again in a table at the end (CI keeps it in its log), so that the next slow-down shows where it
# went. FW_LANES=1 runs every stage one after the other instead.
set -uo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
# One compiler cache for every build of the core (core/ccache.cmake says how a copy of the sources in
# another folder still hits).
logs=${LOGS:-$PWD/$build/test-logs}
rm -rf "$logs"
mkdir -p "$logs"
: >"$logs/results"
started=$SECONDS

# cpu_s VAR: VAR = the CPU seconds (user + system) of every child this shell has waited for, from bash's
# `times`, run in this shell (in a $(...) or a pipe it would be a fresh child's, always 0).
cpu_s() {
  local f=$logs/.times.$BASHPID
  times >"$f"
  printf -v "$1" '%s' "$(awk 'NR == 2 { for (i = 1; i <= 2; i++) { split($i, t, /[ms]/); s += t[1] * 60 + t[2] } }
    END { printf "%d", s }' "$f")"
}

# stage NAME COMMAND...: one stage. Its result line goes to $logs/results (name, result, wall, CPU, ccache
# hits, misses); its status is the command's.
stage() {
  local name=$1
  shift
  local slug=${name%% (*}
  slug=${slug//[^A-Za-z0-9]/-}
  local log=$logs/$slug.log t0=$SECONDS c0 c1 result
  cpu_s c0
  echo "==== $name: started at $((SECONDS - started)) s"
  if CCACHE_STATSLOG=$logs/$slug.ccache "$@" >"$log" 2>&1; then result=passed; else result=FAILED; fi
  cpu_s c1
  local wall=$((SECONDS - t0)) cpu=$((c1 - c0)) hits misses
  hits=$(grep -cE '^(direct|preprocessed)_cache_hit$' "$logs/$slug.ccache" 2>/dev/null)
  misses=$(grep -c '^cache_miss$' "$logs/$slug.ccache" 2>/dev/null)
  {
    flock 9
    echo "==== $name"
    cat "$log"
    echo "==== $name: $result ($wall s, $cpu s of CPU, ccache ${hits:-0} hits ${misses:-0} misses)"
    printf '%s\t%s\t%d\t%d\t%d\t%d\n' "$name" "$result" "$wall" "$cpu" "${hits:-0}" "${misses:-0}" >>"$logs/results"
  } 9>"$logs/.lock"
  [ "$result" = passed ]
}

suite() { [ -f "packaging/test-$1.sh" ] || { echo "make test: packaging/test-$1.sh is missing" >&2; return 1; }; bash "packaging/test-$1.sh"; }

# The lanes. Suites that prepare one directory take turns by a lock (the Python venv in build-python/,
# the repo's node_modules and build-node/, the gem's vendored core in bindings/ruby/ext/). The sanitizers'
# builds run at a slightly lower priority (nice 5), so that the suites' timing changes less with what runs
# beside them; not lower, for their lane is the longest when the compiler cache is cold. Warm (a re-run,
# or a fresh clone on a machine that has run make test), the builds are cache hits and the lanes end
# within minutes of each other.
lane_core() {
  stage "core and C ABI (GoogleTest, ctest)" ctest --test-dir "$build" --output-on-failure -j "$(nproc)"
  stage "soak" suite soak
  stage "monitoring" suite monitoring
  stage "docs (MkDocs --strict, links)" make --no-print-directory docs
  stage "fuzz" suite fuzz
  stage "install" suite install
}
lane_sanitizers() {
  stage "ASan+UBSan build" nice -n 5 bash packaging/test-sanitizers.sh asan build
  stage "core and C ABI under ASan+UBSan" bash packaging/test-sanitizers.sh asan test
  stage "TSan build" nice -n 5 bash packaging/test-sanitizers.sh tsan build
  stage "core and C ABI under TSan" bash packaging/test-sanitizers.sh tsan test
}
lane_bindings() {
  stage "python" suite python
  stage "node" suite node
  stage "ruby" suite ruby
  stage "e2e" suite e2e
  stage "wheel" suite wheel
}

stage "dependencies (packaging/install-deps.sh)" bash packaging/install-deps.sh
stage "build (core, C ABI, tests)" make --no-print-directory build-only BUILD="$build"
stage "formatting (clang-format)" make --no-print-directory format-check
stage "layers (core/src includes)" python3 packaging/check-layers.py
stage "versions (VERSION and every manifest)" make --no-print-directory version-check
lanes=(lane_core lane_bindings)
[ "${FW_SANITIZERS:-1}" = 1 ] && lanes+=(lane_sanitizers)
if [ "${FW_LANES:-}" = 1 ]; then
  for lane in "${lanes[@]}"; do "$lane"; done
else
  pids=()
  for lane in "${lanes[@]}"; do
    "$lane" &
    pids+=($!)
  done
  wait "${pids[@]}"
fi

echo
echo "make test: stage                                   result     wall      CPU  ccache hits misses"
awk -F'\t' '{ printf "  %-46s %-7s %6d s %6d s %6d %6d\n", $1, $2, $3, $4, $5, $6 }' "$logs/results"
cpu_s total_cpu
printf '  %-46s %-7s %6d s %6d s\n' "total" "" "$((SECONDS - started))" "$total_cpu"
echo "  (the lanes run side by side: the stages' wall times add up to more than the total; logs in $logs)"
failed=$(awk -F'\t' '$2 != "passed" { printf "%s%s", sep, $1; sep = ", " }' "$logs/results")
if [ -n "$failed" ]; then
  echo "make test: FAILED: $failed"
  exit 1
fi
echo "make test: every suite passed"
