#!/usr/bin/env bash
# packaging/docs-venv.sh - the environment `make docs` builds the site with: build-docs/venv (made once,
# reused), MkDocs and mkdocs-material at the versions below, installed with pip. Reinstalled only when this
# file changes (a stamp of it in the venv). Prints the venv's python, by absolute path, as its last line.
# PYTHON names the interpreter that makes the venv.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=$(pwd)/build-docs/venv
mkdir -p build-docs
exec 9>build-docs/.lock
flock 9
# The lock: what the site is built with. Change a version here and the venv is brought to it.
requirements=(
  "mkdocs==1.6.1"
  "mkdocs-material==9.5.49"
)
stamp=$(printf '%s\n' "${requirements[@]}" | sha1sum | cut -d' ' -f1)
[ -x "$venv/bin/python" ] || "${PYTHON:-python3}" -m venv "$venv"
if [ "$(cat "$venv/.docs-stamp" 2>/dev/null)" != "$stamp" ] || ! "$venv/bin/python" -c 'import mkdocs, material' 2>/dev/null; then
  rm -f "$venv/.docs-stamp"
  "$venv/bin/python" -m pip --disable-pip-version-check -q install "${requirements[@]}" >&2
  echo "$stamp" >"$venv/.docs-stamp"
fi
echo "$venv/bin/python"
