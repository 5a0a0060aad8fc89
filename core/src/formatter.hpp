// The one formatter of response headers and bodies, so that Python, Node and Ruby services answer
// byte for byte alike. Every value is built from numbers and the policy: no caller byte reaches it.
#pragma once

#include <string>

#include "floodwall.h"
#include "policy.hpp"

namespace floodwall {

// "Name: value\r\n" lines in a fixed order.
std::string format_headers(const fw_decision &d);
// The JSON body of a rejection; empty for an allowed decision.
std::string format_body(const fw_decision &d, const Policy &p);
// Shortest text that reads back as the same double ("100", "0.5").
std::string format_number(double v);
void append_json_string(std::string &out, std::string_view s);

}  // namespace floodwall
