#include "util/redact.hpp"

namespace floodwall {

std::string redact_url(const std::string &url) {
  // After "scheme://", or after "scheme:" in a URL that lost a slash: a malformed URL hides its password too.
  auto scheme = url.find("://");
  size_t start = scheme != std::string::npos ? scheme + 3 : url.find(':') != std::string::npos ? url.find(':') + 1 : 0;
  auto at = url.rfind('@');
  if (at == std::string::npos || at < start) return url;
  auto colon = url.find(':', start);
  if (colon == std::string::npos || colon > at)
    return url.substr(0, start) + "***" + url.substr(at);  // a password alone
  return url.substr(0, colon + 1) + "***" + url.substr(at);
}

}  // namespace floodwall
