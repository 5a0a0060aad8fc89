// What the files of HotTenants (hot_tenants.hpp) share, and nothing else includes: the entry of one hot
// tenant, the table's sets and ways that find it, and the completion of a fleet report.
//   hot_tenants.cpp          the maintenance thread, shutdown, the admit paths (blocking and async)
//   hot_tenants_tracker.cpp  which tenants are hot: the table of ways, track() and find()
//   hot_tenants_leases.cpp   decisions from token and slot leases, lease calls, give-backs, the clock offset
//   hot_tenants_fleet.cpp    the periodic report of this client's in-process fleet usage
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/hot_tenants.hpp"

namespace floodwall {

// One tenant hot in this process. Its lock guards everything below; it is held for a few dozen
// instructions (a decision), never across a call to the store.
class HotTenants::Entry final : public LeaseCompletion, public std::enable_shared_from_this<Entry> {
 public:
  Entry(HotTenants &owner, const TenantKey &t) : owner(owner), tenant(t) {}
  void complete(LeaseResult &&r) override { owner.on_lease(*this, std::move(r)); }

  HotTenants &owner;
  const TenantKey tenant;
  SpinLock mu;
  // The token lease: micro-tokens in hand (whole tokens), spendable until lease_until_us.
  int64_t lease_m = 0, lease_until_us = 0;
  // What Redis last said: the bucket held left_m at an instant no earlier than known_at_us.
  bool known = false;
  int64_t known_at_us = 0, left_m = 0, rate_m = 0, burst_m = 0;
  // Decided by exact admits until then: the tenant has a control record, or one changed (ctl_epoch).
  int64_t exact_until_us = 0, ctl_epoch = 0;
  // Redrawn at each reply: how much of half a batch's refill this process waits beyond the instant the
  // bucket holds one, so that the processes of a fleet, which all compute that same instant, do not all
  // call at it (the fastest one would win every time, and the others refuse every request).
  double jitter = 0;
  // Slots: idle leased ones (each until its lease ends), ones that go back, and what Redis holds.
  struct Leased {
    SlotId id;
    int64_t until_us;
  };
  std::vector<Leased> free;
  int64_t free_expiry_us = INT64_MAX;  // the earliest until_us in `free` (no scan before it)
  std::vector<SlotId> to_release;
  int64_t slots_in_use = 0, live_known = 0, full_until_us = 0, conc_limit = 0;
  // The lease call in flight and who waits for it; `self` keeps the entry alive meanwhile.
  bool calling = false;
  LeaseOp call;
  int64_t call_sent_us = 0;
  LeaseWaiter *waiters = nullptr;
  EntryRef self;

  bool holds_nothing() const {
    return lease_m == 0 && free.empty() && to_release.empty() && slots_in_use == 0 && !calling;
  }
  // The bucket as Redis last said, refilled until `us` (an upper bound: other processes may have taken
  // some).
  int64_t bucket_at(double us) const {
    if (!known || rate_m <= 0) return 0;
    double refilled =
        static_cast<double>(left_m) + (us - static_cast<double>(known_at_us)) * static_cast<double>(rate_m) / 1e6;
    return static_cast<int64_t>(std::clamp(refilled, 0.0, static_cast<double>(burst_m)));
  }
  void add_free(const SlotId &id, int64_t until_us) {
    free.push_back({id, until_us});
    free_expiry_us = std::min(free_expiry_us, until_us);
  }
  // Moves the idle slots whose lease ended by `now` (all of them with `everything`) to to_release.
  void expire_free(int64_t now, bool everything) {
    if (!everything && now < free_expiry_us) return;
    free_expiry_us = INT64_MAX;
    std::erase_if(free, [&](const Leased &s) {
      if (!everything && s.until_us > now) {
        free_expiry_us = std::min(free_expiry_us, s.until_us);
        return false;
      }
      to_release.push_back(s.id);
      return true;
    });
  }
};

// The table of tenants seen lately (hot_tenants_tracker.cpp): kSets sets of kWays ways, a tenant's set
// chosen by its key's hash.
struct HotTenants::Way {
  uint64_t hash = 0;
  TenantKey key;                          // empty: a free way (tenant ids are never empty)
  int64_t window = -1, busy_window = -1;  // the last window with kCoolAdmits admits
  uint32_t count = 0;
  bool hot = false;
  EntryRef entry;  // while hot
};

struct alignas(64) HotTenants::Set {
  SpinLock mu;
  std::array<Way, kWays> ways;
};

// This client's fleet report in flight (one at a time); its reply is the fleet's view (hot_tenants_fleet.cpp).
class HotTenants::FleetReport final : public FleetReportCompletion {
 public:
  explicit FleetReport(HotTenants &owner) : owner_(owner) {}
  void complete(FleetReportResult &&r) override;
  std::atomic<bool> in_flight{false};

 private:
  HotTenants &owner_;
};

}  // namespace floodwall
