#!/usr/bin/env bash
# Runs every suite that exists, in order, and fails if any fails. Each suite that needs Redis starts
# its own throwaway redis-server on a free port; none skips itself when something is missing.
# Each stage's wall time is printed as it ends and again in a table at the end (CI keeps it in its log), so
# that the next slow-down shows where it went.
set -uo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
# One compiler cache for every build of the core (the tests', the sanitizers', the wheel's, the addon's,
# the gem's from its unpacked copy): paths are hashed relative to each build, so a copy of the sources in
# another folder still hits.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-/} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-true}
failed=()
rows=()
started=$SECONDS
# The CPU seconds (user + system) of every child this shell has waited for, from bash's `times`.
cpu_s() { times | awk 'NR == 2 { for (i = 1; i <= 2; i++) { split($i, t, /[ms]/); s += t[1] * 60 + t[2] } } END { printf "%d", s }'; }
run() {
  local name=$1; shift
  local t0=$SECONDS c0 result
  c0=$(cpu_s)
  echo "==== $name"
  if "$@"; then result=passed; else result=FAILED; failed+=("$name"); fi
  local wall=$((SECONDS - t0)) cpu=$(($(cpu_s) - c0))
  echo "==== $name: $result ($wall s, $cpu s of CPU)"
  rows+=("$(printf '%-44s %-7s %6d s %6d s' "$name" "$result" "$wall" "$cpu")")
}
summary() {
  echo
  echo "make test: stage                                 result    time   CPU (user+sys, all cores)"
  printf '  %s\n' "${rows[@]}"
  printf '  %-44s %-7s %6d s\n' "total" "" "$((SECONDS - started))"
  if command -v ccache >/dev/null; then
    echo "  ccache: $(ccache --print-stats 2>/dev/null | awk -F'\t' '$1=="direct_cache_hit"||$1=="preprocessed_cache_hit"{h+=$2} $1=="cache_miss"{m=$2} END{printf "%d hits, %d misses (all runs on this machine)", h, m}')"
  fi
}
run "dependencies (packaging/install-deps.sh)" bash packaging/install-deps.sh
run "build (core, C ABI, tests)" make --no-print-directory build-only BUILD="$build"
run "formatting (clang-format)" make --no-print-directory format-check
run "versions (VERSION and every manifest)" make --no-print-directory version-check
run "core and C ABI (GoogleTest, ctest)" ctest --test-dir "$build" --output-on-failure -j "$(nproc)"
[ "${FW_SANITIZERS:-1}" = 1 ] && run "core and C ABI under sanitizers" make --no-print-directory test-sanitizers
for suite in python wheel node ruby e2e fuzz soak; do
  [ -f "packaging/test-$suite.sh" ] && run "$suite" bash "packaging/test-$suite.sh"
done
summary
if [ ${#failed[@]} -gt 0 ]; then
  echo "make test: FAILED suites: ${failed[*]}"
  exit 1
fi
echo "make test: every suite passed"
