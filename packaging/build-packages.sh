#!/usr/bin/env bash
# packaging/build-packages.sh - `make packages`: every package of the committed tree (FW_REF, default HEAD;
# packaging/snapshot.sh) in dist/ (FW_DIST), with dist/manifest.json and dist/SHA256SUMS
# (packaging/manifest.py: file, platform, size, sha256), checked once written.
#
#   floodwall-V-cpXY-cpXY-manylinux_*_x86_64.whl   every CPython pyproject.toml claims (build-wheels.sh),
#                                                  each tested in a fresh venv (test-wheels.sh)
#   floodwall-V-cp311-cp311-manylinux_2_34_aarch64.whl  Linux arm64, cross-compiled, tested by Debian's arm64
#                                                  python3.11 under qemu (test-cross-wheel.sh)
#   floodwall-V.tar.gz                             the sdist (builds from source anywhere)
#   floodwall-V.tgz                                the npm package, with the prebuilt addons made here
#                                                  (prebuilds/linux-x64/, and linux-arm64/ cross-compiled and
#                                                  run by an arm64 Node under qemu: test-cross-node.sh);
#                                                  other machines build from source
#   floodwall-V.gem                                the gem (builds from source: extconf.rb names what it needs)
#   floodwall-capi-V-linux-aarch64-gnu.tar.gz      the C ABI for Linux arm64 (glibc), cross-compiled and its
#                                                  suite run under qemu first (test-cross.sh)
#
# FW_PLATFORMS (default: "aarch64-linux-gnu" when its cross compiler is installed, else none) names the cross
# targets; a named target whose tools are missing fails. Long (about 15 minutes cold on 2 cores, a few warm):
# not part of make test.
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
    *) echo "packages: no Node prebuild for $triple" >&2; exit 1 ;;
  esac
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
  step "the $triple wheel (CPython 3.11), tested under emulation"
  bash packaging/test-cross-wheel.sh "$out"
  step "npm package on $triple: its prebuilt addon under emulation"
  bash packaging/test-cross-node.sh "$out/floodwall-$v.tgz"
  step "C ABI for $triple, tested under emulation"
  bash packaging/test-cross.sh "$triple"
  stage=$work/stage-$triple
  rm -rf "$stage"
  cmake --install "$root/build-cross-$triple/build" --prefix "$stage/floodwall-capi-$v" >/dev/null
  plat=${triple/aarch64-linux-/linux-aarch64-}
  tar -C "$stage" -czf "$out/floodwall-capi-$v-$plat.tar.gz" "floodwall-capi-$v"
done

step "manifest"
python3 packaging/manifest.py write "$out"
python3 packaging/manifest.py check "$out"
(cd "$out" && sha256sum --quiet -c SHA256SUMS)
