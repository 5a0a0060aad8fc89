# frozen_string_literal: true

# Builds floodwall/native: CMake builds the core's static library (libfloodwall_static.a) from the
# sources the gem carries, and mkmf compiles the SWIG wrapper the gem carries (generated from floodwall.i
# by `rake prepare`; built in place from the repository without it, SWIG generates it here) and links the
# two. The extension reaches the core only through the C ABI (capi/include/floodwall.h).
#
# Environment:
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

find_executable("cmake") or abort "floodwall: cmake is needed to build the core (Debian: cmake)"
shipped_wrapper = File.exist?(File.join(here, "floodwall_wrap.c")) && File.exist?(File.join(here, "vendor"))
shipped_wrapper || find_executable("swig") or abort "floodwall: swig is needed to build the extension (Debian: swig)"
pkg_config("hiredis") or abort "floodwall: hiredis is needed (Debian: libhiredis-dev)"
pkg_config("openssl") or abort "floodwall: OpenSSL is needed for rediss:// (Debian: libssl-dev)"
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
