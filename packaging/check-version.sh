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
# The README's commands name the packages they build (floodwall-X.Y.Z.tgz, .gem, .whl, .tar.gz): each must
# be this version, or a copied command installs a file that is not there.
while read -r line; do
  check "README.md line ${line%%:*} (${line#*:})" "$(sed -E 's/^floodwall-//; s/\.(tgz|gem|whl|tar\.gz)$//' <<<"${line#*:}")" "$v"
done < <(grep -n -o -E 'floodwall-[0-9][0-9A-Za-z.]*\.(tgz|gem|whl|tar\.gz)' README.md)
[ $fail = 0 ] && echo "version-check: $v everywhere (VERSION, CMake, pyproject, floodwall.h, package.json, the gem, the README's commands)"
exit $fail
