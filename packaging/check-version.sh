#!/usr/bin/env bash
# make version-check: every manifest says the version VERSION says.
set -euo pipefail
cd "$(dirname "$0")/.."
v=$(head -n 1 VERSION)
IFS=. read -r major minor patch <<<"$v"
fail=0
check() { [ "$2" = "$3" ] || { echo "version-check: $1 says '$2', VERSION says '$3' (packaging/set-version.sh $v)" >&2; fail=1; }; }
check "floodwall.h FW_VERSION_STRING" "$(sed -n -E 's/^#define FW_VERSION_STRING "(.*)"/\1/p' capi/include/floodwall.h)" "$v"
check "floodwall.h FW_VERSION_MAJOR.MINOR.PATCH" "$(sed -n -E 's/^#define FW_VERSION_(MAJOR|MINOR|PATCH) ([0-9]+)/\2/p' capi/include/floodwall.h | paste -sd.)" "$major.$minor.$patch"
check "package.json" "$(node -p 'require("./package.json").version')" "$v"
check "bindings/ruby/lib/floodwall/version.rb" "$(sed -n -E 's/.*VERSION = "(.*)".*/\1/p' bindings/ruby/lib/floodwall/version.rb)" "$v"
[ $fail = 0 ] && echo "version-check: $v everywhere (VERSION, CMake, pyproject, floodwall.h, package.json, the gem)"
exit $fail
