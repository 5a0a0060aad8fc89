// Policy parsing: defaults, the schema shared by every language, and errors that name their field.
#include "policy/policy.hpp"

#include <gtest/gtest.h>

using floodwall::parse_policy;
using floodwall::PolicyError;

TEST(Policy, DefaultsAreTheSeeds) {
  auto p = parse_policy(R"({"utilization": {}, "concurrency": {"limit": 20}, "fleet": {"capacity": 80}})");
  EXPECT_EQ(p.store, "memory://");
  EXPECT_EQ(p.prefix, "floodwall");
  EXPECT_DOUBLE_EQ(p.utilization->good, 0.7);
  EXPECT_DOUBLE_EQ(p.utilization->bad, 0.8);
  EXPECT_DOUBLE_EQ(p.utilization->delay_s, 28);
  EXPECT_DOUBLE_EQ(p.utilization->ramp_s, 120);
  EXPECT_DOUBLE_EQ(p.utilization->sample_s, 8);
  EXPECT_DOUBLE_EQ(p.concurrency->ttl_s, 60);
  EXPECT_FALSE(p.request_rate.has_value()) << "a missing section is an unconfigured limiter";
  EXPECT_EQ(p.redis.fallback, floodwall::Fallback::local) << "never stop limiting silently";
  EXPECT_EQ(p.redis.deadline_ms, 50);
  EXPECT_EQ(p.redis.breaker_min_calls, 20);
  EXPECT_DOUBLE_EQ(p.redis.breaker_failure_ratio, 0.5);
  EXPECT_EQ(p.redis.batch_window_us, 200);
  EXPECT_EQ(p.redis.direct_connections, 8);
}

TEST(Policy, RatesBecomeExactMicroTokens) {
  auto p = parse_policy(R"({"request_rate": {"rate": 100, "burst": 500}})");
  EXPECT_EQ(p.request_rate->limits.rate_m, 100'000'000);
  EXPECT_EQ(p.request_rate->limits.burst_m, 500'000'000);
}

TEST(Policy, EveryBadValueNamesItsField) {
  const std::pair<const char *, const char *> cases[] = {
      {R"({"request_rate": {"rate": 0, "burst": 1}})", "request_rate.rate"},
      {R"({"request_rate": {"rate": "fast", "burst": 1}})", "request_rate.rate"},
      {R"({"request_rate": {"rate": 1e9, "burst": 1}})", "request_rate.rate"},
      {R"({"request_rate": {"rate": 1, "burst": -3}})", "request_rate.burst"},
      {R"({"request_rate": {"rate": 0.000001, "burst": 1000}})", "request_rate.burst"},  // 31,000 years to refill
      // Refills beyond int64 nanoseconds: the conversion once overflowed and passed the check (fuzz/policy_fuzz).
      {R"({"request_rate": {"rate": 0.000001, "burst": 1000000000}})", "request_rate.burst"},
      {R"({"request_rate": {"rate": 0.001, "burst": 1000000000}})", "request_rate.burst"},
      // A number beyond a double is a policy error, not an internal one (fuzz/policy_fuzz).
      {R"({"request_rate": {"rate": 1e400, "burst": 1}})", "policy"},
      {R"({"": 1})", R"("")"},
      {R"({"fleet": {"": 1}})", R"(fleet."")"},
      {R"({"request_rate": {"rate": 1, "burst": 1, "overrides": {"t": {"rate": -1, "burst": 1}}}})",
       "request_rate.overrides.t.rate"},
      {R"({"request_rate": {"rate": 1, "burst": 1, "overrides": []}})", "request_rate.overrides"},
      {R"({"concurrency": {}})", "concurrency.limit"},
      {R"({"concurrency": {"limit": 1, "routes": [""]}})", "concurrency.routes[0]"},
      // As adaptive.routes: no route family twice, at most 64.
      {R"({"concurrency": {"limit": 1, "routes": ["/a", "/b", "/a"]}})", "concurrency.routes[2]"},
      {R"({"concurrency": {"limit": 1, "routes": "/a"}})", "concurrency.routes"},
      {R"({"fleet": {"capacity": 1.5}})", "fleet.capacity"},
      {R"({"utilization": {"workers": 0}})", "utilization.workers"},
      {R"({"utilization": {"sample_s": -Infinity}})", "utilization.sample_s"},
      {R"({"utilization": {"good": NaN}})", "utilization.good"},
      {R"({"utilization": {"bad": 1}})", "utilization.bad"},
      {R"({"store": 5})", "store"},
      {R"({"max_tenants": 0})", "max_tenants"},
      {R"({"redis": {"connections": 100}})", "redis.connections"},
      {R"({"redis": {"fallback": "maybe"}})", "redis.fallback"},
      {R"({"redis": {"fallback": 1}})", "redis.fallback"},
      {R"({"redis": {"breaker_failure_ratio": 1.5}})", "redis.breaker_failure_ratio"},
      {R"({"redis": {"breaker_min_calls": 0}})", "redis.breaker_min_calls"},
      {R"({"redis": {"batch_window_us": -1}})", "redis.batch_window_us"},
      {R"({"redis": {"batch_window_us": 2000000}})", "redis.batch_window_us"},
      {R"({"redis": {"direct_connections": -1}})", "redis.direct_connections"},
      {R"({"redis": {"direct_connections": 9}})", "redis.direct_connections"},
      {R"({"redis": {"breaker_failures": 5}})", "redis.breaker_failures"},
      {R"({"fleet": []})", "fleet"},
      {R"({"headers": "draft-7"})", "headers"},
      {R"({"headers": false})", "headers"},
      // Leases: larger than the bucket (or the limit), no time to live, not whole numbers, unknown keys.
      {R"({"request_rate": {"rate": 100, "burst": 50, "lease": {"max_tokens": 51, "ttl_ms": 100}}})",
       "request_rate.lease.max_tokens"},
      {R"({"request_rate": {"rate": 100, "burst": 50, "lease": {"max_tokens": 10, "ttl_ms": 0}}})",
       "request_rate.lease.ttl_ms"},
      {R"({"request_rate": {"rate": 100, "burst": 50, "lease": {"max_tokens": 2.5, "ttl_ms": 100}}})",
       "request_rate.lease.max_tokens"},
      {R"({"request_rate": {"rate": 100, "burst": 50, "lease": {"max_tokens": 10, "ttl_ms": "100"}}})",
       "request_rate.lease.ttl_ms"},
      {R"({"request_rate": {"rate": 100, "burst": 50, "lease": {"max_tokens": 10}}})", "request_rate.lease.ttl_ms"},
      {R"({"request_rate": {"rate": 100, "burst": 50, "lease": {"max_tokens": 0, "ttl_ms": 10}}})",
       "request_rate.lease.max_tokens"},
      {R"({"request_rate": {"rate": 100, "burst": 50, "lease": {"max_tokens": 5, "ttl_ms": 10, "x": 1}}})",
       "request_rate.lease.x"},
      {R"({"request_rate": {"rate": 100, "burst": 50, "lease": 5}})", "request_rate.lease"},
      {R"({"concurrency": {"limit": 20, "lease": {"max_slots": 21, "ttl_ms": 100}}})", "concurrency.lease.max_slots"},
      {R"({"concurrency": {"limit": 20, "lease": {"max_slots": 5, "ttl_ms": 0}}})", "concurrency.lease.ttl_ms"},
      {R"({"concurrency": {"limit": 20, "lease": {"max_slots": 5.5, "ttl_ms": 10}}})", "concurrency.lease.max_slots"},
      // A leased slot must never outlive half of the set's ttl_s, or it could be swept while held.
      {R"({"concurrency": {"limit": 20, "ttl_s": 1, "lease": {"max_slots": 5, "ttl_ms": 501}}})",
       "concurrency.lease.ttl_ms"},
  };
  for (const auto &[json, field] : cases) {
    try {
      parse_policy(json);
      ADD_FAILURE() << "accepted: " << json;
    } catch (const PolicyError &e) {
      EXPECT_EQ(e.field(), field) << json << " -> " << e.what();
    }
  }
}

