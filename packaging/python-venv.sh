#!/usr/bin/env bash
# packaging/python-venv.sh [PACKAGE...] - the Python environment the suites and the benchmark share:
# build-python/venv (made once, reused), the build dependencies, the PACKAGEs asked for (pip, quietly;
# already-satisfied ones cost nothing), then `pip install .` of floodwall from this checkout without
# build isolation (incremental: scikit-build-core keeps its CMake tree in build-python/). Prints the
# venv's python, by absolute path, as its last line. PYTHON names the interpreter that makes the venv.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=$(pwd)/build-python/venv
# One at a time: make test's lanes may prepare this venv for two suites at once.
mkdir -p build-python
exec 9>build-python/.lock
flock 9
[ -x "$venv/bin/python" ] || "${PYTHON:-python3}" -m venv "$venv"
pip() { "$venv/bin/python" -m pip --disable-pip-version-check -q "$@"; }
# jsonschema: tests/python/test_schema.py checks floodwall.schema.json with a real validator.
pip install "scikit-build-core>=0.10" "pybind11>=2.12" "jsonschema>=4.18" "$@" >&2
# Warnings are errors in this development venv (never in a user's `pip install`).
pip install --no-build-isolation -C cmake.define.FW_WERROR=ON . >&2
echo "$venv/bin/python"
