#!/usr/bin/env bash
# packaging/test-wheels.sh [VERSION...] - every CPython's wheel as its users meet it: built by
# packaging/build-wheels.sh (incremental; FW_WHEELS_BUILT=1 tests the wheels already in dist/), each
# installed with --no-index into a fresh venv of its own interpreter, then run through the Python suite's
# core tests from the same commit:
#   tests/python/test_api.py    admit, release, the headers, a 429 and its body, concurrency slots, modes,
#                               metrics, on memory:// and on a real redis-server (the `store` fixture)
#   tests/python/test_redis.py  one bucket shared through Redis by clients, threads and processes, the GIL
#                               released while a call waits, the fallback when Redis is down or late
# A missing interpreter, wheel or redis-server fails the run; nothing is skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
versions=("$@")
# Default: every version pyproject.toml's classifiers claim.
[ ${#versions[@]} -gt 0 ] || mapfile -t versions < <(grep -oE '"Programming Language :: Python :: 3\.[0-9]+"' pyproject.toml | grep -oE '3\.[0-9]+')
[ ${#versions[@]} -gt 0 ] || { echo "$(basename "$0"): pyproject.toml claims no Python version" >&2; exit 1; }
command -v redis-server >/dev/null || { echo "test-wheels: redis-server is missing (packaging/install-deps.sh)" >&2; exit 1; }
[ "${FW_WHEELS_BUILT:-0}" = 1 ] || bash packaging/build-wheels.sh "${versions[@]}" >/dev/null
src=$(bash packaging/snapshot.sh build-wheels/src "${FW_REF:-HEAD}")
version=$(cat "$src/VERSION")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=()
for v in "${versions[@]}"; do
  tag=cp${v/./}
  wheel=$(ls "${FW_DIST:-$root/dist}"/floodwall-"$version"-"$tag"-"$tag"-manylinux*.whl 2>/dev/null | head -n 1)
  [ -n "$wheel" ] || { echo "test-wheels: no $tag wheel of $version in dist/" >&2; exit 1; }
  py=$(ls "$root"/build-wheels/venv-"$v"/bin/python 2>/dev/null) || { echo "test-wheels: no build venv for $v" >&2; exit 1; }
  # The venv's base interpreter, not the build venv: a fresh venv with nothing but the wheel and pytest.
  base=$("$py" -c 'import sys; print(sys._base_executable)')
  "$base" -m venv "$work/venv-$v"
  vpy=$work/venv-$v/bin/python
  "$vpy" -m pip --disable-pip-version-check -q install --no-index "$wheel"
  "$vpy" -m pip --disable-pip-version-check -q install pytest
  (cd "$work" && "$vpy" - "$v" "$version" <<'PY'
import os, sys
import floodwall
want, version = sys.argv[1], sys.argv[2]
assert "%d.%d" % sys.version_info[:2] == want, sys.version
assert floodwall.__version__ == version, floodwall.__version__
assert os.path.realpath(floodwall.__file__).startswith(os.path.realpath(sys.prefix)), floodwall.__file__
print(f"test-wheels: Python {sys.version.split()[0]} imports floodwall {version} from {floodwall.__file__}")
PY
  )
  (cd "$work" && "$vpy" -m pytest -q -p no:cacheprovider "$src/tests/python/test_api.py" "$src/tests/python/test_redis.py")
  passed+=("$(basename "$wheel")")
done
printf 'test-wheels: passed %s\n' "${passed[@]}"
