# Linux x86_64 with musl (Alpine): zig's clang, musl and libc++ (packaging/cross/musl.cmake). The executables
# run on this machine (packaging/test-musl.sh gives them a musl loader).
set(CMAKE_SYSTEM_PROCESSOR x86_64)
set(FW_CROSS_TRIPLE x86_64-linux-musl)
include(${CMAKE_CURRENT_LIST_DIR}/musl.cmake)
