// Token bucket arithmetic: pure functions on integers (micro-tokens, nanoseconds).
//
// A bucket's whole state is one integer: full_at_ns, the instant at which it would be full again. Tokens
// and last-refill time are both derived from it: at `now` the bucket lacks (full_at - now) ns of refill,
// that is (full_at - now) x rate micro-tokens. One integer is what lets Redis store a tenant's bucket as
// an int-encoded string with no allocation (half the memory of a "tokens:time" pair), and it keeps the
// refill exact: nothing is rounded away between requests, only each request's cost is rounded up to
// whole nanoseconds (never in the tenant's favour).
//
// lua/tenant_admit.lua performs the same operations in the same order on Lua's doubles. Every value
// stays below 2^53 (a bucket refills from empty in at most kMaxRefillNs, a policy rule), so the doubles
// hold them exactly and both stores take the same decisions.
#pragma once

#include <algorithm>
#include <cstdint>

namespace floodwall {

// The longest a bucket may take to refill from empty: 90 days, which keeps every debt below 2^53 ns.
inline constexpr int64_t kMaxRefillNs = 90LL * 86'400 * 1'000'000'000;

struct BucketState {
  int64_t full_at_ns = 0;  // when the bucket is full again; a bucket never seen before is full
};

inline int64_t ceil_div(int64_t a, int64_t b) {
  return a <= 0 ? 0 : (a + b - 1) / b;
}

// Nanoseconds of refill the bucket lacks at now_us (0 when full). A bucket never seen (or collected by
// its TTL) lacks nothing.
inline int64_t bucket_debt_ns(const BucketState *s, int64_t now_us) {
  return s ? std::max<int64_t>(0, s->full_at_ns - now_us * 1000) : 0;
}

// Micro-tokens in a bucket that lacks debt_ns of refill. A lowered burst takes effect at once. The
// lack is rounded down, so that the nanosecond each cost was rounded up by does not show as a missing
// micro-token (and a remaining whole token) after a few requests.
// (Lua floors the same double. For lack >= 0, floor(lack) >= burst exactly when lack >= burst, and below
// that the conversion's truncation is the floor: no call to floor, which is not inlined without SSE4.1.)
inline int64_t bucket_tokens(int64_t rate_m, int64_t burst_m, int64_t debt_ns) {
  double lack = static_cast<double>(debt_ns) * static_cast<double>(rate_m) / 1e9;
  return lack >= static_cast<double>(burst_m) ? 0 : burst_m - static_cast<int64_t>(lack);
}

// Nanoseconds of refill that cost_m micro-tokens take, rounded up (the ceiling of a positive double below
// 2^53, computed as truncation plus one when something was truncated).
inline int64_t bucket_cost_ns(int64_t rate_m, int64_t cost_m) {
  double ns = static_cast<double>(cost_m) * 1e9 / static_cast<double>(rate_m);
  auto whole = static_cast<int64_t>(ns);
  return whole + (static_cast<double>(whole) < ns);
}

// Nanoseconds an empty bucket takes to fill (burst / rate), rounded down: the longest an acquire waits.
inline int64_t bucket_refill_ns(int64_t rate_m, int64_t burst_m) {
  return static_cast<int64_t>(static_cast<double>(burst_m) * 1e9 / static_cast<double>(rate_m));
}

// The longest wait an acquire is given, whatever its max_wait and its bucket: 14 days, which keeps a
// bucket's debt (a full refill, kMaxRefillNs at most, plus a wait) below 2^53 ns in Lua's doubles.
inline constexpr int64_t kMaxWaitNs = 14LL * 86'400 * 1'000'000'000;

// An acquire's turn on a bucket that lacks debt_ns and has too few tokens for cost_m now: the nanoseconds
// from now until the refill has paid for them once they are taken (the debt after taking, less a full
// bucket's refill), at least 1. lua/tenant_admit.lua computes the same.
inline int64_t bucket_turn_ns(int64_t rate_m, int64_t burst_m, int64_t debt_ns, int64_t cost_m) {
  return std::max<int64_t>(1, debt_ns + bucket_cost_ns(rate_m, cost_m) - bucket_refill_ns(rate_m, burst_m));
}

// The debt a bucket is left with when it gives cost_m at a request's turn (ns from now): taken at the turn,
// so that in any window the tokens whose callers go in it fit the bucket (burst + rate x window).
inline int64_t taken_debt_ns(int64_t rate_m, int64_t debt_ns, int64_t turn_ns, int64_t cost_m) {
  return std::max(debt_ns, turn_ns) + bucket_cost_ns(rate_m, cost_m);
}

// What a bucket holds at a waiting request's turn once it has taken its tokens (its debt after taking).
inline int64_t tokens_at_turn(int64_t rate_m, int64_t burst_m, int64_t debt_after_ns, int64_t turn_ns) {
  return bucket_tokens(rate_m, burst_m, debt_after_ns - turn_ns);
}

// Whole seconds (rounded up) until the bucket holds `want_m` micro-tokens; 0 when it already does.
inline int64_t seconds_until(int64_t rate_m, int64_t tokens_m, int64_t want_m) {
  return ceil_div(want_m - tokens_m, rate_m);
}

// The least time to live of a bucket's Redis key: garbage collection a second after the bucket would be
// full again, never a limit (lua/tenant_admit.lua gives it up to a second more, see there).
inline int64_t bucket_ttl_ms(int64_t debt_ns) {
  return ceil_div(debt_ns, 1'000'000) + 1000;
}

}  // namespace floodwall
