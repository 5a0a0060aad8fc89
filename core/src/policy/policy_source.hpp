// Where a policy comes from, as every binding takes it: JSON text, or the path of a file that holds it.
#pragma once

#include <string>
#include <string_view>

namespace floodwall {

// One rule for every language (fw_policy_text): a string whose first character that is not white space
// is "{" or "[" is the JSON text itself (an array then gets the policy's own error: it must be an object);
// any other string, and anything the caller says is a path, is a file read whole. A file that cannot be
// read is a PolicyError on the field "policy" naming the path and the reason.
std::string policy_text(std::string_view text_or_path, bool is_path);

}  // namespace floodwall
