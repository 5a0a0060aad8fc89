// The request rate limiter, with the seed's numbers: capacity 500, refill 100/s.
#include "util/token_bucket.hpp"

#include <gtest/gtest.h>

#include "harness.hpp"

using floodwall::Decision;
using floodwall::FailReason;
using floodwall::Limiter;
using floodwall::Ticket;
using floodwall::testing::Sim;

namespace {
const char *kSeed = R"({"request_rate": {"rate": 100, "burst": 500}})";
}

TEST(TokenBucket, UnknownTenantStartsFullAndTakesABurstOf500) {
  Sim s(kSeed);
  EXPECT_EQ(s.burst("dispatcher", 500), 500);
  Decision d = s.admit("dispatcher");
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.status, 429);
  EXPECT_EQ(d.limiter, Limiter::request_rate);
}

TEST(TokenBucket, RefillsFiftyTokensInHalfASecond) {
  Sim s(kSeed);
  ASSERT_EQ(s.burst("t", 500), 500);
  s.clock.advance_s(0.5);
  EXPECT_EQ(s.burst("t", 60), 50);
}

TEST(TokenBucket, SteadyStateIs100PerSecondAndThe101stIsRejected) {
  Sim s(kSeed);
  ASSERT_EQ(s.burst("loop", 500), 500);
  for (int second = 0; second < 5; second++) {
    s.clock.advance_s(1.0);
    EXPECT_EQ(s.burst("loop", 100), 100) << "second " << second;
    Decision d = s.admit("loop");
    EXPECT_FALSE(d.allowed) << "the 101st request of second " << second;
  }
}

TEST(TokenBucket, IdleTenantIsCappedAtCapacity) {
  Sim s(kSeed);
  s.clock.advance_s(3600);
  EXPECT_EQ(s.burst("idle", 501), 500);
}

TEST(TokenBucket, MorningBurstOf300In4SecondsIsAllowed) {
  Sim s(kSeed);
  int allowed = 0;
  for (int i = 0; i < 300; i++) {
    Decision d = s.admit("dispatcher", 1, "/v1/routes", "POST");
    allowed += d.allowed;
    s.clock.advance_us(4'000'000 / 300);
  }
  EXPECT_EQ(allowed, 300);
}

TEST(TokenBucket, WeightedCostDrawsMoreTokens) {
  Sim s(kSeed);
  Decision small = s.admit("a", 1);
  Decision big = s.admit("b", 200);
  EXPECT_EQ(small.remaining, 499);
  EXPECT_EQ(big.remaining, 300);
  EXPECT_EQ(s.burst("b", 2, 200), 1);  // 300 left: one more 200-token request, not two
}

TEST(TokenBucket, RetryAfterIsTimeUntilCostTokensExistAndNeverZero) {
  Sim s(kSeed);
  ASSERT_EQ(s.burst("t", 500), 500);
  Decision d = s.admit("t", 1);
  EXPECT_EQ(d.retry_after_s, 1);
  d = s.admit("t", 300);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after_s, 3);
  EXPECT_EQ(d.reset_s, 5);
  EXPECT_EQ(d.remaining, 0);
}

TEST(TokenBucket, RemainingAndResetOnAnAllowedRequest) {
  Sim s(kSeed);
  Decision d = s.admit("t", 1);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.limit, 500);
  EXPECT_EQ(d.remaining, 499);
  EXPECT_EQ(d.reset_s, 1);  // 1 token at 100/s: 10 ms, rounded up to a whole second
  EXPECT_DOUBLE_EQ(d.rate, 100);
}

TEST(TokenBucket, FractionalRatesAreExact) {
  Sim s(R"({"request_rate": {"rate": 0.5, "burst": 1}})");
  EXPECT_EQ(s.burst("t", 2), 1);
  s.clock.advance_s(1.999);
  EXPECT_EQ(s.burst("t", 1), 0);
  s.clock.advance_s(0.001);
  EXPECT_EQ(s.burst("t", 1), 1);
}

TEST(TokenBucket, OverridesGiveOneTenantItsOwnBucket) {
  Sim s(R"({"request_rate": {"rate": 1, "burst": 2, "overrides": {"big": {"rate": 10, "burst": 20}}}})");
  EXPECT_EQ(s.burst("small", 30), 2);
  EXPECT_EQ(s.burst("big", 30), 20);
}

