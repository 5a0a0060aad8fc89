// The store interface: where the per-tenant and fleet-wide state lives. The memory store keeps it in
// process; the Redis store keeps it in Redis and runs one script per atomic operation (lua/).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <optional>

#include "policy.hpp"
#include "tenant_key.hpp"

namespace floodwall {

// A request's slot id in the concurrency and fleet sets: 128 random bits.
struct SlotId {
  uint64_t hi = 0, lo = 0;
  friend bool operator==(const SlotId &a, const SlotId &b) { return a.hi == b.hi && a.lo == b.lo; }
};

// overload: more admits were waiting on the store than it answers within the deadline, so this one was
// decided at once instead of waiting for a deadline it would miss.
enum class FailReason : uint8_t {
  none = 0,
  timeout = 1,
  connection = 2,
  breaker = 3,
  config = 4,
  error = 5,
  overload = 6
};
const char *fail_reason_name(FailReason r);
constexpr int kFailReasonCount = 7;

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
};

struct AdmitResult {
  bool decided = false;  // false: the store could not decide; redis.fallback decides
  FailReason reason = FailReason::none;
  bool rate_ok = true, conc_ok = true, fleet_ok = true;  // each limiter's own verdict
  bool committed = false;  // true when the request consumed (no enforcing limiter rejected)
  int64_t tokens_m = 0;    // the bucket after this request
  int64_t conc_count = 0;  // the tenant's in-flight requests after this request
};

// The commit rule, shared by every store (lua/tenant_admit.lua has the same lines): a request that an
// enforcing limiter rejects consumes nothing anywhere; otherwise each limiter that passed consumes.
inline bool commits(const AdmitOp &op, bool rate_ok, bool conc_ok, bool fleet_ok) {
  return !(op.rate && op.rate_enforce && !rate_ok) && !(op.conc && op.conc_enforce && !conc_ok) &&
         !(op.fleet && op.fleet_enforce && !fleet_ok);
}

struct ReleaseOp {
  TenantKey tenant;
  SlotId slot;
  bool conc = false, fleet = false;
};

class AdmitCompletion {
 public:
  virtual ~AdmitCompletion() = default;
  virtual void complete(AdmitResult &&r) = 0;
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

  // The fleet-wide mode in force for a limiter, -1 when none is set (a store shared by a fleet carries
  // them; the Redis store polls them). A plain load, not a virtual call: the Guard reads it on every
  // decision.
  int8_t fleet_mode(Limiter l) const { return fleet_modes_[static_cast<size_t>(l)].load(std::memory_order_relaxed); }

 protected:
  Store() {
    for (auto &m : fleet_modes_) m.store(-1, std::memory_order_relaxed);
  }
  std::array<std::atomic<int8_t>, kLimiterCount> fleet_modes_;
};

}  // namespace floodwall
