#!/usr/bin/env bash
# Runs every suite that exists, in order, and fails if any fails. Each suite that needs Redis starts
# its own throwaway redis-server on a free port; none skips itself when something is missing.
set -uo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
failed=()
run() {
  local name=$1; shift
  echo "==== $name"
  if "$@"; then echo "==== $name: passed"; else echo "==== $name: FAILED"; failed+=("$name"); fi
}
run "formatting (clang-format)" make --no-print-directory format-check
run "versions (VERSION and every manifest)" make --no-print-directory version-check
run "core and C ABI (GoogleTest, ctest)" ctest --test-dir "$build" --output-on-failure -j "$(nproc)"
[ "${FW_SANITIZERS:-1}" = 1 ] && run "core and C ABI under sanitizers" make --no-print-directory test-sanitizers
for suite in python wheel node ruby e2e fuzz soak; do
  [ -f "packaging/test-$suite.sh" ] && run "$suite" bash "packaging/test-$suite.sh"
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "make test: FAILED suites: ${failed[*]}"
  exit 1
fi
echo "make test: every suite passed"