TEST(TokenBucket, TenantsAreIsolated) {
  Sim s(kSeed);
  ASSERT_EQ(s.burst("a", 500), 500);
  EXPECT_EQ(s.burst("b", 500), 500);
}

TEST(TokenBucketMath, OneIntegerOfState) {
  using namespace floodwall;
  // Empty at t=0 (full again after 5 s at 100/s), then half a second of refill: 50 tokens.
  BucketState st{5'000'000'000};
  EXPECT_EQ(bucket_debt_ns(&st, 500'000), 4'500'000'000);
  EXPECT_EQ(bucket_tokens(100'000'000, 500'000'000, bucket_debt_ns(&st, 500'000)), 50'000'000);
  EXPECT_EQ(bucket_tokens(100'000'000, 500'000'000, bucket_debt_ns(&st, 10'000'000)), 500'000'000);
  EXPECT_EQ(bucket_tokens(100'000'000, 500'000'000, bucket_debt_ns(nullptr, 0)), 500'000'000);
  EXPECT_EQ(bucket_tokens(100'000'000, 500'000'000, bucket_debt_ns(&st, -5)), 0);  // a clock step back adds nothing
  // A lowered burst takes effect at once; a debt beyond the burst leaves nothing, never less than nothing.
  EXPECT_EQ(bucket_tokens(100'000'000, 100'000'000, bucket_debt_ns(&st, 0)), 0);
}

TEST(TokenBucketMath, CostsRoundUpToWholeNanoseconds) {
  using namespace floodwall;
  EXPECT_EQ(bucket_cost_ns(100'000'000, 1'000'000), 10'000'000);   // 1 token at 100/s: 10 ms
  EXPECT_EQ(bucket_cost_ns(3'000'000, 1'000'000), 333'333'334);    // 1 token at 3/s, never in the tenant's favour
  EXPECT_EQ(bucket_cost_ns(1'000'000'000'000, 1'000'000), 1'000);  // the top rate, 1e6/s: 1 us per token
  // Three tokens' worth of debt at 3/s leaves the bucket exactly three tokens short, not a micro-token more.
  int64_t debt = 3 * bucket_cost_ns(3'000'000, 1'000'000);
  EXPECT_EQ(bucket_tokens(3'000'000, 10'000'000, debt), 7'000'000);
}

// Spends one token at a time at one instant until the bucket refuses; returns how many it took.
static int64_t drain(int64_t rate_m, int64_t burst_m) {
  using namespace floodwall;
  int64_t debt = 0, n = 0;
  while (bucket_tokens(rate_m, burst_m, debt) >= 1'000'000) {
    debt += bucket_cost_ns(rate_m, 1'000'000);
    n++;
  }
  return n;
}

TEST(TokenBucketMath, AWholeBurstIsAdmittedWhereTheRoundingAllows) {
  // Exact costs, or a rounding too small to add up to a token: the whole burst.
  EXPECT_EQ(drain(3'000'000, 3'000'000), 3);
  EXPECT_EQ(drain(100'000'000, 500'000'000), 500);
  EXPECT_EQ(drain(1'000'000'000'000, 1'000'000'000'000), 1'000'000);  // 1e6/s: 1 us per token, exact
  EXPECT_EQ(drain(7'000'000, 1'000'000'000), 1000);                   // 7/s, burst 1000: B*R = 7000 < 1e9
  // The documented cost of one integer of state: 1 token at 700,000/s is 1428.57 ns, charged 1429; over a
  // burst of 1000 the excess adds up to 0.3 of a token, and the last one is refused (B*R/1e9 = 0.7).
  EXPECT_EQ(drain(700'000'000'000, 1'000'000'000), 999);
}

TEST(TokenBucketMath, TtlOutlivesTheRefill) {
  // TTL is garbage collection: the key must outlive the time the bucket takes to be full again.
  EXPECT_GE(floodwall::bucket_ttl_ms(5'000'000'000), 5000);
  EXPECT_EQ(floodwall::bucket_ttl_ms(0), 1000);
}
