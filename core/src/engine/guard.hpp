// The Guard: the path of one request through the limiters, cheapest first.
//   mode flags -> utilization shedder and adaptive limit (local, no I/O)
//   -> request rate, its limits and quotas, concurrency and the fleet shedder (non-critical only), with the
//      tenant's control record: one atomic store operation (a hot tenant's lease decides it in process)
// An acquire (reserve, acquire) takes the same path and may be given a turn instead of a refusal.
// A request that one limiter rejects leaves every other limiter's state as if it had never arrived.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string_view>
#include <unordered_map>

#include "engine/adaptive_limit.hpp"
#include "engine/hot_tenants.hpp"
#include "engine/slot_line.hpp"
#include "engine/utilization_shedder.hpp"
#include "metrics/metrics.hpp"
#include "policy/policy.hpp"
#include "stores/store.hpp"
#include "util/clock.hpp"
#include "util/decision.hpp"
#include "util/errors.hpp"

namespace floodwall {

class Guard {
 public:
  // The clock and rng must outlive the Guard; `store` is owned.
  Guard(Policy policy, std::unique_ptr<Store> store, const Clock &clock, Rng &rng);
  ~Guard();

  // Throws BadRequest for a request that cannot be decided.
  Decision admit(const Request &rq);
  // Calls done exactly once (inline for the memory store); throws BadRequest before calling it. Returns
  // true when done has been called before the return (on this thread).
  bool admit_async(const Request &rq, AdmitDone done);
  void release(Ticket t);

  // An acquire (docs/concepts/acquire.md): the admit of a request that waits for its turn instead of being
  // refused, when that turn is at most max_wait_s away (capped at the longest full refill of its buckets,
  // and at 14 days). reserve decides without waiting: an allowed decision's wait_us says when the caller
  // may go; acquire then sleeps until then (no polling of the store). Refusals come at once, as admit's,
  // but for acquire's refusal by the concurrency limiter alone on a store that signals releases
  // (Store::slot_signals): it waits for a release, up to max_wait_s (not capped by the buckets), in line
  // with this process's other acquires of the tenant, then reserves its turn with what is left.
  // Throws BadRequest naming max_wait for a negative, NaN or infinite one, and what admit throws.
  Decision reserve(const Request &rq, double max_wait_s);
  Decision acquire(const Request &rq, double max_wait_s);
  // reserve without blocking, as admit_async: done gets the decision (its wait_us for the caller to wait
  // out in its own event loop). Throws BadRequest before calling done, as reserve.
  bool reserve_async(const Request &rq, double max_wait_s, AdmitDone done);

  void set_mode(Limiter l, Mode m);
  Mode mode(Limiter l) const;  // in force: the fleet-wide one when set, else the local one
  Mode local_mode(Limiter l) const {
    return static_cast<Mode>(local_modes_[static_cast<size_t>(l)].load(std::memory_order_relaxed));
  }
  // In a forked child that made its own Guard: close what this one inherited, touch nothing else.
  void abandon_after_fork() { store_->abandon_after_fork(); }
  void report_utilization(double u);
  double shedding_amount();

  std::string metrics_json();
  std::string metrics_prometheus();
  const Policy &policy() const { return policy_; }
  Store &store() { return *store_; }
  Metrics &metrics() { return metrics_; }

  // The admin API (engine/admin.cpp): a tenant's control record in the store, which every client's next
  // admit of the tenant reads. Bad arguments throw BadRequest naming them; a store that cannot be reached,
  // StoreError. Blocking, within the store's deadline (at least a second).
  void admin_set_override(std::string_view tenant, double rate, double burst);
  void admin_remove_override(std::string_view tenant);
  void admin_set_tier(std::string_view tenant, std::string_view tier);  // "": none
  void admin_block(std::string_view tenant, double seconds);            // 0: until unblocked
  void admin_unblock(std::string_view tenant);
  std::string admin_show(std::string_view tenant);  // JSON
  void admin_reset(std::string_view tenant);
  void admin_set_mode(Limiter l, int mode);  // a Mode, or -1: each process's own again
  std::string admin_list(size_t limit);      // JSON
  std::string admin_status();                // JSON: modes, fleet usage, control records, the store's health

 private:
  struct Prepared {
    AdmitOp op;
    int route = 0;
    bool shed = false;  // a local limiter rejects (enforced): shed_by
    Limiter shed_by = Limiter::utilization;
    bool shed_dark = false;      // the utilization shedder would have rejected (dark)
    bool adaptive_dark = false;  // the adaptive limit would have rejected (dark)
    int adaptive = -1;           // the adaptive limit the request holds a slot of (adaptive_), and its slot
    uint64_t adaptive_slot = 0;
    bool util_counted = false;
    const BucketLimits *bucket = nullptr;
    uint64_t cost = 1;   // the tokens asked for (0 counted as 1), for the rejection's message
    uint64_t rules = 0;  // bit i: Policy::rules[i] applies (dark and off ones too: RateLimit-Policy lists them)
    int tier = -1;       // the tenant's tier (Policy::tiers) as this client knows it; -1: none
  };
  struct TicketHold {
    TenantKey tenant;
    SlotId slot;
    bool conc = false, fleet = false, in_flight = false;
    bool local = false;  // the slots are in the fallback table, not in the store
    // A hot tenant's: the slot goes back to its lease (until its lease ends), the fleet share to the
    // count this client reports.
    bool leased = false, fleet_in_process = false;
    int64_t slot_lease_until_us = 0;
    int adaptive = -1;  // a slot of adaptive_[adaptive], measured at its release
    uint64_t adaptive_slot = 0;
    // An acquire's reservation, given back when released before turn_local_us (this process's clock):
    // see Guard::reservation. 0: nothing to give back.
    int64_t give_back_full_at_ns = 0, give_back_cost_ns = 0, turn_local_us = 0;
  };
  class Pending;
  void resume_hot(Pending *pending);  // an async admit of a hot tenant: decided, waiting, or exact

