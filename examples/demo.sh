#!/usr/bin/env bash
# make demo: the seed's stories on the embedded memory store (no Redis needed).
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
"$build/examples/floodwall_story"
