# The core's sources, and the build step that embeds the Redis scripts (lua/*.lua, with lua/lib/ put
# where a script includes it) into generated/scripts.cpp. One list for every build of the core:
# core/CMakeLists.txt (the library, the tests, the benchmarks, the examples) and fuzz/CMakeLists.txt
# (the same sources compiled with clang's coverage instrumentation).
get_filename_component(FW_CORE_DIR ${CMAKE_CURRENT_LIST_DIR} ABSOLUTE)
get_filename_component(FW_LUA_DIR ${FW_CORE_DIR}/../lua ABSOLUTE)

file(GLOB_RECURSE FW_CORE_SOURCES CONFIGURE_DEPENDS ${FW_CORE_DIR}/src/*.cpp)
set(FW_CORE_INCLUDE_DIR ${FW_CORE_DIR}/src)

file(GLOB FW_LUA_SCRIPTS CONFIGURE_DEPENDS ${FW_LUA_DIR}/*.lua)
file(GLOB FW_LUA_LIBS CONFIGURE_DEPENDS ${FW_LUA_DIR}/lib/*.lua)
set(FW_SCRIPTS_CPP ${CMAKE_BINARY_DIR}/generated/scripts.cpp)
string(REPLACE ";" "|" FW_LUA_SCRIPT_LIST "${FW_LUA_SCRIPTS}")
add_custom_command(
  OUTPUT ${FW_SCRIPTS_CPP}
  COMMAND ${CMAKE_COMMAND} -DOUT=${FW_SCRIPTS_CPP} "-DSCRIPTS=${FW_LUA_SCRIPT_LIST}" -P ${FW_CORE_DIR}/embed_scripts.cmake
  DEPENDS ${FW_LUA_SCRIPTS} ${FW_LUA_LIBS} ${FW_CORE_DIR}/embed_scripts.cmake
  COMMENT "Embedding lua/*.lua" VERBATIM)
