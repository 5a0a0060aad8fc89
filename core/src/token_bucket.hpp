// Token bucket arithmetic: pure functions on integers (micro-tokens, microseconds).
//
// The Redis script lua/tenant_admit.lua performs the same operations in the same order on Lua's
// doubles; refill() is written with the same double expression so that both stores agree exactly.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace floodwall {

struct BucketState {
  int64_t tokens_m = 0;  // micro-tokens
  int64_t last_us = 0;   // when tokens_m was last computed
};

inline int64_t ceil_div(int64_t a, int64_t b) {
  return a <= 0 ? 0 : (a + b - 1) / b;
}

// Tokens in the bucket at now_us. A bucket never seen before (or collected by its TTL) is full.
inline int64_t refill(int64_t rate_m, int64_t burst_m, const BucketState *s, int64_t now_us) {
  if (!s) return burst_m;
  int64_t tokens = std::min(s->tokens_m, burst_m);  // a lowered burst takes effect at once
  int64_t elapsed = now_us - s->last_us;
  if (elapsed <= 0) return tokens;
  double gained = std::floor(static_cast<double>(elapsed) * static_cast<double>(rate_m) / 1e6);
  if (gained >= static_cast<double>(burst_m - tokens)) return burst_m;
  return tokens + static_cast<int64_t>(gained);
}

// Whole seconds (rounded up) until the bucket holds `want_m` micro-tokens; 0 when it already does.
inline int64_t seconds_until(int64_t rate_m, int64_t tokens_m, int64_t want_m) {
  return ceil_div(want_m - tokens_m, rate_m);
}

// The key's time to live: garbage collection once the bucket would be full again, never a limit.
inline int64_t bucket_ttl_ms(int64_t rate_m, int64_t burst_m, int64_t tokens_m) {
  return ceil_div((burst_m - tokens_m) * 1000, rate_m) + 1000;
}

}  // namespace floodwall
