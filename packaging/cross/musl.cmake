# Linux with musl (Alpine), from this x86_64 Debian: zig's clang with its bundled musl and libc++ as the C and
# C++ compiler (PyPI's ziglang), hiredis, OpenSSL, nlohmann-json and GoogleTest built for the target into a
# prefix of their own. packaging/test-musl.sh makes that prefix (FW_MUSL_ROOT/TRIPLE, default
# build-musl/TRIPLE: bin/ holds the compiler wrappers, lib/ and include/ the static libraries and headers);
# included by packaging/cross/<arch>-linux-musl.cmake, which sets FW_CROSS_TRIPLE and the processor.
if(DEFINED ENV{FW_MUSL_ROOT})
  set(FW_MUSL_ROOT "$ENV{FW_MUSL_ROOT}")
else()
  get_filename_component(FW_MUSL_ROOT "${CMAKE_CURRENT_LIST_DIR}/../../build-musl" ABSOLUTE)
endif()
set(FW_MUSL_PREFIX "${FW_MUSL_ROOT}/${FW_CROSS_TRIPLE}")
if(NOT EXISTS "${FW_MUSL_PREFIX}/bin/c++" OR NOT EXISTS "${FW_MUSL_PREFIX}/lib/libssl.a")
  message(FATAL_ERROR "floodwall: no musl toolchain in ${FW_MUSL_PREFIX}: run packaging/test-musl.sh ${FW_CROSS_TRIPLE} first "
                      "(it builds zig's wrappers, hiredis and OpenSSL there)")
endif()
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_C_COMPILER "${FW_MUSL_PREFIX}/bin/cc")
set(CMAKE_CXX_COMPILER "${FW_MUSL_PREFIX}/bin/c++")
set(CMAKE_AR "${FW_MUSL_PREFIX}/bin/ar" CACHE FILEPATH "zig ar")
set(CMAKE_RANLIB "${FW_MUSL_PREFIX}/bin/ranlib" CACHE FILEPATH "zig ranlib")
# Only the prefix's libraries, headers and packages (never this machine's glibc ones in /usr); programs
# (pkg-config, ninja) from the host. pkg-config reads the prefix's .pc files alone.
set(CMAKE_FIND_ROOT_PATH "${FW_MUSL_PREFIX}")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(ENV{PKG_CONFIG_LIBDIR} "${FW_MUSL_PREFIX}/lib/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")
set(ENV{PKG_CONFIG_SYSROOT_DIR} "")
set(OPENSSL_ROOT_DIR "${FW_MUSL_PREFIX}")
set(OPENSSL_USE_STATIC_LIBS TRUE)
# FW_MUSL_INTERP (test-musl.sh passes it for the test build only): the musl loader the executables name as
# their interpreter, a Debian musl unpacked in the build directory, so that the kernel runs them here with no
# musl installed in /lib. Packaged builds keep the standard /lib/ld-musl-<arch>.so.1.
if(FW_MUSL_INTERP)
  set(CMAKE_EXE_LINKER_FLAGS_INIT "-Wl,--dynamic-linker=${FW_MUSL_INTERP}")
endif()
