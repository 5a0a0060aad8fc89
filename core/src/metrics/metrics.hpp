// Counters by limiter x outcome x route family, failures by limiter x reason, and the tenants with
// the highest rejection rate. Dark mode is only useful with these.
#pragma once

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "policy/policy.hpp"
#include "policy/tenant_key.hpp"
#include "stores/store.hpp"

namespace floodwall {

class MetricsVisitor;

enum class Outcome : uint8_t { allowed = 0, rejected = 1, dark_rejected = 2, failed_open = 3 };
constexpr int kOutcomeCount = 4;
const char *outcome_name(Outcome o);

// Who decided a request that reached the store: the store, the local fallback table, nobody (failed
// open), or nobody and it was refused (redis.fallback "closed").
enum class Source : uint8_t { store = 0, fallback = 1, failed_open = 2, refused = 3 };
constexpr int kSourceCount = 4;
const char *source_name(Source s);

// What hot tenants' leases did (hot_tenants.hpp). A decision in process had no round trip of its own (a
// lease's tokens or slots, the over-limit cache, or a lease call another request made); one after a lease
// call made that call itself. Both are store decisions (source "store", fail_reason none).
enum class LeaseCounter : uint8_t {
  decisions_in_process = 0,
  decisions_after_lease_call,
  exact_admits,  // hot, but a limiter it asks cannot be leased now: one exact round trip
  lease_calls,
  give_backs,  // lease calls that only gave back (a lease that ended, slots that went back)
  fleet_reports,
  releases_in_process,  // a leased slot back to its lease: no release call
  tokens_leased,
  tokens_given_back,
  slots_leased,
  slots_given_back,
};
constexpr int kLeaseCounterCount = 11;

struct Gauges {
  double shedding_amount = 0;
  double utilization = 0;
  int64_t in_flight = 0;
  std::array<Mode, kLimiterCount> modes{};
  std::array<bool, kLimiterCount> configured{};
  bool leases = false;  // the policy leases: the "leases" section is shown
  int64_t hot_tenants = 0, tokens_in_hand = 0, slots_in_hand = 0;
  std::vector<std::string> rules;  // the policy's limits and quotas, by index: their counters' names
  struct Adaptive {
    std::string routes;  // the route family it limits; "*": every request
    double limit = 0;
    int64_t in_flight = 0;
  };
  std::vector<Adaptive> adaptive;  // the adaptive concurrency limits (none when not configured)
};

class Metrics {
 public:
  static constexpr size_t kMaxRoutes = 64;  // route families beyond this are counted as "other"
  static constexpr size_t kMaxTenants = 256;
  static constexpr size_t kTopTenants = 10;

