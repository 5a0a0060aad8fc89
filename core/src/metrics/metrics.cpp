#include "metrics/metrics.hpp"

#include <algorithm>

#include "metrics/visitor.hpp"

namespace floodwall {

const char *outcome_name(Outcome o) {
  switch (o) {
    case Outcome::allowed: return "allowed";
    case Outcome::rejected: return "rejected";
    case Outcome::dark_rejected: return "dark_rejected";
    case Outcome::failed_open: return "failed_open";
  }
  return "allowed";
}

const char *source_name(Source s) {
  switch (s) {
    case Source::store: return "store";
    case Source::fallback: return "fallback";
    case Source::failed_open: return "failed_open";
    case Source::refused: return "refused";
  }
  return "store";
}

namespace {

std::atomic<uint64_t> next_metrics_id{1};

// Holds this thread's share of its cached slabs, and gives them back when the thread exits. Only the
// slow path (Metrics::adopt_slab) touches it, so the fast path reads tls_slabs alone.
struct SlabKeeper {
  std::array<std::shared_ptr<Metrics::Slab>, Metrics::kCachedSlabs> keep;
  size_t next = 0;  // the entry to give up when all are taken
  ~SlabKeeper();
};
thread_local bool tls_keeper_gone = false;

SlabKeeper::~SlabKeeper() {
  for (size_t i = 0; i < keep.size(); i++) {
    tls_slabs[i] = {};
    if (keep[i]) keep[i]->owned.store(false, std::memory_order_release);
  }
  tls_keeper_gone = true;
}

}  // namespace

Metrics::Slab &Metrics::adopt_slab() {
  std::shared_ptr<Slab> slab;
  {
    std::lock_guard lock(slabs_mu_);
    for (const auto &s : slabs_)
      // acquire: the counts its last owner wrote before giving it back are ours to add to
      if (!s->owned.load(std::memory_order_acquire)) {
        slab = s;
        break;
      }
    if (!slab) slabs_.push_back(slab = std::make_shared<Slab>());
    slab->owned.store(true, std::memory_order_relaxed);
  }
  // A thread that counts from its own exit, after its keeper is gone, keeps the slab for good (no
  // cache entry to find it by again): rare, and never a lost count.
  if (tls_keeper_gone) return *slab;
  thread_local SlabKeeper keeper;
  size_t i = 0;
  while (i < kCachedSlabs && tls_slabs[i].owner != 0) i++;
  if (i == kCachedSlabs) {
    i = keeper.next;
    keeper.next = (keeper.next + 1) % kCachedSlabs;
    keeper.keep[i]->owned.store(false, std::memory_order_release);
  }
  keeper.keep[i] = slab;
  tls_slabs[i] = {id_, slab.get()};
  return *slab;
}

uint64_t Metrics::counter(size_t route, Limiter l, Outcome o) const {
  std::lock_guard lock(slabs_mu_);
  uint64_t total = 0;
  for (const auto &s : slabs_) total += s->c[slot(route, l, o)].load(std::memory_order_relaxed);
  return total;
}

uint64_t Metrics::source_count(Source src) const {
  std::lock_guard lock(slabs_mu_);
  uint64_t total = 0;
  for (const auto &s : slabs_) total += s->sources[static_cast<size_t>(src)].load(std::memory_order_relaxed);
  return total;
}

uint64_t Metrics::lease_count(LeaseCounter k) const {
  std::lock_guard lock(slabs_mu_);
  uint64_t total = 0;
  for (const auto &s : slabs_) total += s->lease[static_cast<size_t>(k)].load(std::memory_order_relaxed);
  return total;
}

Metrics::Metrics() : id_(next_metrics_id.fetch_add(1, std::memory_order_relaxed)) {
  for (size_t i = 0; i < kMaxRoutes + 1; i++) routes_.push_back(std::make_unique<Route>());
  routes_[0]->name = "default";
  routes_[kMaxRoutes]->name = "other";
  route_count_ = 1;
}

// Lock-free for the routes already known: names are written before the count that publishes them,
// and never change. Only a new route family takes the lock.
int Metrics::named_route_index(std::string_view route) {
  size_t n = route_count_.load(std::memory_order_acquire);
  for (size_t i = 1; i < n; i++)
    if (routes_[i]->name == route) return static_cast<int>(i);
  if (n >= kMaxRoutes) return static_cast<int>(kMaxRoutes);
  std::lock_guard lock(routes_mu_);
  n = route_count_.load(std::memory_order_relaxed);
  for (size_t i = 1; i < n; i++)
    if (routes_[i]->name == route) return static_cast<int>(i);
  if (n >= kMaxRoutes) return static_cast<int>(kMaxRoutes);
  routes_[n]->name = std::string(route);
  route_count_.store(n + 1, std::memory_order_release);
  return static_cast<int>(n);
}

void Metrics::tally_tenant(const TenantKey &t, bool rejected) {
  std::lock_guard lock(tenants_mu_);
  auto it = tenants_.find(t.view());
  if (it == tenants_.end()) {
    // A tenant enters the table on its first rejection; its rate counts from then on.
    if (!rejected) return;
    if (tenants_.size() >= kMaxTenants) {
      auto victim = std::min_element(tenants_.begin(), tenants_.end(), [](const auto &a, const auto &b) {
        return a.second.rejections < b.second.rejections;
      });
      tenants_.erase(victim);
    }
    it = tenants_.emplace(std::string(t.view()), Tally{}).first;
    any_tenant_.store(true, std::memory_order_relaxed);
  }
  it->second.requests++;
  if (rejected) it->second.rejections++;
}

std::vector<Metrics::TenantRow> Metrics::top_tenants() const {
  std::vector<TenantRow> rows;
  {
    std::lock_guard lock(tenants_mu_);
    for (const auto &[k, v] : tenants_) {
      rows.push_back({TenantKey::from_canonical(k).escaped(), v.requests, v.rejections});
    }
  }
  std::sort(rows.begin(), rows.end(), [](const TenantRow &a, const TenantRow &b) {
    double ra = static_cast<double>(a.rejections) / static_cast<double>(a.requests);
    double rb = static_cast<double>(b.rejections) / static_cast<double>(b.requests);
    if (ra != rb) return ra > rb;
    if (a.rejections != b.rejections) return a.rejections > b.rejections;
    return a.tenant < b.tenant;
  });
  if (rows.size() > kTopTenants) rows.resize(kTopTenants);
  return rows;
}

namespace {

const char *breaker_name(BreakerState b) {
  switch (b) {
    case BreakerState::closed: return "closed";
    case BreakerState::open: return "open";
    case BreakerState::half_open: return "half_open";
  }
  return "closed";
}

constexpr Outcome kOutcomes[] = {Outcome::allowed, Outcome::rejected, Outcome::dark_rejected, Outcome::failed_open};

}  // namespace

// The one walk: the JSON document from its first key to its last, and with each value the Prometheus
// series it is (Series{}: the JSON's alone). Prometheus lists its families in its own order (visitor.hpp).
void Metrics::visit(const StoreStats &st, const Gauges &g, MetricsVisitor &v) const {
  visit_decisions(v);
  visit_failures(st, v);
  visit_rules(g, v);
  visit_modes(g, v);
  visit_top_tenants(v);
  visit_store(st, v);
  visit_leases(g, v);
  visit_load(g, v);
}

void Metrics::visit_decisions(MetricsVisitor &v) const {
  size_t n = route_count_.load();
  std::vector<size_t> routes;  // the named route families, and "other" once they are kMaxRoutes
  for (size_t r = 0; r < n; r++) routes.push_back(r);
  if (n >= kMaxRoutes) routes.push_back(kMaxRoutes);

  v.begin_object("decisions");  // every route family together
  for (Limiter l : kLimiters) {
    v.begin_object(limiter_name(l));
    for (Outcome o : kOutcomes) {
      uint64_t total = 0;
      for (size_t r = 0; r < n; r++) total += counter(r, l, o);
      total += counter(kMaxRoutes, l, o);
      v.number(outcome_name(o), {}, total);
    }
    v.end();
  }
  v.end();

  v.begin_object("routes");
  for (size_t r : routes) {
    const std::string &route = routes_[r]->name;
    v.begin_object(route);
    for (Limiter l : kLimiters) {
      v.begin_object(limiter_name(l));
      for (Outcome o : kOutcomes)
        v.number(outcome_name(o), {Family::decisions_total, {limiter_name(l), outcome_name(o), route}},
                 counter(r, l, o));
      v.end();
    }
    v.end();
  }
  v.end();
}

void Metrics::visit_failures(const StoreStats &st, MetricsVisitor &v) const {
  v.begin_object("sources");
  for (int i = 0; i < kSourceCount; i++) {
    auto s = static_cast<Source>(i);
    v.number(source_name(s), {Family::decisions_by_source_total, {source_name(s)}}, source_count(s));
  }
  v.end();

  v.begin_object("store_failures");
  for (Limiter l : kLimiters) {
    v.begin_object(limiter_name(l));
    for (int i = 1; i < kFailReasonCount; i++) {  // every reason but none
      auto r = static_cast<FailReason>(i);
      uint64_t count = failures_[static_cast<size_t>(l) * kFailReasonCount + static_cast<size_t>(r)].load();
      v.number(fail_reason_name(r), {Family::store_failures_total, {limiter_name(l), fail_reason_name(r)}}, count);
    }
    v.end();
  }
  v.end();
  v.number("config_errors", {Family::config_errors_total}, st.failures[static_cast<size_t>(FailReason::config)]);
}

void Metrics::visit_rules(const Gauges &g, MetricsVisitor &v) const {
  if (!g.rules.empty()) {  // a tier's limit may share its name with the policy's: one series per name
    v.begin_object("rules");
    std::vector<std::string> seen;
    for (size_t i = 0; i < g.rules.size() && i < kMaxRuleCounters; i++) {
      if (std::find(seen.begin(), seen.end(), g.rules[i]) != seen.end()) continue;
      seen.push_back(g.rules[i]);
      v.begin_object(g.rules[i]);
      for (Outcome o : {Outcome::allowed, Outcome::rejected, Outcome::dark_rejected}) {
        uint64_t total = 0;
        for (size_t j = i; j < g.rules.size() && j < kMaxRuleCounters; j++)
          if (g.rules[j] == g.rules[i]) total += rules_[j * kOutcomeCount + static_cast<size_t>(o)].load();
        v.number(outcome_name(o), {Family::rule_decisions_total, {g.rules[i], outcome_name(o)}}, total);
      }
      v.end();
    }
    v.end();
  }
  v.number("blocked", {Family::blocked_total}, blocked_.load());
}

void Metrics::visit_modes(const Gauges &g, MetricsVisitor &v) const {
  v.family(Family::mode);  // its HELP and TYPE even with no limiter configured
  v.begin_object("modes");
  for (Limiter l : kLimiters) {
    auto i = static_cast<size_t>(l);
    if (g.configured[i])
      v.state(limiter_name(l), {Family::mode, {limiter_name(l)}},
              {mode_name(Mode::enforce), mode_name(Mode::dark), mode_name(Mode::off)}, mode_name(g.modes[i]));
    else
      v.text(limiter_name(l), "unconfigured");  // not in Prometheus
  }
  v.end();
}

void Metrics::visit_top_tenants(MetricsVisitor &v) const {
  v.family(Family::tenant_rejection_ratio);  // and before any tenant is rejected
  v.begin_list("top_tenants");
  for (const TenantRow &row : top_tenants()) {
    v.begin_object("");  // an element of the list: no key
    v.text("tenant", row.tenant);
    v.number("requests", {}, row.requests);
    v.number("rejections", {}, row.rejections);
    v.number("rejection_rate", {Family::tenant_rejection_ratio, {row.tenant}},
             static_cast<double>(row.rejections) / static_cast<double>(row.requests));
    v.end();
  }
  v.end();
}

void Metrics::visit_store(const StoreStats &st, MetricsVisitor &v) const {
  v.state("breaker", {Family::breaker_state},
          {breaker_name(BreakerState::closed), breaker_name(BreakerState::open), breaker_name(BreakerState::half_open)},
          breaker_name(st.breaker));

  v.begin_object("store");
  v.number("tenants", {Family::store_tenants}, st.tenants);
  v.number("evictions", {Family::store_evictions_total}, st.evictions);
  v.number("release_errors", {Family::release_errors_total}, st.release_errors);
  v.number("repairs", {}, st.repairs);
  v.number("reconnects", {}, st.reconnects);
  v.number("noscript_reloads", {}, st.noscript_reloads);
  auto redis = [&](Family f) { return st.connections_in_use ? f : Family::none; };  // Prometheus: Redis only
  v.number("connections_in_use", {redis(Family::store_connections_in_use)}, st.connections_in_use);
  v.number("waiting", {redis(Family::store_waiting)}, st.waiting);
  v.number("waiting_cap", {redis(Family::store_waiting_cap)}, st.waiting_cap);
  v.end();
}

void Metrics::visit_leases(const Gauges &g, MetricsVisitor &v) const {
  if (g.leases) {
    using K = LeaseCounter;
    v.begin_object("leases");
    v.number("hot_tenants", {Family::hot_tenants}, g.hot_tenants);
    v.number("tokens_in_hand", {Family::lease_tokens_in_hand}, g.tokens_in_hand);
    v.number("slots_in_hand", {Family::lease_slots_in_hand}, g.slots_in_hand);
    v.number("decisions_in_process", {Family::lease_decisions_total, {"in_process"}},
             lease_count(K::decisions_in_process));
    v.number("decisions_after_lease_call", {Family::lease_decisions_total, {"after_lease_call"}},
             lease_count(K::decisions_after_lease_call));
    v.number("exact_admits", {Family::lease_exact_admits_total}, lease_count(K::exact_admits));
    v.number("lease_calls", {Family::lease_commands_total, {"lease"}}, lease_count(K::lease_calls));
    v.number("give_backs", {Family::lease_commands_total, {"give_back"}}, lease_count(K::give_backs));
    v.number("fleet_reports", {Family::lease_commands_total, {"fleet_report"}}, lease_count(K::fleet_reports));
    v.number("releases_in_process", {Family::lease_releases_in_process_total}, lease_count(K::releases_in_process));
    v.number("tokens_leased", {Family::lease_tokens_total, {"leased"}}, lease_count(K::tokens_leased));
    v.number("tokens_given_back", {Family::lease_tokens_total, {"given_back"}}, lease_count(K::tokens_given_back));
    v.number("slots_leased", {Family::lease_slots_total, {"leased"}}, lease_count(K::slots_leased));
    v.number("slots_given_back", {Family::lease_slots_total, {"given_back"}}, lease_count(K::slots_given_back));
    v.number("redis_commands_saved", {Family::redis_commands_saved}, commands_saved());
    v.end();
  }
}

void Metrics::visit_load(const Gauges &g, MetricsVisitor &v) const {
  v.number("shedding_amount", {Family::shedding_amount}, g.shedding_amount);
  v.number("utilization", {Family::utilization}, g.utilization);
  v.number("in_flight", {Family::in_flight}, g.in_flight);
  if (!g.adaptive.empty()) {
    v.begin_object("adaptive");
    for (const Gauges::Adaptive &a : g.adaptive) {
      v.begin_object(a.routes);
      v.number("limit", {Family::adaptive_limit, {a.routes}}, a.limit);
      v.number("in_flight", {Family::adaptive_in_flight, {a.routes}}, a.in_flight);
      v.end();
    }
    v.end();
  }
}

}  // namespace floodwall
