#!/usr/bin/env bash
# The CI length of `make fuzz`: every libFuzzer target of fuzz/ for 30 s under ASan and UBSan
# (packaging/run-fuzz.sh does the work; FUZZ_SECONDS overrides the length).
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZ_SECONDS=${FUZZ_SECONDS:-30} exec bash packaging/run-fuzz.sh "$@"
