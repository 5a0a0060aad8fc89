// Hot tenants decided in process (policy request_rate.lease and concurrency.lease; the Redis store).
//
// Every decision of a cold tenant is one exact round trip. A tenant whose admits in this process reach
// kHotAdmits within one kWindowUs window (1,600 a second: more than one round trip each is worth) is hot
// here, until 100 ms pass without a window of kCoolAdmits. A hot tenant's requests are decided from:
// - a token lease: up to max_tokens of the bucket (never more than ttl_ms of its refill, nor than its
//   burst) taken in one call to lua/tenant_lease.lua, debited in Redis before any is spent, spent here
//   under the entry's lock (none twice, none beyond the lease), what is left given back when the lease
//   ends, ttl_ms after it was asked for (or at the next lease call, which gives it back first);
// - the over-limit cache: each lease call's reply says what the bucket held at an instant no earlier
//   than when the call was sent, so until the bucket can hold the missing tokens (counted from that
//   send) Redis would reject: the request is rejected here, Retry-After and the headers from that state;
// - a slot lease: up to max_slots slot ids added to the tenant's set at once (every other client
//   counts them as used: the limit can never be exceeded), handed to this process's requests, taken
//   back from their tickets, and given back in batches when their lease ends (ttl_ms); a set found full
//   is believed for kFullHoldUs;
// - the fleet's usage from reports: this client's non-critical requests decided in process hold no slot
//   in the fleet set; every kReportUs it reports their count (lua/fleet_report.lua) and learns the
//   set's live slots and the other clients' reports, and decides from their sum plus its own count now.
// A request that needs what none of these can say waits for one lease call (one per tenant in flight;
// every request that arrives meanwhile waits for the same one), or takes one exact round trip when a
// limiter it asks has no lease (or the fleet view is stale). Decisions made here are the store's: not
// degraded, fail_reason none; the metrics count them apart (LeaseCounter).
//
// A process owns its leases: a forked child (fork.hpp) never spends the parent's, and a killed process
// strands what it held, which is no more than ttl_ms of the tenant's refill: debited, never spent, and
// refilled within ttl_ms.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "metrics/metrics.hpp"
#include "policy/policy.hpp"
#include "stores/store.hpp"
#include "util/clock.hpp"
#include "util/spin_lock.hpp"

namespace floodwall {

// Waits for a tenant's lease call in flight. wake() is called once, with no lock held, when the call
// completed; `failure` is its reason when it failed (the waiting request then goes to redis.fallback).
class LeaseWaiter {
 public:
  virtual ~LeaseWaiter() = default;
  virtual void wake() = 0;
  FailReason failure = FailReason::none;
  LeaseWaiter *next = nullptr;
};

class HotTenants {
 public:
  static constexpr int64_t kWindowUs = 10'000;
  static constexpr uint32_t kHotAdmits = 16, kCoolAdmits = 4;
  static constexpr int64_t kCoolWindows = 10;              // cold after 100 ms without a window of kCoolAdmits
  static constexpr int64_t kFullHoldUs = 1'000;            // a concurrency set found full is believed this long
  static constexpr int64_t kReportUs = 100'000;            // fleet reports
  static constexpr int64_t kReportTtlUs = 1'000'000;       // a report counts this long (a dead client's too)
  static constexpr int64_t kFleetViewUs = 1'000'000;       // an older fleet view decides nothing here
  static constexpr int kMaxRounds = 3;                     // lease calls one request waits for, then exact
  static constexpr int64_t kControlledHoldUs = 1'000'000;  // exact admits after a control record is seen

  // The store and metrics must outlive this; the clock and rng too.
  HotTenants(const Policy &p, Store &store, const Clock &clock, Rng &rng, Metrics &metrics);
  ~HotTenants();
  // Gives back every lease and stops the maintenance thread: before the store is destroyed.
  void shutdown();

  class Entry;
  using EntryRef = std::shared_ptr<Entry>;

  // Counts the admit; the tenant's entry when it is hot in this process, else null.
  EntryRef track(const AdmitOp &op, int64_t now_us);

  enum class Handled : uint8_t {
    decided,  // r is the decision (r.decided false with a reason: the lease call failed, fallback decides)
    exact,    // one exact round trip (learn() from its reply)
    waiting,  // admit_async only: `w` is woken when the lease call in flight completes; ask again then
  };
  // Blocks for at most the lease calls it waits for (each within the store's deadline).
  Handled admit(Entry &e, const AdmitOp &op, AdmitResult &r);
  // An async request's lease calls: how many it waited for, and whether it made one itself (the caller
  // keeps this between wakes).
  struct AsyncState {
    int rounds = 0;
    bool called = false;
  };
  Handled admit_async(Entry &e, const AdmitOp &op, AdmitResult &r, LeaseWaiter &w, AsyncState &st);
  // After an exact admit of a hot tenant sent at sent_us: what its reply says about the bucket.
  void learn(Entry &e, const AdmitOp &op, const AdmitResult &r, int64_t sent_us);

