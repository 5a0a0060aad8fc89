// A store's URL as it may be shown (an error, `floodwall status`, the admin API's status): never its password.
#pragma once

#include <string>

namespace floodwall {

// The URL with the password of its user part replaced by ***; a malformed URL hides its password too.
std::string redact_url(const std::string &url);

}  // namespace floodwall
