// The scripts of lua/ as the Redis store calls them: embedded at build time, called by SHA (loaded on
// every new connection before any call, and again on NOSCRIPT), and the shapes of their replies.
#pragma once

#include <array>
#include <string>
#include <string_view>

#include "stores/store.hpp"

struct redisReply;

namespace floodwall {

struct Script {
  std::string_view body;
  std::string sha;
};

struct Scripts {
  Scripts();
  Script admit, release, flags, lease, report;
  std::array<const Script *, 5> all() const { return {&admit, &release, &flags, &lease, &report}; }
};

// The replies of tenant_admit.lua and tenant_lease.lua as the store reads them: false for a reply of
// another shape (which the store counts as an error). Declared here for fuzz/resp_fuzz.cpp.
bool parse_admit_reply(const redisReply *r, bool slot, size_t rules, bool rate_enforce, AdmitResult &res,
                       bool acquire = false);
bool parse_lease_reply(const redisReply *r, LeaseResult &res);

}  // namespace floodwall
