// The store interface: where the per-tenant and fleet-wide state lives. The memory store keeps it in
// process; the Redis store keeps it in Redis and runs one script per atomic operation (lua/).
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "policy/policy.hpp"
#include "policy/tenant_key.hpp"

namespace floodwall {

// A request's slot id in the concurrency and fleet sets: 128 random bits.
struct SlotId {
  uint64_t hi = 0, lo = 0;
  friend bool operator==(const SlotId &a, const SlotId &b) { return a.hi == b.hi && a.lo == b.lo; }
};

// One limit or quota of the policy (Policy::rules) that applies to a request.
struct RuleOp {
  uint64_t id;             // Rule::id: the rule's state in the in-process and shm stores
  const std::string *key;  // Rule::key_suffix (the policy outlives every op): the rule's Redis key
  uint16_t index;          // into Policy::rules
  bool quota;
  bool enforce;          // false: dark (decided and reported, never rejecting)
  int64_t a, b;          // a limit: rate_m, burst_m; a quota: its limit (units) and QuotaPeriod
  int32_t utc_offset_s;  // a quota
};

// The op of Policy::rules[index] (enforce: the rule's mode and the request-rate limiter's both enforce).
inline RuleOp rule_op(const Rule &rule, size_t index, bool enforce) {
  RuleOp op;
  op.id = rule.id;
  op.key = &rule.key_suffix;
  op.index = static_cast<uint16_t>(index);
  op.quota = rule.quota;
  op.enforce = enforce;
  op.a = rule.quota ? rule.quota_limit : rule.bucket.rate_m;
  op.b = rule.quota ? static_cast<int64_t>(rule.period) : rule.bucket.burst_m;
  op.utc_offset_s = rule.utc_offset_s;
  return op;
}

// The rules of one admit: a fixed array (no allocation on the hot path), of which only the first n are
// copied with the op.
struct RuleOps {
  uint8_t n = 0;
  uint32_t enforced = 0;  // bit j: at[j] enforces
  RuleOp at[kMaxRules];
  RuleOps() {}  // NOLINT: `at` is written before it is read, up to n
  RuleOps(const RuleOps &o) : n(o.n), enforced(o.enforced) { std::copy_n(o.at, n, at); }
  RuleOps &operator=(const RuleOps &o) {
    n = o.n;
    enforced = o.enforced;
    std::copy_n(o.at, n, at);
    return *this;
  }
  void push(const RuleOp &r) {
    if (r.enforce) enforced |= 1u << n;
    at[n++] = r;
  }
};

// What the store answered for each rule of an admit (in the order of AdmitOp::rules).
struct RuleResults {
  uint8_t n = 0;
  uint32_t failed = 0;              // bit j: rule j had not enough left for the request
  int64_t left[kMaxRules];          // after this request: a limit's micro-tokens, a quota's units
  int64_t reset_s[kMaxRules];       // a quota: seconds until its window ends (a limit: 0)
  int64_t window_end_s[kMaxRules];  // a quota: when its window ends, seconds since the epoch on the store's clock
  RuleResults() {}                  // NOLINT: written before read, up to n
  RuleResults(const RuleResults &o) : n(o.n), failed(o.failed) { copy(o); }
  RuleResults &operator=(const RuleResults &o) {
    n = o.n;
    failed = o.failed;
    copy(o);
    return *this;
  }

