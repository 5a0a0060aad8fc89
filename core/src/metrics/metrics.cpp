#include "metrics/metrics.hpp"

#include <algorithm>

#include "http/formatter.hpp"

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
      rows.push_back({TenantKey::from_canonical(k).printable(), v.requests, v.rejections});
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

// Prometheus label values: backslash, double quote and newline escaped; other control bytes too.
std::string label(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else if (c < 0x20 || c == 0x7f)
      out += "?";
    else
      out.push_back(static_cast<char>(c));
  }
  return out;
}

constexpr Limiter kLimiters[] = {Limiter::request_rate, Limiter::concurrency, Limiter::fleet, Limiter::utilization};
constexpr Outcome kOutcomes[] = {Outcome::allowed, Outcome::rejected, Outcome::dark_rejected, Outcome::failed_open};

}  // namespace

std::string Metrics::json(const StoreStats &st, const Gauges &g) const {
  std::string out = "{\"decisions\":{";
  size_t n = route_count_.load();
  bool first_l = true;
  for (Limiter l : kLimiters) {
    if (!first_l) out += ',';
    first_l = false;
    append_json_string(out, limiter_name(l));
    out += ":{";
    bool first_o = true;
    for (Outcome o : kOutcomes) {
      uint64_t total = 0;
      for (size_t r = 0; r < n; r++) total += counter(r, l, o);
      total += counter(kMaxRoutes, l, o);
      if (!first_o) out += ',';
      first_o = false;
      append_json_string(out, outcome_name(o));
      out += ':' + std::to_string(total);
    }
    out += '}';
  }
  out += "},\"routes\":{";
  bool first_r = true;
  auto route_json = [&](size_t r) {
    if (!first_r) out += ',';
    first_r = false;
    append_json_string(out, routes_[r]->name);
    out += ":{";
    bool fl = true;
    for (Limiter l : kLimiters) {
      if (!fl) out += ',';
      fl = false;
      append_json_string(out, limiter_name(l));
      out += ":{";
      bool fo = true;
      for (Outcome o : kOutcomes) {
        if (!fo) out += ',';
        fo = false;
        append_json_string(out, outcome_name(o));
        out += ':' + std::to_string(counter(r, l, o));
      }
      out += '}';
    }
    out += '}';
  };
  for (size_t r = 0; r < n; r++) route_json(r);
  if (n >= kMaxRoutes) route_json(kMaxRoutes);
  out += "},\"sources\":{";
  for (int i = 0; i < kSourceCount; i++) {
    if (i) out += ',';
    append_json_string(out, source_name(static_cast<Source>(i)));
    out += ':' + std::to_string(source_count(static_cast<Source>(i)));
  }
  out += "},\"store_failures\":{";
  first_l = true;
  for (Limiter l : kLimiters) {
    if (!first_l) out += ',';
    first_l = false;
    append_json_string(out, limiter_name(l));
    out += ":{";
    for (int r = 1; r < kFailReasonCount; r++) {
      if (r > 1) out += ',';
      append_json_string(out, fail_reason_name(static_cast<FailReason>(r)));
      out += ':' + std::to_string(failures_[static_cast<size_t>(l) * kFailReasonCount + static_cast<size_t>(r)].load());
    }
    out += '}';
  }
  out += "},\"config_errors\":" + std::to_string(st.failures[static_cast<size_t>(FailReason::config)]);
  out += ",\"modes\":{";
  first_l = true;
  for (Limiter l : kLimiters) {
    if (!first_l) out += ',';
    first_l = false;
    append_json_string(out, limiter_name(l));
    out += ':';
    append_json_string(
        out, g.configured[static_cast<size_t>(l)] ? mode_name(g.modes[static_cast<size_t>(l)]) : "unconfigured");
  }
  out += "},\"top_tenants\":[";
  bool first_t = true;
  for (const auto &row : top_tenants()) {
    if (!first_t) out += ',';
    first_t = false;
    out += "{\"tenant\":";
    append_json_string(out, row.tenant);
    out += ",\"requests\":" + std::to_string(row.requests) + ",\"rejections\":" + std::to_string(row.rejections) +
           ",\"rejection_rate\":" +
           format_number(static_cast<double>(row.rejections) / static_cast<double>(row.requests)) + "}";
  }
  out += "],\"breaker\":";
  append_json_string(out, breaker_name(st.breaker));
  out += ",\"store\":{\"tenants\":" + std::to_string(st.tenants) + ",\"evictions\":" + std::to_string(st.evictions) +
         ",\"release_errors\":" + std::to_string(st.release_errors) + ",\"repairs\":" + std::to_string(st.repairs) +
         ",\"reconnects\":" + std::to_string(st.reconnects) +
         ",\"noscript_reloads\":" + std::to_string(st.noscript_reloads) +
         ",\"connections_in_use\":" + std::to_string(st.connections_in_use) +
         ",\"waiting\":" + std::to_string(st.waiting) + ",\"waiting_cap\":" + std::to_string(st.waiting_cap) + "}";
  if (g.leases) {
    auto n = [&](LeaseCounter k) { return std::to_string(lease_count(k)); };
    out += ",\"leases\":{\"hot_tenants\":" + std::to_string(g.hot_tenants) +
           ",\"tokens_in_hand\":" + std::to_string(g.tokens_in_hand) +
           ",\"slots_in_hand\":" + std::to_string(g.slots_in_hand) +
           ",\"decisions_in_process\":" + n(LeaseCounter::decisions_in_process) +
           ",\"decisions_after_lease_call\":" + n(LeaseCounter::decisions_after_lease_call) +
           ",\"exact_admits\":" + n(LeaseCounter::exact_admits) + ",\"lease_calls\":" + n(LeaseCounter::lease_calls) +
           ",\"give_backs\":" + n(LeaseCounter::give_backs) + ",\"fleet_reports\":" + n(LeaseCounter::fleet_reports) +
           ",\"releases_in_process\":" + n(LeaseCounter::releases_in_process) +
           ",\"tokens_leased\":" + n(LeaseCounter::tokens_leased) +
           ",\"tokens_given_back\":" + n(LeaseCounter::tokens_given_back) +
           ",\"slots_leased\":" + n(LeaseCounter::slots_leased) +
           ",\"slots_given_back\":" + n(LeaseCounter::slots_given_back) +
           ",\"redis_commands_saved\":" + std::to_string(commands_saved()) + "}";
  }
  out += ",\"shedding_amount\":" + format_number(g.shedding_amount);
  out += ",\"utilization\":" + format_number(g.utilization);
  out += ",\"in_flight\":" + std::to_string(g.in_flight) + "}";
  return out;
}

