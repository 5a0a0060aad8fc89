#!/usr/bin/env bash
# `make install` as a C user meets it: install into a throwaway prefix, then build the README's quick start
# against it twice, through pkg-config and through CMake's find_package(floodwall), and run both; and the
# floodwall command it installs to bin/.
set -euo pipefail
build=$1
src=$2
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig:$prefix/lib/x86_64-linux-gnu/pkgconfig"
libdir=$(pkg-config --variable=libdir floodwall)
cc -std=c99 -Wall -Wextra -pedantic -Werror "$src/examples/c/quickstart.c" -o "$prefix/quickstart" \
  $(pkg-config --cflags --libs floodwall)
LD_LIBRARY_PATH="$libdir" "$prefix/quickstart" | grep -q '^200$'

mkdir -p "$prefix/consumer"
cp "$src/examples/c/quickstart.c" "$prefix/consumer/"
cat > "$prefix/consumer/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.20)
project(consumer C)
find_package(floodwall REQUIRED)
add_executable(quickstart quickstart.c)
target_link_libraries(quickstart PRIVATE floodwall::floodwall)
CMAKE
cmake -S "$prefix/consumer" -B "$prefix/consumer/build" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$prefix/consumer/build" >/dev/null
"$prefix/consumer/build/quickstart" | grep -q '^200$'
# The floodwall command, installed to bin/ and runnable from there (the library is linked into it).
"$prefix/bin/floodwall" --version | grep -q '^floodwall [0-9]*\.[0-9]*\.[0-9]*$'
"$prefix/bin/floodwall" check --help | grep -q '^Usage: floodwall check --policy FILE$'
echo "install_test: pkg-config and find_package consumers built and ran; bin/floodwall runs"
