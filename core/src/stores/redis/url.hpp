// The URL of the policy's "store" when it names Redis, in all its forms:
//   redis://[user:password@]host:port[/db]                      one server
//   rediss://[user:password@]host:port[/db]                     one server over TLS (policy redis.tls)
//   redis+sentinel://[user:password@]h:p[,h:p...]/MASTER[/db]   the master that Sentinel names
//   redis+cluster://[user:password@]h:p[,h:p...]                a Redis Cluster, from its seed nodes
// (rediss+sentinel:// and rediss+cluster:// are the same over TLS). The user and password may be
// percent-encoded. A password never appears in an error: redact_url() replaces it with ***.
#pragma once

#include <string>
#include <vector>

#include "util/redact.hpp"

namespace floodwall {

struct RedisEndpoint {
  std::string host;
  int port = 6379;
  friend bool operator==(const RedisEndpoint &a, const RedisEndpoint &b) {
    return a.port == b.port && a.host == b.host;
  }
};

// "host:port", an IPv6 host in brackets: how messages name a node.
std::string endpoint_name(const RedisEndpoint &e);

struct RedisUrl {
  enum class Kind : uint8_t { single, sentinel, cluster } kind = Kind::single;
  bool tls = false;
  std::vector<RedisEndpoint> nodes;  // one for a single server; the seeds or sentinels otherwise
  std::string master;                // sentinel: the master's name
  int db = 0;
  std::string user, password;
  // The single server (or the first node).
  const std::string &host() const { return nodes.front().host; }
  int port() const { return nodes.front().port; }
};

// True when `url` starts with one of the six Redis schemes.
bool is_redis_url(const std::string &url);

// Throws StoreError naming "store" for a URL it cannot use, quoting it whole with its password redacted.
RedisUrl parse_redis_url(const std::string &url);

}  // namespace floodwall
