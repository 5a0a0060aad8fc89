// The state of one limit or quota of a tenant in the in-process stores (memory://, shm://, and the local
// fallback), and its check and commit: the same arithmetic as lua/tenant_admit.lua's (token_bucket.hpp
// for a limit, quota_window.hpp for a quota).
#pragma once

#include <cstdint>

#include "stores/quota_window.hpp"
#include "stores/store.hpp"
#include "stores/token_bucket.hpp"

namespace floodwall {

// A limit: `a` is the instant its bucket is full again (ns). A quota: `a` is its window's start (s) and
// `b` the units counted in it. An absent state is a full bucket, an unused quota.
struct RuleState {
  int64_t a = 0, b = 0;
};

struct RuleCheck {
  bool ok = true;
  int64_t left = 0;      // before this request: micro-tokens (a limit) or units (a quota)
  int64_t debt_ns = 0;   // a limit
  QuotaWindow window{};  // a quota
  int64_t used = 0;      // a quota: counted in the window so far
};

// now_us: the store's monotonic clock (buckets); wall_us: its calendar (quotas' windows).
inline RuleCheck check_rule(const RuleOp &r, const RuleState *s, int64_t now_us, int64_t wall_us, int64_t cost_m,
                            int64_t units) {
  RuleCheck c;
  if (!r.quota) {
    BucketState b{s ? s->a : 0};
    c.debt_ns = bucket_debt_ns(s ? &b : nullptr, now_us);
    c.left = bucket_tokens(r.a, r.b, c.debt_ns);
    c.ok = c.left >= cost_m;
    return c;
  }
  c.window = quota_window(static_cast<QuotaPeriod>(r.b), r.utc_offset_s, floor_div(wall_us, 1'000'000));
  c.used = s ? quota_used(QuotaState{s->a, s->b}, c.window) : 0;
  c.left = r.a > c.used ? r.a - c.used : 0;
  c.ok = c.left >= units;
  return c;
}

// Spends the request on the rule (it passed): the new state, and what is left after it.
inline RuleState commit_rule(const RuleOp &r, RuleCheck &c, int64_t now_us, int64_t cost_m, int64_t units) {
  if (!r.quota) {
    c.left -= cost_m;
    return {now_us * 1000 + c.debt_ns + bucket_cost_ns(r.a, cost_m), 0};
  }
  c.left -= units;
  return {c.window.start_s, c.used + units};
}

// What the store reports for rule j: left after the request, and a quota's reset.
inline void report_rule(AdmitResult &res, size_t j, const RuleOp &r, const RuleCheck &c, int64_t wall_us) {
  if (!c.ok) res.rules.failed |= 1u << j;
  res.rules.left[j] = c.left;
  res.rules.reset_s[j] = r.quota ? c.window.end_s - floor_div(wall_us, 1'000'000) : 0;
  res.rules.window_end_s[j] = r.quota ? c.window.end_s : 0;
}

}  // namespace floodwall