// concurrency.routes and adaptive.routes take route families by one rule: at most 64 of them.
TEST(Policy, RouteFamiliesAreAtMostSixtyFourInEitherSection) {
  std::string routes;
  for (int i = 0; i < 65; i++) routes += (i ? ", \"/r" : "\"/r") + std::to_string(i) + "\"";
  for (const std::string section : {"concurrency", "adaptive"}) {
    std::string doc = "{\"" + section + "\": {\"limit\": 1, \"routes\": [" + routes + "]}}";
    if (section == "adaptive") doc = "{\"adaptive\": {\"routes\": [" + routes + "]}}";
    try {
      parse_policy(doc);
      ADD_FAILURE() << "accepted 65 routes in " << section;
    } catch (const PolicyError &e) {
      EXPECT_EQ(e.field(), section + ".routes") << e.what();
    }
  }
}

TEST(Policy, NanInsideAStringIsJustAString) {
  auto p = parse_policy(R"({"docs_url": "https://x/NaN-Infinity", "request_rate": {"rate": 1, "burst": 1}})");
  EXPECT_EQ(p.docs_url, "https://x/NaN-Infinity");
}

TEST(Policy, LeasesAreOffUnlessAskedFor) {
  auto off = parse_policy(R"({"request_rate": {"rate": 100, "burst": 50}, "concurrency": {"limit": 20}})");
  EXPECT_FALSE(off.request_rate->lease.has_value());
  EXPECT_FALSE(off.concurrency->lease.has_value());
  EXPECT_FALSE(off.leases());
  auto on = parse_policy(R"({"request_rate": {"rate": 5000, "burst": 500, "lease": {"max_tokens": 500, "ttl_ms": 100}},
                             "concurrency": {"limit": 20, "lease": {"max_slots": 20, "ttl_ms": 30000}}})");
  EXPECT_EQ(on.request_rate->lease->max_tokens, 500) << "a lease may be the whole bucket";
  EXPECT_EQ(on.request_rate->lease->ttl_ms, 100);
  EXPECT_EQ(on.concurrency->lease->max_slots, 20);
  EXPECT_EQ(on.concurrency->lease->ttl_ms, 30000) << "half of the default ttl_s";
  EXPECT_TRUE(on.leases());
}
