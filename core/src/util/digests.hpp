// The digests and encodings of the core: SHA-1 for the EVALSHA names of the embedded scripts (Redis names
// scripts by it), SHA-256 for the tenant ids too long to keep (tenant_key.hpp) and for credentials, and their
// text forms.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace floodwall {

// Lower-case hex SHA-1 digest.
std::string sha1_hex(std::string_view data);

std::array<uint8_t, 32> sha256(std::string_view data);

// Lower-case hex of any bytes.
std::string hex(std::string_view bytes);

// RFC 4648 base64url, without padding.
std::string base64url(std::string_view bytes);

}  // namespace floodwall
