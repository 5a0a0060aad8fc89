#!/usr/bin/env bash
# packaging/check-macos.sh [TARGET] - does the core compile for macOS? Each source file of core/src and
# capi/src (the committed tree) compiled on this Linux machine by zig's clang for TARGET (default
# aarch64-macos: Apple Silicon; x86_64-macos for Intel) against zig's bundled macOS libc and libc++ headers
# (hiredis's, OpenSSL's and nlohmann-json's headers are this machine's: they are the same on every Unix).
# The Lua scripts' generated .cpp (string constants) is not among them.
# Prints, per file that does not compile, its first errors: the Linux-only calls a macOS build would meet.
# Exit 0 only when every file compiles. A compile check, not a test: nothing links or runs without a Mac.
# zig comes from PyPI (ziglang) into build-cross-tools/venv.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
target=${1:-aarch64-macos}
tools=$root/build-cross-tools
[ -x "$tools/venv/bin/python" ] || python3 -m venv "$tools/venv"
"$tools/venv/bin/python" -c 'import ziglang' 2>/dev/null || "$tools/venv/bin/python" -m pip -q install ziglang || exit 1
src=$(bash packaging/snapshot.sh "$tools/src" "${FW_REF:-HEAD}") || exit 1
# The library headers alone (not /usr/include, whose glibc headers would stand in for macOS's).
inc=$tools/macos-include
rm -rf "$inc" && mkdir -p "$inc/openssl"
ln -s /usr/include/hiredis "$inc/hiredis"
ln -s /usr/include/nlohmann "$inc/nlohmann"
for f in /usr/include/openssl/* /usr/include/"$(gcc -dumpmachine)"/openssl/*; do ln -sf "$f" "$inc/openssl/"; done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0 total=0
while read -r f; do
  total=$((total + 1))
  if ! (cd "$src" && nice -n "${FW_NICE:-10}" "$tools/venv/bin/python" -m ziglang c++ -target "$target" -std=c++20 -c \
      -o "$tmp/out.o" -Icore/src -Icapi/src -Icapi/include -I"$inc" "$f") >"$tmp/err" 2>&1; then
    failed=$((failed + 1))
    echo "== $f"
    grep -E 'error:' "$tmp/err" | sed "s|$src/||" | head -n 4
  fi
done < <(cd "$src" && find core/src capi/src -name '*.cpp' | sort)
echo "check-macos: $target: $((total - failed)) of $total files compile, $failed do not"
[ "$failed" -eq 0 ]
