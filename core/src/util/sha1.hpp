// SHA-1, for the EVALSHA names of the embedded scripts (Redis names scripts by it).
#pragma once

#include <string>
#include <string_view>

namespace floodwall {

// Lower-case hex digest.
std::string sha1_hex(std::string_view data);

}  // namespace floodwall