  // A ticket's leased slot back to its lease (until_us: when its lease ends), and its fleet share.
  void release_slot(const TenantKey &tenant, const SlotId &id, int64_t until_us);
  void release_fleet_share() { fleet_local_.fetch_sub(1, std::memory_order_relaxed); }

  struct LeaseTotals {
    int64_t hot_tenants = 0, tokens = 0, slots = 0;  // tokens: whole tokens in hand
  };
  LeaseTotals lease_totals();

 private:
  // The parts shared by the files of HotTenants are in hot_tenants_parts.hpp.
  static constexpr size_t kSets = 1024, kWays = 4;  // tenants tracked at once: 4,096
  struct Way;
  struct Set;
  enum class Verdict : uint8_t { ok, no, ask_lease, ask_exact };
  struct Reading;
  class FleetReport;

  // hot_tenants.cpp: the maintenance thread.
  void run();
  void maintain(int64_t now);  // leases that end, slots that go back, entries that go, reports

  // hot_tenants_tracker.cpp: the table of tenants seen lately.
  EntryRef find(const TenantKey &tenant);

  // hot_tenants_leases.cpp: one decision, in the steps decide() names, under the entry's lock.
  Handled decide(Entry &e, const AdmitOp &op, AdmitResult &r, bool &start_call, LeaseWaiter *w);
  Reading read(Entry &e, const AdmitOp &op) const;
  Verdict rate_verdict(const Entry &e, const AdmitOp &op, Reading &v) const;
  Verdict conc_verdict(Entry &e, int64_t now) const;
  Verdict fleet_verdict(const AdmitOp &op, const Reading &v) const;
  int64_t lease_size_m(const AdmitOp &op) const;
  void prepare_lease_call(Entry &e, const AdmitOp &op, const Reading &v);
  bool take_fleet_share(const AdmitOp &op, int64_t &fleet_now);
  void answer(Entry &e, const AdmitOp &op, Reading &v, bool rejected, AdmitResult &r);
  // hot_tenants_leases.cpp: the lease call, its reply, and what goes back without one.
  void start_lease_call(Entry &e);
  void on_lease(Entry &e, LeaseResult &&res);
  // When, on this client's clock, a lease call sent at sent_us and answered at received_us was
  // executed by Redis at store_us of its clock (see offset_hi_).
  int64_t executed_at(int64_t store_us, int64_t sent_us, int64_t received_us);
  void give_back(Entry &e, int64_t now, bool everything);

  // hot_tenants_fleet.cpp: the fleet's view, and this client's report of its share.
  bool fleet_view_fresh(int64_t now) const {
    int64_t at = fleet_view_at_.load(std::memory_order_relaxed);
    return at != 0 && now - at < kFleetViewUs;
  }
  void report(int64_t now, bool hot);  // every kReportUs (hot: some tenant is)
  void withdraw_report();              // at shutdown

  const Policy &policy_;
  Store &store_;
  const Clock &clock_;
  Rng &rng_;
  Metrics &metrics_;
  const uint64_t generation_;
  const uint64_t seed_;
  const bool token_leases_, slot_leases_, fleet_;
  std::unique_ptr<Set[]> sets_;

  std::mutex active_mu_;
  std::vector<EntryRef> active_;  // every entry made, until it holds nothing and nobody refers to it

  // Fleet: this client's in-process non-critical requests in flight, and the rest of the fleet (the
  // set's live slots plus the other clients' reports) as of the last report.
  const std::string client_id_;
  std::atomic<int64_t> fleet_local_{0};
  std::atomic<int64_t> fleet_others_{0};
  std::atomic<int64_t> fleet_view_at_{0};
  std::unique_ptr<FleetReport> report_;
  int64_t next_report_us_ = 0;
  int64_t last_reported_ = 0;

  // Redis' clock minus this client's is within [lo, hi] for every answered call (lo = store time - when it
  // was answered, hi = store time - when it was sent); the least hi over the last second or two (its
  // fastest round trip) bounds when a call ran far better than its own round trip does. Used only to
  // know when the bucket refills: an error costs a lease call or an early refusal, never a token.
  SpinLock offset_mu_;
  int64_t offset_hi_ = INT64_MAX, offset_hi_last_ = INT64_MAX, offset_epoch_us_ = 0;

  std::mutex run_mu_;
  std::condition_variable run_cv_;
  bool stop_ = false;
  std::atomic<bool> stopped_{false};
  std::thread thread_;
};

}  // namespace floodwall
