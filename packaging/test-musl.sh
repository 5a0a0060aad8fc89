#!/usr/bin/env bash
# packaging/test-musl.sh [TRIPLE] - the core, the C ABI and the Node addon for Linux with musl (Alpine), built
# on this x86_64 Debian by zig (PyPI's ziglang: clang with its own musl and libc++) from the committed tree.
# TRIPLE: x86_64-linux-musl (default) or aarch64-linux-musl.
#
# 1. The dependencies, built once for TRIPLE from pinned sources into build-musl/TRIPLE (static libraries;
#    packaging/cross/musl.cmake finds them there): hiredis (the C sources PyPI's hiredis sdist vendors),
#    OpenSSL (the source tree crates.io's openssl-src carries, fetched by cargo into a throwaway CARGO_HOME),
#    nlohmann-json (this machine's headers: header-only) and GoogleTest (Debian's /usr/src/googletest). A cold
#    run takes minutes (OpenSSL), a warm one only rebuilds floodwall. Each download is checked by sha256.
# 2. The C ABI's suite, ctest -L capi (its GoogleTest suite, c_test, exported_symbols), built with
#    packaging/cross/TRIPLE.cmake into build-musl/TRIPLE-build and run against redis-servers of this machine.
#    A musl executable needs musl's loader: Debian's musl package is unpacked into build-musl/TRIPLE/musl-root
#    (nothing installed in /lib) and the test build names that loader as the executables' interpreter, so
#    x86_64 runs natively and arm64 under qemu-user-static. Under qemu, Cli.* is left out as in test-cross.sh
#    (an arm64 executable started by a process under qemu needs binfmt_misc, not registered here).
# 3. The Node addon, prebuilds/linux-<arch>-musl/floodwall.node (hiredis, OpenSSL and libc++ linked in), built
#    by bindings/node/scripts/build.js --prebuild with the toolchain file; checked with readelf: it needs
#    only musl's libc and exports napi_register_module_v1. It is not loaded here: there is no musl Node (an
#    Alpine runner, node:alpine, would run tests/node on it). FW_MUSL_NODE=0 skips it.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
triple=${1:-x86_64-linux-musl}
case $triple in
  x86_64-linux-musl) arch=x64 deb_arch=amd64 qemu= ossl_target=linux-x86_64 loader=ld-musl-x86_64.so.1 ;;
  aarch64-linux-musl) arch=arm64 deb_arch=arm64 qemu=qemu-aarch64-static ossl_target=linux-aarch64 loader=ld-musl-aarch64.so.1 ;;
  *) echo "test-musl: unknown target $triple (x86_64-linux-musl or aarch64-linux-musl)" >&2; exit 1 ;;
esac
if [ -n "$qemu" ]; then
  command -v "$qemu" >/dev/null || { echo "test-musl: $qemu is missing (Debian: qemu-user-static; packaging/install-deps.sh platforms)" >&2; exit 1; }
fi
for tool in redis-server cmake ninja pkg-config cargo readelf; do
  command -v $tool >/dev/null || { echo "test-musl: $tool is missing (packaging/install-deps.sh; cargo: rustup or Debian's cargo)" >&2; exit 1; }
done
nice=(nice -n "${FW_NICE:-10}")
jobs=${JOBS:-2}
work=$root/build-musl
prefix=$work/$triple
mkdir -p "$prefix/bin" "$prefix/lib/pkgconfig" "$prefix/include" "$work/downloads"
say() { echo "test-musl: $triple: $*"; }

# The pinned sources.
HIREDIS_PYPI=3.1.0 # PyPI's hiredis 3.1.0 vendors hiredis 1.2.0
HIREDIS_SDIST=hiredis-$HIREDIS_PYPI.tar.gz
HIREDIS_SHA256=51d40ac3611091020d7dea6b05ed62cb152bff595fa4f931e7b6479d777acf7c
OPENSSL_CRATE=300.6.1+3.6.3 # crates.io openssl-src, OpenSSL 3.6.3
OPENSSL_SHA256=46eb8fb9fb3b61ce1c0f8a026c4c1a0714d3a9e138e7fbde78753ce2babc3846
check_sha() { echo "$2  $1" | sha256sum --quiet -c - || { echo "test-musl: $1 is not the pinned file (sha256)" >&2; exit 1; }; }

