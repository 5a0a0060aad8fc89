#!/usr/bin/env bash
# packaging/check-docs.sh - `make docs`: builds the docs site into site/ and checks it.
#   1. the docs venv (packaging/docs-venv.sh: MkDocs and mkdocs-material, pip-installed into build-docs/venv)
#   2. the API references (Python, Node, Ruby, C) generated from the code into docs/reference/api/
#      (packaging/docs-api.py), and
#      bench/RESULTS.md copied to docs/bench-results.md (neither committed: .gitignore)
#   3. mkdocs build --strict into site/: a warning is an error (a page missing from the nav, a link to a
#      page or an anchor that does not exist)
#   4. packaging/check-docs.py: the nav both ways, every internal link of docs/ and of the README,
#      CONTRIBUTING, SECURITY and CHANGELOG, the policy reference against floodwall.schema.json both ways,
#      the ACL rules tests/python/test_acl.py reads.
set -euo pipefail
cd "$(dirname "$0")/.."
py=$(bash packaging/docs-venv.sh | tail -n 1)
"$py" packaging/docs-api.py docs/reference/api
# bench/RESULTS.md (what make bench last wrote) as a page of the site, under a title of its own.
{ printf '# Benchmark results (bench/RESULTS.md)\n\n<!-- Copied from bench/RESULTS.md by make docs: edit that file. -->\n\n'
  sed -E 's/^(#+) /#\1 /' bench/RESULTS.md; } >docs/bench-results.md
"$py" -m mkdocs build --strict --clean --site-dir site || { echo "make docs: mkdocs build --strict failed" >&2; exit 1; }
"$py" packaging/check-docs.py
echo "make docs: site/index.html"
