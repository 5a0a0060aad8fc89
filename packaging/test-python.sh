#!/usr/bin/env bash
# The Python suite: a virtual environment in build-python/venv (reused between runs), the test and build
# dependencies (pip, quietly; already-satisfied ones cost nothing), `pip install .` of the package
# from this checkout (incremental: scikit-build-core keeps its CMake tree in build-python/), then pytest.
# The tests start their own redis-server; a missing redis-server fails them.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
venv=build-python/venv
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
fi
py="$venv/bin/python"
pip() { "$py" -m pip --disable-pip-version-check -q "$@"; }
pip install "scikit-build-core>=0.10" "pybind11>=2.12" pytest fastapi uvicorn httpx flask
# Without build isolation the CMake tree stays valid between runs (pybind11 keeps its path).
pip install --no-build-isolation .
cd tests/python
exec "../../$py" -m pytest -q -p no:cacheprovider "$@"
