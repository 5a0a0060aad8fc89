#!/usr/bin/env bash
# packaging/set-version.sh X.Y.Z - the version lives in VERSION; this writes it there and into the
# manifests that cannot read it (floodwall.h's macros, package.json, the gem's version.rb). CMake and the
# Python package read VERSION itself. make version-check (part of make test) fails when any disagrees.
set -euo pipefail
cd "$(dirname "$0")/.."
v=${1:?usage: packaging/set-version.sh X.Y.Z}
[[ $v =~ ^([0-9]+)\.([0-9]+)\.([0-9]+)$ ]] || { echo "set-version: $v is not X.Y.Z" >&2; exit 2; }
echo "$v" > VERSION
sed -i -E "s/^#define FW_VERSION_MAJOR .*/#define FW_VERSION_MAJOR ${BASH_REMATCH[1]}/; s/^#define FW_VERSION_MINOR .*/#define FW_VERSION_MINOR ${BASH_REMATCH[2]}/; s/^#define FW_VERSION_PATCH .*/#define FW_VERSION_PATCH ${BASH_REMATCH[3]}/; s/^#define FW_VERSION_STRING .*/#define FW_VERSION_STRING \"$v\"/" capi/include/floodwall.h
sed -i -E "0,/\"version\": \"[^\"]*\"/s//\"version\": \"$v\"/" package.json
sed -i -E "s/VERSION = \"[^\"]*\"/VERSION = \"$v\"/" bindings/ruby/lib/floodwall/version.rb
sed -i -E "s/floodwall-[0-9][0-9A-Za-z.]*\.(tgz|gem|whl|tar\.gz)/floodwall-$v.\1/g" README.md  # its commands
bash packaging/check-version.sh
