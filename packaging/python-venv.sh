#!/usr/bin/env bash
# packaging/python-venv.sh [PACKAGE...] - the Python environment the suites and the benchmark share:
# build-python/venv (made once, reused), the build dependencies, the PACKAGEs asked for (pip, quietly;
# already-satisfied ones cost nothing), then `pip install .` of floodwall from this checkout without
# build isolation (incremental: scikit-build-core keeps its CMake tree in build-python/) when its sources
# changed. Prints the
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
# Warnings are errors in this development venv (never in a user's `pip install`). Reinstalled only when
# floodwall's sources changed since the last install into this venv: a reinstall replaces the package's
# files under a suite that runs from it in another of make test's lanes. Outside a git checkout, always.
stamp=
if [ "$(git rev-parse --show-toplevel 2>/dev/null)" = "$(pwd)" ]; then
  stamp=$(git ls-files -z core capi lua bindings/python CMakeLists.txt pyproject.toml VERSION floodwall.schema.json |
    xargs -0 cat | sha1sum | cut -d' ' -f1)
fi
if [ -z "$stamp" ] || [ "$(cat "$venv/.floodwall-stamp" 2>/dev/null)" != "$stamp" ] ||
  ! "$venv/bin/python" -c 'import floodwall' 2>/dev/null; then
  rm -f "$venv/.floodwall-stamp"
  pip install --no-build-isolation -C cmake.define.FW_WERROR=ON . >&2
  [ -z "$stamp" ] || echo "$stamp" >"$venv/.floodwall-stamp"
fi
echo "$venv/bin/python"