# zig, in the venv check-macos.sh uses too.
tools=$root/build-cross-tools
[ -x "$tools/venv/bin/python" ] || python3 -m venv "$tools/venv"
"$tools/venv/bin/python" -c 'import ziglang' 2>/dev/null || "$tools/venv/bin/python" -m pip -q install ziglang
zig=$("$tools/venv/bin/python" -c 'import os, ziglang; print(os.path.join(os.path.dirname(ziglang.__file__), "zig"))')
# zig's cache (the libc++ and musl it builds per target) in build-musl, not in $HOME.
export ZIG_GLOBAL_CACHE_DIR=$work/zig-cache ZIG_LOCAL_CACHE_DIR=$work/zig-cache
# The wrappers: zig as each tool. (zig's linker has no --exclude-libs: the addon and the Python module keep
# their archives' symbols local with a version script instead, which every ELF linker has.)
rm -f "$prefix/bin/node-addon.map"
for t in cc c++ ar ranlib; do
  case $t in cc | c++) args="$t -target $triple" ;; *) args=$t ;; esac
  {
    printf '#!/bin/sh\n# zig %s for %s (packaging/test-musl.sh writes this file)\n' "$t" "$triple"
    printf 'ZIG_GLOBAL_CACHE_DIR=%s ZIG_LOCAL_CACHE_DIR=%s exec %s %s "$@"\n' "$ZIG_GLOBAL_CACHE_DIR" "$ZIG_LOCAL_CACHE_DIR" "$zig" "$args"
  } >"$prefix/bin/$t.new"
  chmod +x "$prefix/bin/$t.new" && mv "$prefix/bin/$t.new" "$prefix/bin/$t"
done
say "zig $("$zig" version)"

# musl's loader: Debian's musl package, unpacked (its libc.so is the loader and the libc in one file).
muslroot=$prefix/musl-root
interp=$muslroot/lib/$loader
if [ ! -f "$interp" ]; then
  rm -rf "$muslroot" && mkdir -p "$muslroot/debs"
  (cd "$muslroot/debs" && apt-get download "musl:$deb_arch" >/dev/null 2>&1) ||
    { echo "test-musl: apt-get download musl:$deb_arch failed (Debian's musl, for its loader)" >&2; exit 1; }
  dpkg -x "$muslroot"/debs/musl_*.deb "$muslroot"
  [ -f "$interp" ] || { echo "test-musl: Debian's musl:$deb_arch has no lib/$loader" >&2; exit 1; }
fi
musl_version=$(dpkg-deb -f "$muslroot"/debs/musl_*.deb Version)

# hiredis: the C sources the PyPI sdist vendors (vendor/hiredis), compiled as its Makefile does.
if [ ! -f "$prefix/lib/libhiredis.a" ]; then
  say "building hiredis"
  [ -f "$work/downloads/$HIREDIS_SDIST" ] ||
    "$tools/venv/bin/python" -m pip download -q --no-binary :all: --no-deps "hiredis==$HIREDIS_PYPI" -d "$work/downloads"
  check_sha "$work/downloads/$HIREDIS_SDIST" "$HIREDIS_SHA256"
  src=$prefix/src/hiredis && rm -rf "$src" && mkdir -p "$src"
  tar -xzf "$work/downloads/$HIREDIS_SDIST" -C "$src" --strip-components=3 "${HIREDIS_SDIST%.tar.gz}/vendor/hiredis"
  objs=()
  for c in alloc async hiredis net read sds sockcompat; do
    "${nice[@]}" "$prefix/bin/cc" -O2 -fPIC -std=c99 -Wall -c "$src/$c.c" -o "$src/$c.o"
    objs+=("$src/$c.o")
  done
  "$prefix/bin/ar" rcs "$src/libhiredis.a" "${objs[@]}"
  mkdir -p "$prefix/include/hiredis"
  cp "$src"/{alloc,async,hiredis,read,sds,sockcompat}.h "$prefix/include/hiredis/"
  v=$(sed -n 's/^#define HIREDIS_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)/\2/p' "$src/hiredis.h" | paste -sd.)
  printf 'prefix=%s\nlibdir=${prefix}/lib\nincludedir=${prefix}/include\n\nName: hiredis\nDescription: hiredis %s for musl (test-musl.sh)\nVersion: %s\nLibs: -L${libdir} -lhiredis\nCflags: -I${includedir}\n' \
    "$prefix" "$v" "$v" >"$prefix/lib/pkgconfig/hiredis.pc"
  mv "$src/libhiredis.a" "$prefix/lib/libhiredis.a"
fi