std::string Metrics::prometheus(const StoreStats &st, const Gauges &g) const {
  std::string out;
  out += "# HELP floodwall_decisions_total Limiter verdicts by limiter, outcome and route family.\n";
  out += "# TYPE floodwall_decisions_total counter\n";
  size_t n = route_count_.load();
  auto rows = [&](size_t r) {
    for (Limiter l : kLimiters)
      for (Outcome o : kOutcomes)
        out += std::string("floodwall_decisions_total{limiter=\"") + limiter_name(l) + "\",outcome=\"" +
               outcome_name(o) + "\",route=\"" + label(routes_[r]->name) + "\"} " + std::to_string(counter(r, l, o)) +
               "\n";
  };
  for (size_t r = 0; r < n; r++) rows(r);
  if (n >= kMaxRoutes) rows(kMaxRoutes);
  out +=
      "# HELP floodwall_decisions_by_source_total Who decided the requests that reached the store: the "
      "store, the local fallback, nobody (failed open) or nobody and refused (fallback closed).\n";
  out += "# TYPE floodwall_decisions_by_source_total counter\n";
  for (int i = 0; i < kSourceCount; i++)
    out += std::string("floodwall_decisions_by_source_total{source=\"") + source_name(static_cast<Source>(i)) + "\"} " +
           std::to_string(source_count(static_cast<Source>(i))) + "\n";
  out +=
      "# HELP floodwall_store_failures_total Decisions the store could not make in time, by limiter and "
      "reason (redis.fallback decided them).\n";
  out += "# TYPE floodwall_store_failures_total counter\n";
  for (Limiter l : kLimiters)
    for (int r = 1; r < kFailReasonCount; r++)
      out += std::string("floodwall_store_failures_total{limiter=\"") + limiter_name(l) + "\",reason=\"" +
             fail_reason_name(static_cast<FailReason>(r)) + "\"} " +
             std::to_string(failures_[static_cast<size_t>(l) * kFailReasonCount + static_cast<size_t>(r)].load()) +
             "\n";
  out +=
      "# HELP floodwall_config_errors_total Store operations refused as misconfigured (wrong key type, CROSSSLOT).\n";
  out += "# TYPE floodwall_config_errors_total counter\n";
  out += "floodwall_config_errors_total " + std::to_string(st.failures[static_cast<size_t>(FailReason::config)]) + "\n";
  out += "# HELP floodwall_breaker_state The store circuit breaker (1 for the state in force).\n";
  out += "# TYPE floodwall_breaker_state gauge\n";
  for (BreakerState b : {BreakerState::closed, BreakerState::open, BreakerState::half_open})
    out += std::string("floodwall_breaker_state{state=\"") + breaker_name(b) + "\"} " + (st.breaker == b ? "1" : "0") +
           "\n";
  out += "# HELP floodwall_mode The mode in force per limiter (1 for the mode in force).\n";
  out += "# TYPE floodwall_mode gauge\n";
  for (Limiter l : kLimiters) {
    if (!g.configured[static_cast<size_t>(l)]) continue;
    for (Mode m : {Mode::enforce, Mode::dark, Mode::off})
      out += std::string("floodwall_mode{limiter=\"") + limiter_name(l) + "\",mode=\"" + mode_name(m) + "\"} " +
             (g.modes[static_cast<size_t>(l)] == m ? "1" : "0") + "\n";
  }
  out += "# HELP floodwall_shedding_amount The utilization shedder's shedding amount.\n";
  out += "# TYPE floodwall_shedding_amount gauge\n";
  out += "floodwall_shedding_amount " + format_number(g.shedding_amount) + "\n";
  out += "# HELP floodwall_utilization The last sampled worker utilization.\n";
  out += "# TYPE floodwall_utilization gauge\n";
  out += "floodwall_utilization " + format_number(g.utilization) + "\n";
  out += "# HELP floodwall_in_flight Requests admitted and not yet released.\n";
  out += "# TYPE floodwall_in_flight gauge\n";
  out += "floodwall_in_flight " + std::to_string(g.in_flight) + "\n";
  out += "# HELP floodwall_store_evictions_total Tenants evicted from the memory store beyond max_tenants.\n";
  out += "# TYPE floodwall_store_evictions_total counter\n";
  out += "floodwall_store_evictions_total " + std::to_string(st.evictions) + "\n";
  out += "# HELP floodwall_store_tenants Tenants held by the memory store.\n";
  out += "# TYPE floodwall_store_tenants gauge\n";
  out += "floodwall_store_tenants " + std::to_string(st.tenants) + "\n";
  if (st.connections_in_use) {  // a Redis store
    out += "# HELP floodwall_store_connections_in_use Redis connections the store spreads calls over now.\n";
    out += "# TYPE floodwall_store_connections_in_use gauge\n";
    out += "floodwall_store_connections_in_use " + std::to_string(st.connections_in_use) + "\n";
    out += "# HELP floodwall_store_waiting Admits waiting on a Redis reply now.\n";
    out += "# TYPE floodwall_store_waiting gauge\n";
    out += "floodwall_store_waiting " + std::to_string(st.waiting) + "\n";
    out +=
        "# HELP floodwall_store_waiting_cap Admits beyond this many are decided at once by the fallback "
        "(0: no cap, Redis answers well within the deadline).\n";
    out += "# TYPE floodwall_store_waiting_cap gauge\n";
    out += "floodwall_store_waiting_cap " + std::to_string(st.waiting_cap) + "\n";
  }
  if (g.leases) {
    out +=
        "# HELP floodwall_lease_decisions_total Hot tenants' decisions made from a lease or what Redis last said "
        "(store decisions): in process (no round trip of their own) or after a lease call they made.\n";
    out += "# TYPE floodwall_lease_decisions_total counter\n";
    out += "floodwall_lease_decisions_total{how=\"in_process\"} " +
           std::to_string(lease_count(LeaseCounter::decisions_in_process)) + "\n";
    out += "floodwall_lease_decisions_total{how=\"after_lease_call\"} " +
           std::to_string(lease_count(LeaseCounter::decisions_after_lease_call)) + "\n";
    out += "# HELP floodwall_lease_exact_admits_total Hot tenants' admits that took one exact round trip.\n";
    out += "# TYPE floodwall_lease_exact_admits_total counter\n";
    out += "floodwall_lease_exact_admits_total " + std::to_string(lease_count(LeaseCounter::exact_admits)) + "\n";
    out +=
        "# HELP floodwall_lease_commands_total Redis commands the leases made: lease calls, give-backs, fleet "
        "reports.\n";
    out += "# TYPE floodwall_lease_commands_total counter\n";
    out += "floodwall_lease_commands_total{call=\"lease\"} " + std::to_string(lease_count(LeaseCounter::lease_calls)) +
           "\n";
    out += "floodwall_lease_commands_total{call=\"give_back\"} " +
           std::to_string(lease_count(LeaseCounter::give_backs)) + "\n";
    out += "floodwall_lease_commands_total{call=\"fleet_report\"} " +
           std::to_string(lease_count(LeaseCounter::fleet_reports)) + "\n";
    out +=
        "# HELP floodwall_lease_releases_in_process_total Leased slots given back to their lease (no release call).\n";
    out += "# TYPE floodwall_lease_releases_in_process_total counter\n";
    out += "floodwall_lease_releases_in_process_total " +
           std::to_string(lease_count(LeaseCounter::releases_in_process)) + "\n";
    out += "# HELP floodwall_lease_tokens_total Tokens leased from Redis and given back to it.\n";
    out += "# TYPE floodwall_lease_tokens_total counter\n";
    out += "floodwall_lease_tokens_total{op=\"leased\"} " + std::to_string(lease_count(LeaseCounter::tokens_leased)) +
           "\n";
    out += "floodwall_lease_tokens_total{op=\"given_back\"} " +
           std::to_string(lease_count(LeaseCounter::tokens_given_back)) + "\n";
    out += "# HELP floodwall_lease_slots_total Concurrency slots leased from Redis and given back to it.\n";
    out += "# TYPE floodwall_lease_slots_total counter\n";
    out +=
        "floodwall_lease_slots_total{op=\"leased\"} " + std::to_string(lease_count(LeaseCounter::slots_leased)) + "\n";
    out += "floodwall_lease_slots_total{op=\"given_back\"} " +
           std::to_string(lease_count(LeaseCounter::slots_given_back)) + "\n";
    out +=
        "# HELP floodwall_redis_commands_saved Decisions and releases made in process, less the lease calls, "
        "give-backs and reports made instead.\n";
    out += "# TYPE floodwall_redis_commands_saved gauge\n";
    out += "floodwall_redis_commands_saved " + std::to_string(commands_saved()) + "\n";
    out += "# HELP floodwall_hot_tenants Tenants this process decides in process now.\n";
    out += "# TYPE floodwall_hot_tenants gauge\n";
    out += "floodwall_hot_tenants " + std::to_string(g.hot_tenants) + "\n";
    out += "# HELP floodwall_lease_tokens_in_hand Leased tokens this process holds now (debited in Redis).\n";
    out += "# TYPE floodwall_lease_tokens_in_hand gauge\n";
    out += "floodwall_lease_tokens_in_hand " + std::to_string(g.tokens_in_hand) + "\n";
    out += "# HELP floodwall_lease_slots_in_hand Leased slots this process holds now, in use or idle.\n";
    out += "# TYPE floodwall_lease_slots_in_hand gauge\n";
    out += "floodwall_lease_slots_in_hand " + std::to_string(g.slots_in_hand) + "\n";
  }
  out += "# HELP floodwall_release_errors_total Releases the store could not apply (the slot heals after ttl_s).\n";
  out += "# TYPE floodwall_release_errors_total counter\n";
  out += "floodwall_release_errors_total " + std::to_string(st.release_errors) + "\n";
  out += "# HELP floodwall_tenant_rejection_ratio Rejected share of the requests of the most rejected tenants.\n";
  out += "# TYPE floodwall_tenant_rejection_ratio gauge\n";
  for (const auto &row : top_tenants())
    out += "floodwall_tenant_rejection_ratio{tenant=\"" + label(row.tenant) + "\"} " +
           format_number(static_cast<double>(row.rejections) / static_cast<double>(row.requests)) + "\n";
  return out;
}

}  // namespace floodwall
