// The state of one limit or quota of a tenant in the in-process stores (memory://, shm://, and the local
// fallback), and its check and commit: the same arithmetic as lua/tenant_admit.lua's (token_bucket.hpp
// for a limit, quota_window.hpp for a quota).
#pragma once

#include <algorithm>
#include <cstdint>

#include "stores/quota_window.hpp"
#include "stores/store.hpp"
#include "util/token_bucket.hpp"

namespace floodwall {

// An absent state is a full bucket, an unused quota.
struct RuleState {
  int64_t instant = 0;  // a limit: when its bucket is full again (ns); a quota: its window's start (s)
  int64_t used = 0;     // a quota: the units counted in its window
};

// Trivial (no member initializers): the stores keep an array of kMaxRules of them on the stack, which an
// admit that checks no rule must not pay to zero; check_rule value-initializes the one it returns.
struct RuleCheck {
  bool ok;
  int64_t left;        // before this request: micro-tokens (a limit) or units (a quota)
  int64_t debt_ns;     // a limit
  QuotaWindow window;  // a quota
  int64_t used;        // a quota: counted in the window so far
};

// now_us: the store's monotonic clock (buckets); wall_us: its calendar (quotas' windows).
inline RuleCheck check_rule(const RuleOp &r, const RuleState *s, int64_t now_us, int64_t wall_us, int64_t cost_m,
                            int64_t units) {
  RuleCheck c{};
  if (!r.quota) {
    BucketState b{s ? s->instant : 0};
    c.debt_ns = bucket_debt_ns(s ? &b : nullptr, now_us);
    c.left = bucket_tokens(r.rate_m(), r.burst_m(), c.debt_ns);
    c.ok = c.left >= cost_m;
    return c;
  }
  c.window = quota_window(r.period(), r.utc_offset_s, floor_div(wall_us, 1'000'000));
  c.used = s ? quota_used(QuotaState{s->instant, s->used}, c.window) : 0;
  c.left = r.quota_limit() > c.used ? r.quota_limit() - c.used : 0;
  c.ok = c.left >= units;
  return c;
}

// Spends the request on the rule (it passed): the new state, and what is left after it.
// turn_ns: an acquire's turn (reserve_turn), 0 for an admit.
inline RuleState commit_rule(const RuleOp &r, RuleCheck &c, int64_t now_us, int64_t cost_m, int64_t units,
                             int64_t turn_ns = 0) {
  if (!r.quota) {
    if (turn_ns > 0) {
      int64_t debt = taken_debt_ns(r.rate_m(), c.debt_ns, turn_ns, cost_m);
      c.left = tokens_at_turn(r.rate_m(), r.burst_m(), debt, turn_ns);
      return {now_us * 1000 + debt, 0};
    }
    c.left -= cost_m;
    return {now_us * 1000 + c.debt_ns + bucket_cost_ns(r.rate_m(), cost_m), 0};
  }
  c.left -= units;
  return {c.window.start_s, c.used + units};
}

// An acquire (op.max_wait_ns > 0) in an in-process store, after every check: the tenant's enforcing bucket,
// when it lacks the tokens now, waits for its turn (bucket_turn_ns) if that is within max_wait_ns: it then
// passes (rate_ok) and the turn is returned (ns from now); every bucket that passes, the limits' too, takes
// its tokens at that turn (taken_debt_ns), which costs the tenant nothing: while a reservation waits, its
// bucket is empty and every other request of the tenant comes after it. Beyond max_wait_ns nothing changes:
// refused as an admit, nothing consumed. A limit or quota without the tokens, a slot and the fleet never
// wait (a limit that waited would take the tenant's tokens at its turn and hold up its other routes).
// lua/tenant_admit.lua does the same.
inline int64_t reserve_turn(const AdmitOp &op, int64_t debt_ns, bool &rate_ok) {
  if (op.max_wait_ns <= 0 || !op.rate || !op.rate_enforce || rate_ok) return 0;
  int64_t turn = bucket_turn_ns(op.rate_m, op.burst_m, debt_ns, op.cost_m);
  if (turn > op.max_wait_ns) return 0;
  rate_ok = true;
  return turn;
}

// What the store reports for rule j: left after the request, and a quota's reset.
inline void report_rule(AdmitResult &res, size_t j, const RuleOp &r, const RuleCheck &c, int64_t wall_us) {
  if (!c.ok) res.rules.failed |= 1u << j;
  res.rules.left[j] = c.left;
  res.rules.reset_s[j] = r.quota ? c.window.end_s - floor_div(wall_us, 1'000'000) : 0;
  res.rules.window_end_s[j] = r.quota ? c.window.end_s : 0;
}

// A tenant's control record (null: none) against an admit: true when the record decides the admit itself
// (a block in force, or another tier than the op's: nothing consumed); else r.rate_m and r.burst_m hold
// the runtime override of the bucket, when there is one, for the store to use instead of the op's.
inline bool decide_control(const TenantControl *c, const AdmitOp &op, int64_t wall_s, AdmitResult &r) {
  if (c && c->blocked && (c->blocked_until_s == 0 || c->blocked_until_s > wall_s)) {
    r.decided = true;
    r.committed = false;
    r.blocked = true;
    r.blocked_until_s = c->blocked_until_s;
    r.rate_evaluated = r.conc_evaluated = r.fleet_evaluated = false;
    return true;
  }
  std::string_view tier = c ? std::string_view(c->tier) : std::string_view();
  if (tier != op.tier) {
    r.decided = true;
    r.committed = false;
    r.other_tier = true;
    r.tier.assign(tier);
    r.rate_evaluated = r.conc_evaluated = r.fleet_evaluated = false;
    return true;
  }
  if (c && c->rate_m > 0) {
    r.rate_m = c->rate_m;
    r.burst_m = c->burst_m;
  }
  return false;
}

// An in-process store's admit under a tenant's control record (null: none): the record decides it, or the
// store's tables do (`tables`), with the record's override of the bucket when it has one.
template <class Tables>
AdmitResult admit_controlled(const TenantControl *c, const AdmitOp &op, int64_t wall_s, Tables &&tables) {
  AdmitResult r;
  if (decide_control(c, op, wall_s, r)) return r;
  if (r.rate_m == 0) return tables(op);
  AdmitOp o = op;
  o.rate_m = r.rate_m;
  o.burst_m = r.burst_m;
  AdmitResult x = tables(o);
  x.rate_m = r.rate_m;
  x.burst_m = r.burst_m;
  return x;
}

// A control change applied to a record (the in-process stores' and the Redis store's admin calls agree).
inline void apply_change(TenantControl &c, const ControlChange &ch) {
  if (ch.set_tier) c.tier = ch.tier;
  if (ch.set_override) {
    c.rate_m = ch.rate_m;
    c.burst_m = ch.rate_m > 0 ? ch.burst_m : 0;
  }
  if (ch.set_block) {
    c.blocked = ch.blocked;
    c.blocked_until_s = ch.blocked ? ch.blocked_until_s : 0;
  }
}

}  // namespace floodwall