  // mode() of a limiter the policy configures: the fleet-wide one when set, else the local one.
  Mode mode_in_force(Limiter l) const {
    int8_t fleet_wide = store_->fleet_mode(l);
    return static_cast<Mode>(fleet_wide >= 0 ? fleet_wide
                                             : local_modes_[static_cast<size_t>(l)].load(std::memory_order_relaxed));
  }
  void prepare(const Request &rq, Prepared &p);
  void prepare_rules(std::string_view route, std::string_view method, uint64_t cost, Prepared &p);
  static int64_t wait_cap_ns(const AdmitOp &op, double max_wait_s);
  static void check_max_wait(double max_wait_s);
  void turn_came(Decision &d);
  static bool refused_for_slot(const Decision &d);
  static constexpr int64_t kSlotRecheckUs = 1'000'000;  // a slot wait's try without news (a lost notice)
  Decision wait_for_slot(const Request &rq, const SlotSignals &signals, const std::string &tenant,
                         std::chrono::steady_clock::time_point deadline, uint32_t seen, Decision last);
  bool submit_async(const Request &rq, AdmitDone done, double max_wait_s);  // max_wait_s < 0: an admit
  void reservation(const AdmitOp &op, const AdmitResult &r, int64_t rate_m, int64_t burst_m, int64_t wait_us,
                   TicketHold &h);
  Decision finish(const Prepared &p, const AdmitResult &r);
  Decision decide(const Prepared &p, const AdmitResult &r);  // finish() but for the adaptive slot
  void decide_into(const Prepared &p, const AdmitResult &r, Decision &d);
  [[gnu::noinline]] void decide_without_store(const Prepared &p, const AdmitResult &r, Decision &d);
  void decide_on(const Prepared &p, const AdmitResult &r, Metrics::Slab *counts, Decision &d);
  void prepare_adaptive(const Request &rq, std::string_view route, std::string_view method, Prepared &p);
  void drop_adaptive(Prepared &p);  // a prepared request that is not going on: its adaptive slot back
  void release_adaptive(int family, uint64_t slot, bool measured);  // slot 0: none
  void rule_verdicts(const Prepared &p, const AdmitResult &r, Decision &d);
  TenantKey admin_tenant(std::string_view tenant) const;
  AdmitOp admin_op(const TenantKey &t, int tier, size_t first_rule, size_t &next_rule) const;
  std::string_view tenant_tier(const TenantKey &t);
  void learn_tier(const TenantKey &t, std::string_view tier);
  static constexpr int kTierAttempts = 2;  // an admit decided again after the store named another tier
  static constexpr size_t kMaxTenantTiers = 100'000;
  void tick_utilization(int64_t now_us);
  Ticket hold(const TicketHold &h);
  Gauges gauges();

  Policy policy_;
  std::unique_ptr<Store> store_;
  // redis.fallback "local": the table of the same policy that decides while the store cannot.
  std::unique_ptr<Store> fallback_;
  const Clock &clock_;
  Rng &rng_;
  Metrics metrics_;
  // Policy leases on a store that supports them: hot tenants decided in process (hot_tenants.hpp).
  std::unique_ptr<HotTenants> hot_;
  // Tenants whose control record names a tier, as the store last said (tenant_tier, learn_tier): the plan tier of
  // Policy::tiers, not a traffic class of the shedders.
  std::mutex tiers_mu_;
  std::unordered_map<std::string, std::string_view> tenant_tiers_;
  std::set<std::string, std::less<>> tier_names_;
  std::atomic<bool> any_tier_{false};
  std::array<std::atomic<uint8_t>, kLimiterCount> local_modes_{};

  // Utilization shedder.
  std::mutex util_mu_;
  std::unique_ptr<UtilizationController> controller_;
  InFlightMeter meter_;
  std::atomic<double> reported_{NAN};
  std::atomic<double> last_util_{0};

  // The adaptive concurrency limits: one for every request, or one per route family policy_.adaptive names.
  std::vector<std::unique_ptr<AdaptiveLimit>> adaptive_;
  // Whether prepare() reads the clock into AdmitOp::now_us: for an in-process store (Store::takes_time),
  // the utilization shedder or the adaptive limit, each of which then uses that one reading.
  bool reads_now_ = false;
  std::string_view empty_path_family_;  // policy_.family_of_path("") (a glob of policy_, or empty)

  // Tickets: what each admitted request holds until it is released.
  static constexpr size_t kTicketShards = 16;
  struct TicketShard {
    std::mutex mu;
    std::unordered_map<Ticket, TicketHold> held;
  };
  std::array<TicketShard, kTicketShards> tickets_;
  std::atomic<Ticket> next_ticket_{1};
  // Acquires waiting for a concurrency slot of a tenant, in line (engine/slot_line.hpp).
  SlotLine slot_line_;
};

}  // namespace floodwall
