// The URL of the policy's "store" when it names Redis: redis://[user:password@]host:port/db.
#pragma once

#include <string>

namespace floodwall {

struct RedisUrl {
  std::string host = "127.0.0.1";
  int port = 6379;
  int db = 0;
  std::string user, password;
};

// Throws StoreError naming "store" for a URL it cannot use.
RedisUrl parse_redis_url(const std::string &url);

}  // namespace floodwall