# OpenSSL: the source tree in crates.io's openssl-src, fetched by cargo (the registry's ordinary client) for a
# throwaway crate that depends on the pinned version; static libraries only.
if [ ! -f "$prefix/lib/libssl.a" ]; then
  crate=$work/downloads/openssl-src-$OPENSSL_CRATE.crate
  if [ ! -f "$crate" ]; then
    say "fetching openssl-src $OPENSSL_CRATE with cargo"
    fetch=$work/cargo-fetch && rm -rf "$fetch" && mkdir -p "$fetch/src"
    printf '[package]\nname = "fetch"\nversion = "0.0.0"\nedition = "2021"\n\n[dependencies]\nopenssl-src = "=%s"\n' "$OPENSSL_CRATE" >"$fetch/Cargo.toml"
    : >"$fetch/src/lib.rs"
    [ ! -f "${CARGO_HOME:-$HOME/.cargo}/config.toml" ] || cp "${CARGO_HOME:-$HOME/.cargo}/config.toml" "$fetch/"
    cargo_home=$fetch/cargo-home  # a throwaway CARGO_HOME: the crate lands in its registry cache
    (cd "$fetch" && CARGO_HOME=$cargo_home cargo fetch -q)
    cp "$(ls "$cargo_home"/registry/cache/*/"openssl-src-$OPENSSL_CRATE.crate" | head -n 1)" "$crate"
    rm -rf "$fetch"
  fi
  check_sha "$crate" "$OPENSSL_SHA256"
  say "building OpenSSL (a few minutes, once)"
  src=$prefix/src/openssl && rm -rf "$src" && mkdir -p "$src"
  tar -xzf "$crate" -C "$src" --strip-components=2 "openssl-src-$OPENSSL_CRATE/openssl"
  # no-async: musl has no makecontext/swapcontext, which OpenSSL's async jobs use (libssl does not need them).
  (cd "$src" && CC=$prefix/bin/cc AR=$prefix/bin/ar RANLIB=$prefix/bin/ranlib "${nice[@]}" ./Configure "$ossl_target" \
    --prefix="$prefix" --libdir=lib --openssldir=/etc/ssl no-shared no-module no-async no-tests no-docs no-apps no-engine \
    >"$src/configure.log" 2>&1 && "${nice[@]}" make -j "$jobs" build_libs >"$src/build.log" 2>&1 &&
    make install_dev >"$src/install.log" 2>&1) ||
    { tail -n 30 "$src"/*.log; echo "test-musl: OpenSSL did not build for $triple (logs in $src)" >&2; exit 1; }
fi

# nlohmann-json: header-only, this machine's headers and CMake package copied into the prefix (the
# toolchain file never looks in /usr, whose glibc headers must not stand in for musl's).
if [ ! -f "$prefix/share/cmake/nlohmann_json/nlohmann_jsonConfig.cmake" ]; then
  [ -d /usr/include/nlohmann ] || { echo "test-musl: nlohmann-json is missing (Debian: nlohmann-json3-dev)" >&2; exit 1; }
  cp -r /usr/include/nlohmann "$prefix/include/"
  mkdir -p "$prefix/share/cmake" && cp -r /usr/share/cmake/nlohmann_json "$prefix/share/cmake/"
fi

toolchain=$root/packaging/cross/$triple.cmake
# GoogleTest: Debian's sources (/usr/src/googletest), built with the same toolchain.
if [ ! -f "$prefix/lib/libgtest.a" ]; then
  [ -f /usr/src/googletest/CMakeLists.txt ] || { echo "test-musl: /usr/src/googletest is missing (Debian: googletest)" >&2; exit 1; }
  say "building GoogleTest"
  gb=$prefix/src/googletest-build
  rm -rf "$gb"
  cmake -S /usr/src/googletest -B "$gb" -G Ninja -DCMAKE_TOOLCHAIN_FILE="$toolchain" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_INSTALL_LIBDIR=lib >"$prefix/src/googletest.log" 2>&1 &&
    "${nice[@]}" cmake --build "$gb" -j "$jobs" >>"$prefix/src/googletest.log" 2>&1 &&
    cmake --install "$gb" >>"$prefix/src/googletest.log" 2>&1 ||
    { tail -n 30 "$prefix/src/googletest.log"; echo "test-musl: GoogleTest did not build for $triple" >&2; exit 1; }
fi
say "dependencies in $prefix: hiredis $(pkg-config --modversion "$prefix/lib/pkgconfig/hiredis.pc"), OpenSSL $(sed -n 's/^Version: //p' "$prefix/lib/pkgconfig/openssl.pc"), musl loader from Debian's musl $musl_version"
[ "${FW_MUSL_DEPS_ONLY:-0}" = 1 ] && exit 0

# The core and the C ABI, with the C ABI's suite; the test build's executables name the unpacked loader.
src=$(bash packaging/snapshot.sh "$work/$triple-src" "${FW_REF:-HEAD}")
build=$work/$triple-build
# Warnings are not errors here, as in test-cross.sh (make test's -Werror build checks the code natively).
[ -f "$build/CMakeCache.txt" ] ||
  cmake -S "$src" -B "$build" -G Ninja -DCMAKE_TOOLCHAIN_FILE="$toolchain" -DCMAKE_BUILD_TYPE=Release \
    -DFW_BUILD_BENCH=OFF -DFW_BUILD_EXAMPLES=OFF -DFW_WERROR=OFF -DFW_MUSL_INTERP="$interp" >/dev/null
say "building the core, the C ABI and its tests"
"${nice[@]}" cmake --build "$build" -j "$jobs" --target capi_tests c_test floodwall floodwall_cli >"$build/build.log" 2>&1 ||
  { grep -E 'error|FAILED' "$build/build.log" | head -n 40; echo "test-musl: the $triple build failed (log: $build/build.log)" >&2; exit 1; }
warnings=$(grep -c 'warning:' "$build/build.log" || true)
lib=$(readlink -f "$build"/libfloodwall.so)
say "libfloodwall.so is $(file -b "$lib" | cut -d, -f1-2); it needs $(readelf -d "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | paste -sd' '); $warnings compiler warnings"
case $(readelf -d "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ') in
  "libc.so ") ;;
  *) echo "test-musl: libfloodwall.so needs more than musl's libc" >&2; readelf -d "$lib" | grep NEEDED >&2; exit 1 ;;
esac
exclude=()
# Under qemu, what execs another executable of the target (see the top).
[ -n "$qemu" ] && exclude=(-E '^Cli\.')
# As in test-cross.sh, a failed test is run once more under emulation (and ctest says so); natively, never.
repeat=()
[ -n "$qemu" ] && repeat=(--repeat until-pass:2)
ctest --test-dir "$build" -L capi "${exclude[@]}" -j "$jobs" --timeout 300 --output-on-failure "${repeat[@]}" | tee "$build/ctest.log" | grep -vE '^ *([0-9]+/[0-9]+ Test|Start +[0-9]+:)' || true
grep -q '100% tests passed' "$build/ctest.log" || { echo "test-musl: the C ABI suite failed on $triple (log: $build/ctest.log)" >&2; exit 1; }
say "the C ABI suite passed ($(grep -E 'tests passed' "$build/ctest.log"))${qemu:+ under $qemu, Cli.* left out}"

# The floodwall command, as in test-cross.sh: its version and a decision through a redis-server here.
run() { if [ -n "$qemu" ]; then "$qemu" "$build/bin/floodwall" "$@"; else "$build/bin/floodwall" "$@"; fi; }
version=$(run --version)
[ "$version" = "floodwall $(cat "$src/VERSION")" ] || { echo "test-musl: floodwall --version says '$version'" >&2; exit 1; }
tmp=$(mktemp -d)
trap '[ ! -s "$tmp/redis.pid" ] || kill "$(cat "$tmp/redis.pid")"; rm -rf "$tmp"' EXIT
port=$(python3 -c 'import random, socket
while True:
    p = random.randint(20000, 31999); s = socket.socket()
    try: s.bind(("127.0.0.1", p)); print(p); break
    except OSError: pass')
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes --pidfile "$tmp/redis.pid" >/dev/null
for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.05; done
printf '{"store": "redis://127.0.0.1:%s/0", "prefix": "musl", "request_rate": {"rate": 0.001, "burst": 1}}\n' "$port" >"$tmp/policy.json"
run check --policy "$tmp/policy.json" >/dev/null
run override set acme --rate 5 --burst 10 --policy "$tmp/policy.json" >/dev/null
[ -n "$(redis-cli -p "$port" --scan --pattern 'musl:*')" ] || { echo "test-musl: the override reached no key under musl:" >&2; exit 1; }
run tenant show acme --policy "$tmp/policy.json" --json >"$tmp/show.json"
python3 -c 'import json, sys; d = json.dumps(json.load(open(sys.argv[1]))); assert "5" in d and "10" in d, d' "$tmp/show.json"
say "floodwall ($(file -b "$build/bin/floodwall" | cut -d, -f1,4 | sed 's/ *$//')): --version, check, override set and tenant show on Redis"

# The Node addon: prebuilds/linux-<arch>-musl/floodwall.node, built as make packages builds linux-arm64's.
[ "${FW_MUSL_NODE:-1}" = 1 ] || exit 0
[ -d "$root/node_modules/node-addon-api" ] || { echo "test-musl: run npm install in $root first (node-addon-api)" >&2; exit 1; }
nsrc=$(bash packaging/snapshot.sh "$work/$triple-npm-src" "${FW_REF:-HEAD}")
ln -sfn "$root/node_modules" "$nsrc/node_modules"
say "building the Node addon (linux-$arch-musl)"
(cd "$nsrc" && FLOODWALL_JOBS=$jobs FLOODWALL_PLATFORM=linux FLOODWALL_ARCH=$arch FLOODWALL_LIBC=musl \
  FLOODWALL_CMAKE_TOOLCHAIN=$toolchain "${nice[@]}" node bindings/node/scripts/build.js --prebuild >"$work/$triple-npm-build.log" 2>&1) ||
  { grep -E 'error|FAILED' "$work/$triple-npm-build.log" | head -n 40; echo "test-musl: the linux-$arch-musl addon did not build (log: $work/$triple-npm-build.log)" >&2; exit 1; }
addon=$nsrc/prebuilds/linux-$arch-musl/floodwall.node
[ -f "$addon" ] || { echo "test-musl: build.js wrote no prebuilds/linux-$arch-musl/floodwall.node" >&2; exit 1; }
# zig's libc++ comes with its debug information (36 of the addon's 45 MB): left out of what ships.
strip=$(command -v llvm-strip || command -v llvm-strip-14) || { echo "test-musl: llvm-strip is missing (Debian: llvm)" >&2; exit 1; }
"$strip" --strip-debug "$addon"
# What the addon needs where it runs: musl's libc alone (Alpine's loader resolves libc.so to itself), no
# glibc symbol versions; it exports napi_register_module_v1 (Node's entry point) and leaves napi_* to Node.
needed=$(readelf -d "$addon" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | paste -sd' ')
[ "$needed" = libc.so ] || { echo "test-musl: the addon needs $needed (only musl's libc.so expected)" >&2; exit 1; }
! readelf -V "$addon" | grep -q GLIBC_ || { echo "test-musl: the addon asks for glibc symbol versions" >&2; exit 1; }
machine=$(readelf -h "$addon" | sed -n 's/ *Machine: *//p')
readelf --dyn-syms -W "$addon" | awk '$5 == "GLOBAL" && $7 != "UND" && $8 == "napi_register_module_v1"' | grep -q . ||
  { echo "test-musl: the addon does not export napi_register_module_v1" >&2; exit 1; }
exported=$(readelf --dyn-syms -W "$addon" | awk '$5 == "GLOBAL" && $7 != "UND" {print $8}' | paste -sd' ')
# Every other symbol it needs (weak ones aside: libc++abi's __cxa_thread_atexit_impl, which only glibc has) is one
# that musl's libc defines (Debian's musl 1.2.3, the version Alpine 3.17 ships).
readelf --dyn-syms -W "$interp" | awk '$7 != "UND" && $8 != "" {sub(/@.*/, "", $8); print $8}' | sort -u >"$work/$triple-libc.syms"
readelf --dyn-syms -W "$addon" | awk '$7 == "UND" && $5 == "GLOBAL" && $8 != "" {sub(/@.*/, "", $8); print $8}' | grep -v '^napi_' | sort -u >"$work/$triple-addon.undefined"
missing=$(comm -23 "$work/$triple-addon.undefined" "$work/$triple-libc.syms" | paste -sd' ')
[ -z "$missing" ] || { echo "test-musl: the addon needs symbols musl's libc does not define: $missing" >&2; exit 1; }
undefined=$(wc -l <"$work/$triple-addon.undefined")
mkdir -p "$root/prebuilds/linux-$arch-musl"
cp "$addon" "$root/prebuilds/linux-$arch-musl/floodwall.node"
say "prebuilds/linux-$arch-musl/floodwall.node ($machine, $(stat -c %s "$addon") bytes): needs $needed; exports $exported; its $undefined other undefined symbols all in musl's libc. Not loaded: no musl Node here"
