#include "redis/url.hpp"

#include <charconv>

#include "store_factory.hpp"

namespace floodwall {

RedisUrl parse_redis_url(const std::string &url) {
  const std::string scheme = "redis://";
  if (url.rfind(scheme, 0) != 0) throw StoreError("store: expected redis://host:port/db");
  std::string rest = url.substr(scheme.size());
  RedisUrl u;
  auto at = rest.rfind('@');
  if (at != std::string::npos) {
    std::string userinfo = rest.substr(0, at);
    rest = rest.substr(at + 1);
    auto colon = userinfo.find(':');
    if (colon == std::string::npos) {
      u.password = userinfo;
    } else {
      u.user = userinfo.substr(0, colon);
      u.password = userinfo.substr(colon + 1);
    }
  }
  std::string hostport = rest, db;
  auto slash = rest.find('/');
  if (slash != std::string::npos) {
    hostport = rest.substr(0, slash);
    db = rest.substr(slash + 1);
  }
  std::string port;
  if (!hostport.empty() && hostport[0] == '[') {
    auto close = hostport.find(']');
    if (close == std::string::npos) throw StoreError("store: unterminated [ in the host of \"" + url + "\"");
    u.host = hostport.substr(1, close - 1);
    if (close + 1 < hostport.size()) {
      if (hostport[close + 1] != ':') throw StoreError("store: bad host in \"" + url + "\"");
      port = hostport.substr(close + 2);
    }
  } else {
    auto colon = hostport.rfind(':');
    if (colon != std::string::npos) {
      port = hostport.substr(colon + 1);
      hostport = hostport.substr(0, colon);
    }
    if (!hostport.empty()) u.host = hostport;
  }
  auto parse_int = [&](const std::string &s, int lo, int hi, const char *what) {
    int v = 0;
    auto r = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || r.ec != std::errc() || r.ptr != s.data() + s.size() || v < lo || v > hi)
      throw StoreError(std::string("store: bad ") + what + " \"" + s.substr(0, 32) + "\" in the redis URL");
    return v;
  };
  if (!port.empty()) u.port = parse_int(port, 1, 65535, "port");
  if (!db.empty()) u.db = parse_int(db, 0, 1 << 20, "database number");
  return u;
}

}  // namespace floodwall
