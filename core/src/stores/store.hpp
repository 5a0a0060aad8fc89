// The store interface: where the per-tenant and fleet-wide state lives. The memory store keeps it in
// process, the shm store in a segment the processes of a machine share; the Redis store keeps it in Redis
// and runs one script per atomic operation (lua/). An admit's and a release's ops and an admit's result are
// in store_ops.hpp (their rule arrays in store_rules.hpp), the lease and fleet-report calls in
// store_leases.hpp, the admin API's records in store_admin.hpp.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "policy/policy.hpp"
#include "policy/tenant_key.hpp"
#include "stores/store_admin.hpp"
#include "stores/store_leases.hpp"
#include "stores/store_ops.hpp"
#include "util/slot_signals.hpp"

namespace floodwall {

class AdmitCompletion {
 public:
  virtual ~AdmitCompletion() = default;
  virtual void complete(AdmitResult &&r) = 0;
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
  // Whether the state lives in another process over the network (Redis, Cluster, Sentinel): such a store can
  // fail to answer in time, so the local fallback (redis.fallback) stands in for it. The in-process stores
  // (memory://, shm://) always answer.
  virtual bool remote() const { return false; }
  // Waiting for a concurrency slot (an acquire, docs/concepts/acquire.md): the words that every release of a
  // tenant's slot moves, wherever the store is shared (util/slot_signals.hpp). nullptr: a store whose
  // releases signal nothing; a full concurrency limit then refuses an acquire at once.
  virtual const SlotSignals *slot_signals() const { return nullptr; }
  // An acquire of the tenant begins (on) or ends (off) waiting for its slot: a store that learns of releases
  // by a subscription (Redis) is subscribed while any waits, and moves the tenant's word once it is (and
  // after each subscription made again), so that the waiter tries again after a release it could have missed.
  virtual void watch_slots(std::string_view /*tenant_key*/, bool /*on*/) {}
  // Whether admit() can wait on I/O: a remote store's can; the in-process stores answer at once.
  bool can_block() const { return remote(); }
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

  // The fleet view (engine/fleet_summary.hpp): this client's summary (JSON text) kept under its id for
  // ttl_ms, an empty text taking it away; and the summaries of every client alive now. Blocking, within the
  // store's deadline; throws StoreError. memory:// holds its own process's only.
  virtual void put_summary(const std::string & /*id*/, const std::string & /*text*/, int64_t /*ttl_ms*/) {}
  virtual std::vector<std::string> summaries() { return {}; }

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
