#include "stores/redis/url.hpp"

#include <charconv>

#include "util/errors.hpp"

namespace floodwall {

namespace {

struct SchemeInfo {
  const char *prefix;
  RedisUrl::Kind kind;
  bool tls;
};
// Longest first: "redis://" is a prefix of none of the others, but keep the order obvious.
constexpr SchemeInfo kSchemes[] = {
    {"rediss+sentinel://", RedisUrl::Kind::sentinel, true},
    {"redis+sentinel://", RedisUrl::Kind::sentinel, false},
    {"rediss+cluster://", RedisUrl::Kind::cluster, true},
    {"redis+cluster://", RedisUrl::Kind::cluster, false},
    {"rediss://", RedisUrl::Kind::single, true},
    {"redis://", RedisUrl::Kind::single, false},
};

const SchemeInfo *scheme_of(const std::string &url) {
  for (const SchemeInfo &s : kSchemes)
    if (url.rfind(s.prefix, 0) == 0) return &s;
  return nullptr;
}

int hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// %XX decoded (a password with '@', ':' or '/' must be written so); a stray '%' stays as it is.
std::string percent_decode(const std::string &s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); i++) {
    if (s[i] == '%' && i + 2 < s.size() && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
      out.push_back(static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2])));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

}  // namespace

bool is_redis_url(const std::string &url) {
  return scheme_of(url) != nullptr;
}

RedisUrl parse_redis_url(const std::string &url) {
  const SchemeInfo *scheme = scheme_of(url);
  // Built by appending: GCC 12 at -O3 warns (-Wrestrict, a false positive) on "\"" + std::string&&.
  std::string shown(1, '"');
  shown.append(redact_url(url)).push_back('"');
  if (!scheme) throw StoreError("store: not a Redis URL: " + shown);
  RedisUrl u;
  u.kind = scheme->kind;
  u.tls = scheme->tls;
  std::string rest = url.substr(std::string(scheme->prefix).size());
  auto at = rest.rfind('@');
  if (at != std::string::npos) {
    std::string userinfo = rest.substr(0, at);
    rest = rest.substr(at + 1);
    auto colon = userinfo.find(':');
    if (colon == std::string::npos) {
      u.password = percent_decode(userinfo);
    } else {
      u.user = percent_decode(userinfo.substr(0, colon));
      u.password = percent_decode(userinfo.substr(colon + 1));
    }
  }
  std::string hosts = rest, path;
  auto slash = rest.find('/');
  if (slash != std::string::npos) {
    hosts = rest.substr(0, slash);
    path = rest.substr(slash + 1);
  }
  auto parse_int = [&](const std::string &s, int lo, int hi, const char *what) {
    int v = 0;
    auto r = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || r.ec != std::errc() || r.ptr != s.data() + s.size() || v < lo || v > hi)
      throw StoreError(std::string("store: bad ") + what + " \"" + s.substr(0, 32) + "\" in " + shown);
    return v;
  };
  // host[:port], [v6]:port, comma-separated where several nodes are allowed.
  size_t from = 0;
  for (;;) {
    size_t comma = hosts.find(',', from);
    std::string hostport = hosts.substr(from, comma == std::string::npos ? std::string::npos : comma - from);
    RedisEndpoint e;
    e.host = "127.0.0.1";
    std::string port;
    if (!hostport.empty() && hostport[0] == '[') {
      auto close = hostport.find(']');
      if (close == std::string::npos) throw StoreError("store: unterminated [ in the host of " + shown);
      e.host = hostport.substr(1, close - 1);
      if (close + 1 < hostport.size()) {
        if (hostport[close + 1] != ':') throw StoreError("store: bad host in " + shown);
        port = hostport.substr(close + 2);
      }
    } else {
      auto colon = hostport.rfind(':');
      if (colon != std::string::npos) {
        port = hostport.substr(colon + 1);
        hostport = hostport.substr(0, colon);
      }
      if (!hostport.empty()) e.host = hostport;
    }
    if (!port.empty()) e.port = parse_int(port, 1, 65535, "port");
    u.nodes.push_back(e);
    if (comma == std::string::npos) break;
    from = comma + 1;
  }
  if (u.kind == RedisUrl::Kind::single && u.nodes.size() > 1)
    throw StoreError("store: one host:port only in " + shown +
                     " (several nodes are for redis+sentinel:// and redis+cluster://)");
  if (u.kind == RedisUrl::Kind::sentinel) {
    auto s = path.find('/');
    u.master = path.substr(0, s);
    if (u.master.empty())
      throw StoreError("store: the master's name is missing in " + shown + " (.../MASTERNAME[/db])");
    path = s == std::string::npos ? "" : path.substr(s + 1);
  }
  if (!path.empty()) u.db = parse_int(path, 0, 1 << 20, "database number");
  if (u.kind == RedisUrl::Kind::cluster && u.db != 0)
    throw StoreError("store: a Redis Cluster has database 0 only, not " + std::to_string(u.db) + " in " + shown);
  return u;
}

std::string endpoint_name(const RedisEndpoint &e) {
  return (e.host.find(':') != std::string::npos ? "[" + e.host + "]" : e.host) + ":" + std::to_string(e.port);
}

}  // namespace floodwall
