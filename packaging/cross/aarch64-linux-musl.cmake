# Linux arm64 with musl (Alpine): zig's clang, musl and libc++ (packaging/cross/musl.cmake). The executables
# run under qemu-user-static, found on PATH, with the musl loader packaging/test-musl.sh unpacks.
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(FW_CROSS_TRIPLE aarch64-linux-musl)
include(${CMAKE_CURRENT_LIST_DIR}/musl.cmake)
find_program(FW_QEMU NAMES qemu-aarch64-static qemu-aarch64)
if(FW_QEMU)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${FW_QEMU})
endif()
