#!/usr/bin/env bash
# packaging/build-musl-wheel.sh [TRIPLE] - the musllinux wheel (Alpine: pip on a musl CPython picks it by its
# tag) for one CPython (FW_MUSL_PYTHON, default 3.11), built on this x86_64 Debian by zig with the musl
# toolchain of packaging/test-musl.sh (packaging/cross/TRIPLE.cmake; hiredis, OpenSSL and libc++ linked in
# statically, so the module needs only musl's libc and no auditwheel repair), then checked and, for
# x86_64, run. TRIPLE: x86_64-linux-musl (default) or aarch64-linux-musl (built and checked, not run).
#
# 1. The wheel: pip wheel with scikit-build-core, the toolchain file as CMAKE_TOOLCHAIN_FILE, the platform tag
#    musllinux_1_2_<arch> (_PYTHON_HOST_PLATFORM) and the module named for a musl CPython
#    (_floodwall.cpython-3XY-<arch>-linux-musl.so: SETUPTOOLS_EXT_SUFFIX, PYTHON_MODULE_EXTENSION), pybind11's
#    CMake package named by pybind11_DIR (the toolchain searches the musl prefix alone). The
#    headers are those of pyenv's CPython 3.XY (an extension's ABI does not depend on the libc it was
#    configured with). Into dist/ (FW_DIST).
# 2. Its link, with readelf: it needs only libc.so, has no glibc symbol version, exports PyInit__floodwall
#    alone, and every other symbol it needs (Python's aside) is in musl 1.2.3's libc (Debian's, as Alpine
#    3.17 ships; zig builds against musl 1.2.5's headers).
# 3. Run (x86_64; FW_MUSL_WHEEL_TEST=0 skips it): a musl CPython 3.XY built here once by Debian's musl-gcc
#    (musl-tools) from Debian's python3.XY source package (apt-get source; no ssl, zlib or ctypes: none is
#    needed), the wheel installed for it by pip with the target's tags (--platform musllinux_1_2_x86_64
#    --python-version 3.XY: pip refuses a wheel whose tags do not fit) with pytest, then
#    tests/python/test_api.py and test_redis.py run by that interpreter against redis-servers here.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
triple=${1:-x86_64-linux-musl}
case $triple in
  x86_64-linux-musl | aarch64-linux-musl) arch=${triple%%-*} ;;
  *) echo "build-musl-wheel: unknown target $triple (x86_64-linux-musl or aarch64-linux-musl)" >&2; exit 1 ;;
esac
v=${FW_MUSL_PYTHON:-3.11}
cp=cp${v/./}
tag=musllinux_1_2_$arch
soabi=cpython-${v/./}-$arch-linux-musl
work=$root/build-musl
prefix=$work/$triple
out=${FW_DIST:-$root/dist}
mkdir -p "$out"
out=$(cd "$out" && pwd)
say() { echo "build-musl-wheel: $triple: $*"; }

# The musl toolchain and static hiredis/OpenSSL (built once by test-musl.sh).
[ -f "$prefix/lib/libssl.a" ] && [ -x "$prefix/bin/c++" ] || FW_MUSL_DEPS_ONLY=1 bash packaging/test-musl.sh "$triple"
strip=$(command -v llvm-strip || command -v llvm-strip-14) || { echo "build-musl-wheel: llvm-strip is missing (Debian: llvm)" >&2; exit 1; }

