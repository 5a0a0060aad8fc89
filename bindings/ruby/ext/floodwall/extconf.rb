# frozen_string_literal: true

# Builds floodwall/native: CMake builds the core's static library (libfloodwall_static.a) from the
# sources the gem carries, and mkmf compiles the SWIG wrapper the gem carries (generated from floodwall.i
# by `rake prepare`; built in place from the repository without it, SWIG generates it here) and links the
# two. The extension reaches the core only through the C ABI (capi/include/floodwall.h).
#
# Environment:
#   PKG_CONFIG=PATH      the pkg-config to ask for hiredis, OpenSSL and nlohmann-json (PKG_CONFIG_PATH and
#                        PKG_CONFIG_LIBDIR as pkg-config reads them)
#   FLOODWALL_JOBS=N     parallel jobs for the core build (default 2)
#   FLOODWALL_WERROR=1   warnings are errors: the core's, and floodwall.i's own C (CI sets it)
require "fileutils"
require "mkmf"

def run!(*cmd)
  puts cmd.join(" ")
  system(*cmd) or abort "floodwall: `#{cmd.join(" ")}` failed"
end

here = __dir__
# The core sources: vendored into the gem by floodwall.gemspec, or the repository when built in place.
source = [File.join(here, "vendor"), File.expand_path("../../../..", here)].find do |dir|
  File.exist?(File.join(dir, "capi/include/floodwall.h")) && File.exist?(File.join(dir, "CMakeLists.txt"))
end or abort "floodwall: the core sources (CMakeLists.txt, core/, capi/, lua/) are missing"

# What the build needs, each with the package that provides it on Debian/Ubuntu, Alpine and Homebrew.
# Everything missing is named in one message before anything is compiled: never a raw mkmf or CMake error.
NEEDS = {
  cmake: ["CMake >= 3.20", "cmake", "cmake", "cmake"],
  cxx: ["a C++20 compiler", "g++", "g++", "the Xcode Command Line Tools (xcode-select --install)"],
  swig: ["SWIG", "swig", "swig", "swig"],
  pkg_config: ["pkg-config", "pkg-config", "pkgconf", "pkg-config"],
  hiredis: ["hiredis", "libhiredis-dev", "hiredis-dev", "hiredis"],
  openssl: ["OpenSSL (rediss://)", "libssl-dev", "openssl-dev", "openssl@3"],
  json: ["nlohmann-json", "nlohmann-json3-dev", "nlohmann-json", "nlohmann-json"],
}.freeze

def needs_message(missing)
  names = missing.map { |k| NEEDS[k][0] }.join(", ")
  debian, alpine, brew = (1..3).map { |i| missing.map { |k| NEEDS[k][i] }.uniq.join(" ") }
  "floodwall: cannot build the extension, missing: #{names}. Install them, then the gem again: " \
    "Debian/Ubuntu: apt-get install #{debian}; Alpine: apk add #{alpine}; macOS: brew install #{brew} " \
    "(with PKG_CONFIG_PATH=$(brew --prefix openssl@3)/lib/pkgconfig if OpenSSL is still not found)"
end

shipped_wrapper = File.exist?(File.join(here, "floodwall_wrap.c")) && File.exist?(File.join(here, "vendor"))
missing = []
missing << :cmake unless find_executable("cmake")
missing << :cxx unless [ENV["CXX"], "c++", "g++", "clang++"].compact.any? { |cxx| find_executable(cxx.split.first) }
missing << :swig unless shipped_wrapper || find_executable("swig")
# The pkg-config: PKG_CONFIG's (as for autoconf and CMake), else Ruby's (a target-prefixed one on Debian),
# else pkg-config or pkgconf on PATH.
$PKGCONFIG = [ENV["PKG_CONFIG"], RbConfig::CONFIG["PKG_CONFIG"], "pkg-config", "pkgconf"].find do |pc|
  pc && !pc.empty? && find_executable0(pc.split.first)
end
if $PKGCONFIG
  missing << :hiredis unless pkg_config("hiredis")
  missing << :openssl unless pkg_config("openssl")
  missing << :json unless pkg_config("nlohmann_json", "modversion")
else
  missing << :pkg_config
end
abort needs_message(missing) unless missing.empty?
werror = ENV["FLOODWALL_WERROR"] == "1"

# A gem builds the core next to this Makefile (`make` links it after extconf.rb has returned). A clone that
# Bundler uses in place (path:, git:) builds it in <clone>/build-ruby/core, at the depth of npm's
# build-node/core, so that ccache (CCACHE_BASEDIR) serves one build's objects to the other.
vendored = source == File.join(here, "vendor")
core = vendored ? File.expand_path("floodwall-core") : File.join(source, "build-ruby", "core")
generator = find_executable("ninja") ? %w[-G Ninja] : []
run!("cmake", "-S", source, "-B", core, *generator, "-DCMAKE_BUILD_TYPE=Release",
     "-DFW_BUILD_TESTS=OFF", "-DFW_BUILD_BENCH=OFF", "-DFW_BUILD_EXAMPLES=OFF", "-DFW_BUILD_PYTHON=OFF",
     "-DFW_WERROR=#{werror ? "ON" : "OFF"}")
run!("cmake", "--build", core, "--target", "floodwall_static", "-j", (ENV["FLOODWALL_JOBS"] || "2").to_s)
archive = File.join(core, "libfloodwall_static.a")
File.exist?(archive) or abort "floodwall: #{archive} was not built"

include_dir = File.join(source, "capi/include")
if shipped_wrapper
  FileUtils.cp(File.join(here, "floodwall_wrap.c"), "floodwall_wrap.c") unless File.expand_path(".") == here
else
  run!("swig", "-ruby", "-I#{include_dir}", "-o", "floodwall_wrap.c", File.join(here, "floodwall.i"))
end

# Ruby's own headers are -isystem so that their warnings are not ours. SWIG's generated wrappers leave
# parameters unused and indent `if ... SWIG_fail;` on one line; everything else is an error under -Werror.
$INCFLAGS = $INCFLAGS.gsub(/-I(\$\((?:arch_)?hdrdir\)\S*)/, '-isystem \1')
$INCFLAGS << " -I#{include_dir}"
$CFLAGS << " -std=gnu11 -Wall -Wextra -Wno-unused-parameter -Wno-misleading-indentation"
$CFLAGS << " -Werror" if werror
$srcs = ["floodwall_wrap.c"]
$objs = ["floodwall_wrap.o"]
# The core is C++ behind a C ABI: link libstdc++, and keep the archive's symbols out of the extension's
# exports (it exports Init_native alone).
$LOCAL_LIBS << " #{archive}"
$LIBS << " -lstdc++ -lm -lpthread"
$LDFLAGS << " -Wl,--exclude-libs,ALL" if try_ldflags("-Wl,--exclude-libs,ALL")

# RubyGems runs `make clean` before `make`: the generated wrapper must survive it, so it is not in
# $cleanfiles.
create_makefile("floodwall/native")