  Metrics();
  // Route family index for counters; "" is "default".
  int route_index(std::string_view route) { return route.empty() ? 0 : named_route_index(route); }
  void count(int route, Limiter l, Outcome o) { count(slab(), route, l, o); }
  void source(Source s) { source(slab(), s); }
  void lease(LeaseCounter k, uint64_t n = 1) {
    std::atomic<uint64_t> &c = my_slab().lease[static_cast<size_t>(k)];
    c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  uint64_t lease_count(LeaseCounter k) const;
  // Decisions and releases made in process (each would have been one command) plus the decisions after a
  // lease call (one command each either way), less the lease calls, give-backs and reports made instead.
  int64_t commands_saved() const {
    auto n = [&](LeaseCounter k) { return static_cast<int64_t>(lease_count(k)); };
    return n(LeaseCounter::decisions_in_process) + n(LeaseCounter::decisions_after_lease_call) +
           n(LeaseCounter::releases_in_process) - n(LeaseCounter::lease_calls) - n(LeaseCounter::give_backs) -
           n(LeaseCounter::fleet_reports);
  }
  // A limit's or quota's verdict (Policy::rules[index]); a blocked tenant's refusal.
  void rule(size_t index, Outcome o) {
    if (index < kMaxRuleCounters)
      rules_[index * kOutcomeCount + static_cast<size_t>(o)].fetch_add(1, std::memory_order_relaxed);
  }
  void blocked() { blocked_.fetch_add(1, std::memory_order_relaxed); }
  // The fleet view's summary of this client (engine/fleet_summary.hpp): a write to the store, done or not.
  void summary_written(bool ok) { summary_writes_[ok ? 0 : 1].fetch_add(1, std::memory_order_relaxed); }
  static constexpr size_t kMaxRuleCounters = 64;
  void failed(Limiter l, FailReason r) {
    failures_[static_cast<size_t>(l) * kFailReasonCount + static_cast<size_t>(r)].fetch_add(1,
                                                                                            std::memory_order_relaxed);
  }
  // Called once per decision that reached the tenant limiters.
  void tenant_seen(const TenantKey &t, bool rejected) {
    if (rejected || any_tenant_.load(std::memory_order_relaxed)) tally_tenant(t, rejected);
  }

  // Every counter and gauge, once, in the JSON document's order: each value with its JSON key and its
  // Prometheus family and labels (visitor.hpp). json() and prometheus() are its two visitors (emitters.cpp).
  void visit(const StoreStats &st, const Gauges &g, MetricsVisitor &v) const;
  std::string json(const StoreStats &st, const Gauges &g) const;
  std::string prometheus(const StoreStats &st, const Gauges &g) const;

 private:
  struct Route {
    std::string name;
  };
  static size_t slot(size_t route, Limiter l, Outcome o) {
    return (route * kLimiterCount + static_cast<size_t>(l)) * kOutcomeCount + static_cast<size_t>(o);
  }

 public:
  // The decision counters of one thread. A decision adds one with a plain load and store, never a locked
  // instruction (a `lock add` was about a tenth of an embedded decision); readers sum every slab. The
  // slab belongs to the Metrics and to the threads that cache it (shared_ptr): a thread gives it back
  // (owned = false) when it exits or drops it from its cache, and the next thread to need one takes it
  // over, counts included, so there are as many slabs (8 KB each) as threads that counted at one time.
  struct Slab {
    std::array<std::atomic<uint64_t>, (kMaxRoutes + 1) * kLimiterCount * kOutcomeCount> c{};
    std::array<std::atomic<uint64_t>, kSourceCount> sources{};
    std::array<std::atomic<uint64_t>, kLeaseCounterCount> lease{};
    std::atomic<bool> owned{false};
  };
  struct CachedSlab {
    uint64_t owner = 0;  // Metrics::id_; 0 is no Metrics
    Slab *slab = nullptr;
  };
  static constexpr size_t kCachedSlabs = 4;  // the Metrics (clients) a thread counts for without a lock

  // This thread's slab, for a caller that counts several things of one decision: a thread-local of the shared
  // library is reached through a __tls_get_addr call, so a decision looks its slab up once.
  Slab &slab() { return my_slab(); }
  static void count(Slab &s, int route, Limiter l, Outcome o) { bump(s.c[slot(static_cast<size_t>(route), l, o)]); }
  static void source(Slab &s, Source src) { bump(s.sources[static_cast<size_t>(src)]); }

 private:
  Slab &my_slab();
  Slab &adopt_slab();
  static void bump(std::atomic<uint64_t> &c) {
    c.store(c.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);  // only this thread writes it
  }
  struct Tally {
    uint64_t requests = 0, rejections = 0;
  };
  struct TenantRow {
    std::string tenant;
    uint64_t requests, rejections;
  };
  int named_route_index(std::string_view route);
  void tally_tenant(const TenantKey &t, bool rejected);
  std::vector<TenantRow> top_tenants() const;
  uint64_t counter(size_t route, Limiter l, Outcome o) const;
  uint64_t source_count(Source s) const;
  // The walk's parts, in the JSON document's order (visit).
  void visit_decisions(MetricsVisitor &v) const;                       // every route family together, then each
  void visit_failures(const StoreStats &st, MetricsVisitor &v) const;  // by source, then the store's failures

  void visit_rules(const Gauges &g, MetricsVisitor &v) const;  // the limits and quotas, then blocks
  void visit_modes(const Gauges &g, MetricsVisitor &v) const;
  void visit_top_tenants(MetricsVisitor &v) const;
  void visit_store(const StoreStats &st, MetricsVisitor &v) const;  // the breaker too
  void visit_leases(const Gauges &g, MetricsVisitor &v) const;
  void visit_load(const Gauges &g, MetricsVisitor &v) const;  // the shedders' and the adaptive limit's levels

  const uint64_t id_;  // never reused, unlike an address
  mutable std::mutex slabs_mu_;
  std::vector<std::shared_ptr<Slab>> slabs_;
  std::vector<std::unique_ptr<Route>> routes_;  // fixed size kMaxRoutes + 1, filled lazily
  std::atomic<size_t> route_count_{0};          // routes_[0, count) are named; the names never change
  std::mutex routes_mu_;                        // adding a route
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::array<std::atomic<uint64_t>, kLimiterCount * kFailReasonCount> failures_{};
  std::array<std::atomic<uint64_t>, kMaxRuleCounters * kOutcomeCount> rules_{};
  std::atomic<uint64_t> blocked_{0};
  std::array<std::atomic<uint64_t>, 2> summary_writes_{};  // ok, failed
  mutable std::mutex tenants_mu_;
  std::unordered_map<std::string, Tally, Hash, std::equal_to<>> tenants_;
  std::atomic<bool> any_tenant_{false};
};

// This thread's slabs, by Metrics. Trivial, so reading it needs no guard; the thread gives its slabs
// back from SlabKeeper's destructor (metrics.cpp).
inline thread_local std::array<Metrics::CachedSlab, Metrics::kCachedSlabs> tls_slabs{};

inline Metrics::Slab &Metrics::my_slab() {
  for (const CachedSlab &e : tls_slabs)
    if (e.owner == id_) return *e.slab;
  return adopt_slab();
}

}  // namespace floodwall
