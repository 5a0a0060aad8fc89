#!/usr/bin/env bash
# The Node suite (make test-node, and part of make test). `npm install` installs the package's
# dependencies and runs its install script, which builds the core (CMake, floodwall_static) and the
# Node-API addon against this Node's own headers; then node's test runner runs tests/node/, whose Redis
# tests start their own redis-server on a free port.
set -euo pipefail
cd "$(dirname "$0")/.."
for tool in node npm cmake redis-server; do
  command -v "$tool" >/dev/null || { echo "test-node: $tool is missing (run packaging/install-deps.sh)" >&2; exit 1; }
done
# Warnings are errors here (never in a user's `npm install`).
# And always from this checkout's sources, never a prebuilt addon left by an earlier run.
# One at a time (make test's lanes): e2e runs the same install in this tree.
mkdir -p build-node
FLOODWALL_WERROR=1 FLOODWALL_BUILD_FROM_SOURCE=1 flock build-node/.lock npm install --no-audit --no-fund --no-package-lock --no-update-notifier --loglevel=error
# A hung test fails after ten minutes instead of holding CI; the packed-tarball test builds the core anew.
node --test --test-timeout=600000 tests/node/