 private:
  void copy(const RuleResults &o) {
    std::copy_n(o.left, n, left);
    std::copy_n(o.reset_s, n, reset_s);
    std::copy_n(o.window_end_s, n, window_end_s);
  }
};

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

// A tenant's control record, kept in the store (Redis: the hash <prefix>:{<tenant>}:ctl, which the admit
// script reads itself): its tier, its own bucket, its block. Written by the admin API.
struct TenantControl {
  std::string tier;                 // "": none
  int64_t rate_m = 0, burst_m = 0;  // a runtime override of the bucket (0: none)
  bool blocked = false;
  int64_t blocked_until_s = 0;  // 0: until unblocked
  bool empty() const { return tier.empty() && rate_m == 0 && !blocked; }
};

// An admin call's change to one tenant's control record: each field left alone unless its flag says.
struct ControlChange {
  bool set_tier = false, set_override = false, set_block = false;
  std::string tier;                 // "": back to none
  int64_t rate_m = 0, burst_m = 0;  // 0: removes the override
  bool blocked = false;
  int64_t blocked_until_s = 0;
};

// What the admin API shows of a tenant: its control record and each limiter's state now.
struct TenantState {
  TenantControl control;
  int64_t tokens_m = -1;           // the bucket (-1: not asked)
  int64_t in_flight = 0;           // live concurrency slots
  std::vector<int64_t> rule_left;  // per rule asked (as in AdmitOp::rules): micro-tokens or units left
  std::vector<int64_t> rule_reset_s;
  int64_t now_s = 0;  // the store's clock
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

class AdmitCompletion {
 public:
  virtual ~AdmitCompletion() = default;
  virtual void complete(AdmitResult &&r) = 0;
};

// One lease call on a tenant (lua/tenant_lease.lua): gives back what the process no longer holds, then
// takes what it asks for. Nothing is rejected: each part grants what exists.
struct LeaseOp {
  TenantKey tenant;
  bool tokens = false;  // ask for tokens
  int64_t rate_m = 0, burst_m = 0;
  int64_t min_m = 0;        // grant none unless the bucket holds this many (whole tokens)
  int64_t want_m = 0;       // grant at most this many (whole tokens)
  int64_t give_back_m = 0;  // unspent tokens of the previous lease, credited first
  bool slots = false;       // ask for slot ids (`wanted`)
  int64_t conc_limit = 0, conc_ttl_us = 0;
  std::vector<SlotId> released;  // slots given back
  std::vector<SlotId> wanted;    // ids to add, at most kMaxLeasedSlots; the first `slots` granted are used
  bool gives_back() const { return give_back_m > 0 || !released.empty(); }
};

struct LeaseResult {
  bool decided = false;  // false: the store could not answer; the waiting requests go to redis.fallback
  FailReason reason = FailReason::none;
  int64_t granted_m = 0;     // tokens now leased to the process
  int64_t tokens_m = 0;      // what the bucket holds after the grant (or held, when it granted none)
  int64_t slots = 0;         // slots granted: the first `slots` ids of `wanted`
  int64_t conc_count = 0;    // the tenant's live slots after the grant
  int64_t store_now_us = 0;  // the store's clock when it granted (Redis' TIME)
  bool controlled = false;   // the tenant has a control record: nothing granted; its requests go exact
};

class LeaseCompletion {
 public:
  virtual ~LeaseCompletion() = default;
  virtual void complete(LeaseResult &&r) = 0;
};

// This client's fleet usage decided in process, and what the rest of the fleet holds (lua/fleet_report.lua).
struct FleetReportOp {
  std::string client;      // this client's id
  int64_t in_flight = 0;   // its in-process non-critical requests in flight
  int64_t expires_us = 0;  // how long the report counts; 0 withdraws this client's report
  int64_t fleet_ttl_us = 0;
};

struct FleetReportResult {
  bool decided = false;
  int64_t others = 0;     // the other clients' live reports
  int64_t set_live = 0;   // the fleet set's live slots
  int64_t reporting = 0;  // how many other clients have a live report
};

class FleetReportCompletion {
 public:
  virtual ~FleetReportCompletion() = default;
  virtual void complete(FleetReportResult &&r) = 0;
};

enum class BreakerState : uint8_t { closed = 0, open = 1, half_open = 2 };

struct StoreStats {
  uint64_t evictions = 0;       // memory store: tenants evicted beyond max_tenants
  uint64_t tenants = 0;         // memory store: tenants held now
  uint64_t release_errors = 0;  // releases the store could not apply (their slots heal after ttl_s)
  uint64_t repairs = 0;         // shm store: locks taken over from a process that died holding them
  uint64_t reconnects = 0;
  uint64_t noscript_reloads = 0;
  uint64_t connections_in_use = 0;                    // Redis store: the connections calls are spread over now
  int64_t waiting = 0;                                // Redis store: admits waiting on a reply now
  int64_t waiting_cap = 0;                            // Redis store: beyond this many, admits do not wait
  std::array<uint64_t, kFailReasonCount> failures{};  // by reason
  BreakerState breaker = BreakerState::closed;
};

// -1: no fleet-wide mode is set for that limiter, else a Mode.
using FleetModes = std::array<int8_t, kLimiterCount>;

// What the store holds for the fleet as a whole, read at once for an operator (`floodwall status`).
struct StoreStatus {
  FleetModes modes{};             // the fleet-wide modes the store holds now (-1: none)
  bool fleet_wide_modes = false;  // whether they are every client's (Redis), not only this process's (memory, shm)
  int64_t fleet_in_flight = -1;   // the fleet shedder's live slots plus the clients' live reports; -1: unknown
  int64_t reporting_clients = 0;  // clients whose report of in-process fleet usage is live (leases)
  int64_t controlled = 0;         // tenants with a control record
  std::string server;             // what answers: "redis 7.0.15", "memory (this process)", ...
  std::string topology;           // "standalone", "cluster of 3 masters", "sentinel: master at 10.0.0.5:6379"
  int64_t round_trip_us = -1;     // one PING's round trip over the admin connection; -1: not measured
};

class Store {
 public:
  virtual ~Store() = default;
  // Blocks for at most the store's deadline.
  virtual AdmitResult admit(const AdmitOp &op) = 0;
  // Calls done->complete exactly once, possibly before returning.
  virtual void admit_async(const AdmitOp &op, AdmitCompletion *done) = 0;
  // Never fails the caller; an error is counted and the slot heals after its ttl.
  virtual void release(const ReleaseOp &op) = 0;
  virtual StoreStats stats() const = 0;
  // Called in a forked child that abandons this store (process_guard.hpp): close inherited descriptors, and
  // touch nothing else (its locks may be held by threads that exist only in the parent).
  virtual void abandon_after_fork() {}
  // A store that the processes of one machine share (shm://) takes this process's time-weighted busy
  // workers and its workers, and answers the machine's utilization; the others answer nothing.
  virtual std::optional<double> box_utilization(double /*busy*/, int64_t /*workers*/, int64_t /*now_us*/) {
    return std::nullopt;
  }
  // Whether admit() can wait on I/O (a network store); the in-process stores answer at once.
  virtual bool can_block() const { return false; }
  // Whether admit() decides at AdmitOp::now_us when it is given (the in-process stores, on the Guard's
  // clock): the Guard then reads the clock for the store, once per decision.
  virtual bool takes_time() const { return false; }
  // Batching for an event loop (fw_client_hold, fw_client_flush): from hold_writes until flush_writes, the
  // async admits and releases of the calling thread are kept from the I/O thread, so that a turn's calls
  // go out in one write (one read for Redis), or a long turn's in a few (redis.batch_window_us); a blocking
  // admit flushes first. No-ops for the in-process stores.
  virtual void hold_writes() {}
  virtual void flush_writes() {}