# 1. The wheel.
pyenv_root=${FW_PYENV_ROOT:-$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")}
py=$(ls -d "$pyenv_root"/versions/"$v".*/bin/python"$v" 2>/dev/null | sort -V | tail -n 1 || true)
[ -n "$py" ] || py=$(command -v "python$v" || true)
[ -n "$py" ] || { echo "build-musl-wheel: no CPython $v for the headers (pyenv's or python$v on PATH)" >&2; exit 1; }
venv=$work/wheel-venv-$v
[ -x "$venv/bin/python" ] || "$py" -m venv "$venv"
"$venv/bin/python" -m pip --disable-pip-version-check -q install "pip>=23.1" "scikit-build-core>=0.10" "pybind11>=2.13" wheel
src=$(bash packaging/snapshot.sh "$work/wheel-src" "${FW_REF:-HEAD}")
raw=$work/wheel-raw-$triple-$cp
rm -rf "$raw"
say "building the $cp $tag wheel"
(cd "$src" && _PYTHON_HOST_PLATFORM=$tag SETUPTOOLS_EXT_SUFFIX=.$soabi.so nice -n "${FW_NICE:-10}" \
  "$venv/bin/python" -m pip --disable-pip-version-check wheel -q --no-deps --no-build-isolation \
  -C build-dir="$work/wheel-tree/$triple-$cp" -C cmake.define.CMAKE_TOOLCHAIN_FILE="$root/packaging/cross/$triple.cmake" \
  -C cmake.define.PYTHON_MODULE_EXTENSION=".$soabi.so" -C cmake.define.pybind11_DIR="$("$venv/bin/python" -m pybind11 --cmakedir)" -C cmake.define.CMAKE_STRIP="$strip" -C install.strip=true \
  -w "$raw" . >"$work/wheel-$triple-$cp.log" 2>&1) ||
  { grep -E 'error|Error|FAILED' "$work/wheel-$triple-$cp.log" | head -n 30; echo "build-musl-wheel: the wheel did not build (log: $work/wheel-$triple-$cp.log)" >&2; exit 1; }
# scikit-build-core tags a wheel for another platform's host cpXY-none-<tag>: the ABI tag set to the
# interpreter's by wheel's own retagging (its WHEEL file and RECORD rewritten with the name).
for w in "$raw"/floodwall-*-"$cp"-none-"$tag".whl; do
  [ -f "$w" ] && "$venv/bin/python" -m wheel tags --abi-tag "$cp" --remove "$w" >/dev/null
done
wheel=$(ls "$raw"/floodwall-*-"$cp"-"$cp"-"$tag".whl 2>/dev/null || true)
[ -n "$wheel" ] || { ls "$raw" >&2; echo "build-musl-wheel: no floodwall-*-$cp-$cp-$tag.whl" >&2; exit 1; }

# 2. The module's link.
x=$raw/x && mkdir -p "$x" && (cd "$x" && python3 -m zipfile -e "$wheel" .)
mod=$x/floodwall/_floodwall.$soabi.so
[ -f "$mod" ] || { find "$x" -name '_floodwall*' >&2; echo "build-musl-wheel: the wheel has no floodwall/_floodwall.$soabi.so" >&2; exit 1; }
needed=$(readelf -d "$mod" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | paste -sd' ')
[ "$needed" = libc.so ] || { echo "build-musl-wheel: the module needs $needed (only musl's libc.so expected)" >&2; exit 1; }
! readelf -V "$mod" | grep -q GLIBC_ || { echo "build-musl-wheel: the module asks for glibc symbol versions" >&2; exit 1; }
exported=$(readelf --dyn-syms -W "$mod" | awk '$5 == "GLOBAL" && $7 != "UND" && $8 != "" {print $8}' | paste -sd' ')
[ "$exported" = PyInit__floodwall ] || { echo "build-musl-wheel: the module exports '$exported' (PyInit__floodwall alone expected)" >&2; exit 1; }
interp=$prefix/musl-root/lib/ld-musl-$arch.so.1
readelf --dyn-syms -W "$interp" | awk '$7 != "UND" && $8 != "" {sub(/@.*/, "", $8); print $8}' | sort -u >"$raw/libc.syms"
readelf --dyn-syms -W "$mod" | awk '$7 == "UND" && $5 == "GLOBAL" && $8 != "" {sub(/@.*/, "", $8); print $8}' | grep -vE '^_?Py' | sort -u >"$raw/module.undefined"
missing=$(comm -23 "$raw/module.undefined" "$raw/libc.syms" | paste -sd' ')
[ -z "$missing" ] || { echo "build-musl-wheel: the module needs symbols musl's libc does not define: $missing" >&2; exit 1; }
rm -f "$out"/floodwall-*-"$cp"-"$cp"-"$tag".whl
cp "$wheel" "$out/"
wheel=$out/$(basename "$wheel")
say "$(basename "$wheel") ($(stat -c %s "$wheel") bytes): the module ($(readelf -h "$mod" | sed -n 's/ *Machine: *//p')) needs $needed, exports $exported; its $(wc -l <"$raw/module.undefined") other undefined symbols all in musl's libc"
[ "$arch" = x86_64 ] && [ "${FW_MUSL_WHEEL_TEST:-1}" = 1 ] || { say "not run (no musl CPython for $arch here)"; exit 0; }

# 3. A musl CPython, built once from Debian's source package of the same minor version.
command -v musl-gcc >/dev/null || { echo "build-musl-wheel: musl-gcc is missing (Debian: musl-tools; packaging/install-deps.sh platforms)" >&2; exit 1; }
cpy=$work/cpython-$v
mpy=$cpy/install/bin/python$v
if [ ! -x "$mpy" ]; then
  say "building a musl CPython $v with musl-gcc (once, a few minutes)"
  rm -rf "$cpy" && mkdir -p "$cpy/apt/lists/partial" "$cpy/apt/parts" "$cpy/apt/cache/archives/partial" "$cpy/bin"
  # apt's own client with a source list of its own (deb-src of the system's Debian suite), nothing in /etc.
  suite=$(. /etc/os-release && echo "$VERSION_CODENAME")
  mirror=$(grep -rhoE '^(URIs:|deb) *[^ ]*debian/?( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null | awk '{print $2}' | head -n 1)
  [ -n "$mirror" ] || { echo "build-musl-wheel: no Debian mirror in /etc/apt/sources.list*" >&2; exit 1; }
  printf 'Types: deb-src\nURIs: %s\nSuites: %s %s-updates\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
    "$mirror" "$suite" "$suite" >"$cpy/apt/parts/src.sources"
  apt=(-o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts="$cpy/apt/parts" -o Dir::State::Lists="$cpy/apt/lists"
    -o Dir::Cache="$cpy/apt/cache")
  apt-get "${apt[@]}" update -qq >/dev/null
  (cd "$cpy" && apt-get "${apt[@]}" source --download-only "python$v" >/dev/null 2>&1) ||
    { echo "build-musl-wheel: apt-get source python$v failed" >&2; exit 1; }
  tar -xzf "$cpy"/python"$v"_*.orig.tar.gz -C "$cpy"
  # gcc's multiarch (x86_64-linux-gnu) would give configure and setup.py glibc's paths beside musl's headers.
  printf '#!/bin/sh\ncase "$1" in -print-multiarch | --print-multiarch) echo x86_64-linux-musl; exit 0 ;; esac\nexec musl-gcc "$@"\n' >"$cpy/bin/musl-cc"
  chmod +x "$cpy/bin/musl-cc"
  # No pkg-config: this machine's .pc files (zlib, libffi) name glibc builds whose headers musl-gcc cannot see.
  mkdir -p "$cpy/no-pkgconfig"
  (cd "$cpy"/Python-"$v".* && CC=$cpy/bin/musl-cc PKG_CONFIG_LIBDIR=$cpy/no-pkgconfig PKG_CONFIG_PATH= nice -n "${FW_NICE:-10}" ./configure --prefix="$cpy/install" \
    --without-ensurepip --disable-test-modules >"$cpy/configure.log" 2>&1 &&
    nice -n "${FW_NICE:-10}" make -j "${JOBS:-2}" >"$cpy/make.log" 2>&1 && make install >"$cpy/install.log" 2>&1) ||
    { tail -n 20 "$cpy"/*.log; echo "build-musl-wheel: CPython $v did not build with musl-gcc (logs in $cpy)" >&2; exit 1; }
fi
file -L "$mpy" | grep -q 'interpreter /lib/ld-musl' || { echo "build-musl-wheel: $mpy is not a musl executable" >&2; exit 1; }

# The wheel and pytest installed for that interpreter by pip, with its tags.
site=$work/musl-site-$cp
rm -rf "$site"
"$venv/bin/python" -m pip --disable-pip-version-check -q install --target "$site" --only-binary :all: \
  --platform "$tag" --python-version "$v" --implementation cp --abi "$cp" "$wheel" pytest
say "running tests/python/test_api.py and test_redis.py on CPython $("$mpy" -c 'import sys; print(sys.version.split()[0])') ($(file -L "$mpy" | grep -o 'interpreter [^,]*'))"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && PYTHONPATH=$site "$mpy" -c 'import floodwall, floodwall._floodwall as m; print("build-musl-wheel: imported", m.__file__)' &&
  PYTHONPATH=$site "$mpy" -m pytest -q -p no:cacheprovider "$src/tests/python/test_api.py" "$src/tests/python/test_redis.py")
