#!/usr/bin/env bash
# packaging/snapshot.sh DIR [REF] - the files git tracks at REF (default HEAD) in DIR, for the package
# builds: what is packaged is what is committed, never the half-made edits of the working tree (other work
# goes on in it while packages build). Re-extracted only when REF names another commit (DIR/.snapshot-ref);
# prints DIR's absolute path.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$1
ref=${2:-HEAD}
sha=$(git rev-parse --verify "$ref^{commit}")
mkdir -p "$(dirname "$dir")"
dir=$(cd "$(dirname "$dir")" && pwd)/$(basename "$dir")
exec 8>"$dir.lock"
flock 8
if [ "$(cat "$dir/.snapshot-ref" 2>/dev/null)" != "$sha" ]; then
  rm -rf "$dir"
  mkdir -p "$dir"
  git archive --format=tar "$sha" | tar -x -C "$dir"
  echo "$sha" >"$dir/.snapshot-ref"
fi
echo "$dir"