  // The admin API (blocking, within the store's deadline; a store that cannot answer throws StoreError).
  // The op names the tenant and, for inspect, the limiters and rules whose state to read (rate, conc,
  // rules with their parameters); reset forgets the tenant's buckets, quotas and slots, never its record.
  virtual void control(const TenantKey &tenant, const ControlChange &change) = 0;
  virtual TenantState inspect(const AdmitOp &op) = 0;
  virtual void reset(const AdmitOp &op) = 0;
  // The tenants with a control record (at most `limit`), as TenantKey bytes.
  virtual std::vector<std::pair<std::string, TenantControl>> controlled(size_t limit) = 0;
  // Sets a limiter's fleet-wide mode (-1: none) where the fleet reads it: in this process for the
  // in-process stores, in <prefix>:flags on Redis (every client's next poll).
  virtual void set_fleet_mode(Limiter l, int8_t mode) { fleet_modes_[static_cast<size_t>(l)].store(mode); }
  // The fleet-wide modes, the fleet's usage (its slots live within fleet_ttl_us) and the store's health,
  // read from the store now (not from what this client polled last).
  virtual StoreStatus status(int64_t fleet_ttl_us) = 0;

  // Leases (a store shared over the network: the in-process stores decide every request in process
  // already). lease_async calls done->complete exactly once, possibly before returning; end_lease gives
  // back without an answer (never fails the caller: tokens it cannot give back stay debited, slots heal
  // after ttl_s).
  virtual bool supports_leases() const { return false; }
  virtual void lease_async(const LeaseOp & /*op*/, LeaseCompletion *done) {
    LeaseResult r;
    r.reason = FailReason::error;
    done->complete(std::move(r));
  }
  virtual void end_lease(const LeaseOp & /*op*/) {}
  virtual void fleet_report_async(const FleetReportOp & /*op*/, FleetReportCompletion *done) {
    done->complete(FleetReportResult{});
  }

  // The fleet-wide mode in force for a limiter, -1 when none is set (a store shared by a fleet carries
  // them; the Redis store polls them). A plain load, not a virtual call: the Guard reads it on every
  // decision.
  int8_t fleet_mode(Limiter l) const { return fleet_modes_[static_cast<size_t>(l)].load(std::memory_order_relaxed); }
  // Moves whenever a control record changes (this process's admin calls at once; on Redis, every client's
  // at its next flags poll, from the counter ctl_epoch of <prefix>:flags that each admin call raises): what
  // a hot tenant's lease or over-limit cache believes is then asked again.
  int64_t ctl_epoch() const { return ctl_epoch_.load(std::memory_order_relaxed); }
  void bump_ctl_epoch() { ctl_epoch_.fetch_add(1, std::memory_order_relaxed); }

 protected:
  Store() {
    for (auto &m : fleet_modes_) m.store(-1, std::memory_order_relaxed);
  }
  std::array<std::atomic<int8_t>, kLimiterCount> fleet_modes_;
  std::atomic<int64_t> ctl_epoch_{0};
};

}  // namespace floodwall
