# Linux arm64 (glibc) from an x86_64 Debian: Debian's cross compiler (crossbuild-essential-arm64) and the
# arm64 libraries installed beside the native ones through multiarch (libhiredis-dev:arm64,
# libssl-dev:arm64, libgtest-dev:arm64; packaging/install-deps.sh platforms installs them). Tests run under
# qemu-user-static (CMAKE_CROSSCOMPILING_EMULATOR), found on PATH.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(FW_CROSS_TRIPLE aarch64-linux-gnu)
set(CMAKE_C_COMPILER ${FW_CROSS_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${FW_CROSS_TRIPLE}-g++)
# Multiarch: the arm64 libraries live in /usr/lib/aarch64-linux-gnu and their pkg-config files beside them;
# headers are shared (/usr/include) except the arch-specific ones (/usr/include/aarch64-linux-gnu, which
# the cross compiler searches by itself).
set(CMAKE_LIBRARY_ARCHITECTURE ${FW_CROSS_TRIPLE})
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/${FW_CROSS_TRIPLE}/pkgconfig:/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")
# Never an x86_64 library: libraries and packages only from the arm64 directories (and the shared
# /usr/include, /usr/share for header-only nlohmann-json); programs (pkg-config, ccache) from the host.
set(CMAKE_FIND_ROOT_PATH /usr/${FW_CROSS_TRIPLE})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
find_program(FW_QEMU NAMES qemu-aarch64-static qemu-aarch64)
if(FW_QEMU)
  # The multiarch root (/), not -L /usr/${FW_CROSS_TRIPLE}: the cross toolchain's libc (libc6-arm64-cross) and
  # the multiarch one (libc6:arm64) are different builds, and that loader with this libc hangs in
  # pthread_create. libc6:arm64 and libstdc++6:arm64 come with the multiarch packages.
  set(CMAKE_CROSSCOMPILING_EMULATOR ${FW_QEMU})
endif()
