// What a store is asked and answers: an admit's op and result, the commit rule every store shares, and a
// release's op (the Store interface that takes them is store.hpp; the rule arrays are store_rules.hpp's).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "policy/policy.hpp"
#include "policy/tenant_key.hpp"
#include "stores/store_rules.hpp"
#include "util/vocabulary.hpp"

namespace floodwall {

// One admit: the tenant limiters and the fleet slot, decided atomically by the store.
// A limiter that is off for this request has its flag false; `*_enforce` false means dark mode.
struct AdmitOp {
  TenantKey tenant;
  bool rate = false, rate_enforce = true;
  int64_t rate_m = 0, burst_m = 0, cost_m = 0;
  bool conc = false, conc_enforce = true;
  int64_t conc_limit = 0, conc_ttl_us = 0;
  bool fleet = false, fleet_enforce = true;
  int64_t fleet_cap = 0, fleet_ttl_us = 0;
  SlotId slot;
  int64_t units = 1;  // the request's cost in whole units (what a quota counts)
  RuleOps rules;      // the limits and quotas that apply, checked in the same atomic step
  // The tier the client takes the tenant to be in ("": none). The store reads the tenant's control record
  // (TenantControl) in the same step: a block refuses, a runtime override replaces the bucket's rate and
  // burst, and another tier than this one is answered with that tier (nothing consumed), to decide again.
  std::string_view tier;
  // Redis Cluster, during a slot's migration (ClusterStore::Split): the control record read on its own
  // (ctl_only: the one key), then the rest without it (no_ctl).
  bool ctl_only = false, no_ctl = false;
  // The decision's instant on the Guard's clock (Clock::now_us), read once per decision and handed to an
  // in-process store (Store::takes_time) instead of a second read there; kStoreClock: the store reads its
  // own (the fallback table, tests, admin calls). The Redis store never reads it: its clock is TIME.
  static constexpr int64_t kStoreClock = INT64_MIN;
  int64_t now_us = kStoreClock;
  // An acquire (docs/concepts/acquire.md): > 0, the longest the request may wait for its turn (ns, capped
  // by the Guard). An enforcing bucket (the tenant's, a limit) without the tokens now reserves them from
  // its turn, when that is within max_wait_ns: the tokens are taken at once, the caller goes at the turn
  // (AdmitResult::wait_ns). 0: an admit, which never waits.
  int64_t max_wait_ns = 0;
  bool asks() const { return rate || conc || fleet || rules.n > 0; }
};

struct AdmitResult {
  bool decided = false;  // false: the store could not decide; redis.fallback decides
  FailReason reason = FailReason::none;
  bool rate_ok = true, conc_ok = true, fleet_ok = true;  // each limiter's own verdict
  bool committed = false;    // true when the request consumed (no enforcing limiter rejected)
  int64_t tokens_m = 0;      // the bucket after this request (an acquire that waits: at its turn)
  int64_t wait_ns = 0;       // an acquire that committed: its turn, ns after the store's now (0: go now)
  int64_t store_now_us = 0;  // an acquire: the store's clock at the decision (Redis: TIME; else now_us)
  int64_t conc_count = 0;    // the tenant's in-flight requests after this request
  // Decided in process from a hot tenant's lease or what Redis last said (hot_tenants.hpp); still the
  // store's decision. A limiter the decision did not need (another enforcing one rejected first) was
  // not evaluated and is not counted.
  bool in_process = false;
  bool rate_evaluated = true, conc_evaluated = true, fleet_evaluated = true;
  bool slot_leased = false;  // the concurrency slot is a leased one: it goes back to the lease
  SlotId leased_slot;        // which one
  int64_t slot_lease_until_us = 0;
  bool fleet_in_process = false;  // the fleet share is counted in this client's report, not in the set
  RuleResults rules;              // per rule of the op (rules.n == op.rules.n when decided)
  // The tenant's control record said (nothing was consumed by the first two):
  bool blocked = false;         // the tenant is blocked (until blocked_until_s; 0: until unblocked)
  int64_t blocked_until_s = 0;  // seconds since the epoch, the store's clock
  bool other_tier = false;      // its tier is `tier`, not the op's: decide again with that tier
  std::string tier;
  int64_t rate_m = 0, burst_m = 0;  // a runtime override of the bucket was applied (0: the op's own)
};

// The commit rule, shared by every store (lua/tenant_admit.lua has the same lines): a request that an
// enforcing limiter or rule rejects consumes nothing anywhere; otherwise each one that passed consumes.
inline bool commits(const AdmitOp &op, bool rate_ok, bool conc_ok, bool fleet_ok, uint32_t rules_failed = 0) {
  return !(op.rate && op.rate_enforce && !rate_ok) && !(op.conc && op.conc_enforce && !conc_ok) &&
         !(op.fleet && op.fleet_enforce && !fleet_ok) && !(op.rules.enforced & rules_failed);
}

struct ReleaseOp {
  TenantKey tenant;
  SlotId slot;
  bool conc = false, fleet = false;
  // A reservation given back before its turn (docs/concepts/acquire.md): the tenant's bucket goes from
  // full_at_ns (the instant this reservation left it full at) back to full_at_ns - cost_ns, only when it is
  // still at full_at_ns, so that no later reservation's turn is moved. 0: nothing to give back.
  int64_t give_back_full_at_ns = 0, give_back_cost_ns = 0;
  bool gives_back() const { return give_back_full_at_ns > 0; }
};

}  // namespace floodwall
