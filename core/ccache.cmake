# Compile through ccache when it is installed (packaging/install-deps.sh installs it) and FW_CCACHE is on:
# the same core is compiled for the tests, the sanitizers, the fuzz targets, the wheel, the addon and the
# gem, and each one after the first is then mostly cache hits. Included by CMakeLists.txt and
# fuzz/CMakeLists.txt before their targets.
#
# Paths are hashed relative to the source tree (unless CCACHE_BASEDIR says otherwise) and system headers by
# their own absolute paths: a copy of the sources anywhere else (a clone, the package unpacked in
# node_modules, a gem, an sdist) whose build directory sits at the same depth under it (build-node/core,
# build-ruby/core, build-python/<tag>) hits what another copy compiled with the same flags.
option(FW_CCACHE "Compile through ccache when it is installed" ON)
if(FW_CCACHE AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  find_program(FW_CCACHE_PROGRAM ccache)
  if(FW_CCACHE_PROGRAM)
    set(FW_CCACHE_LAUNCHER "${FW_CCACHE_PROGRAM}")
    if(NOT DEFINED ENV{CCACHE_BASEDIR})
      get_filename_component(FW_CCACHE_BASE ${CMAKE_CURRENT_LIST_DIR}/.. ABSOLUTE)
      set(FW_CCACHE_LAUNCHER ${CMAKE_COMMAND} -E env CCACHE_BASEDIR=${FW_CCACHE_BASE} CCACHE_NOHASHDIR=true
                             ${FW_CCACHE_PROGRAM})
    endif()
    set(CMAKE_C_COMPILER_LAUNCHER ${FW_CCACHE_LAUNCHER})
    set(CMAKE_CXX_COMPILER_LAUNCHER ${FW_CCACHE_LAUNCHER})
  endif()
endif()
