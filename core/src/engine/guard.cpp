#include "engine/guard.hpp"

#include <algorithm>
#include <chrono>
#include <thread>

#include "policy/route.hpp"
#include "stores/memory_store.hpp"
#include "util/token_bucket.hpp"

namespace floodwall {

constexpr size_t idx(Limiter l) {
  return static_cast<size_t>(l);
}

Guard::Guard(Policy policy, std::unique_ptr<Store> store, const Clock &clock, Rng &rng)
    : policy_(std::move(policy)), store_(std::move(store)), clock_(clock), rng_(rng), meter_(clock.now_us()) {
  for (Limiter l : kLimiters) local_modes_[idx(l)] = static_cast<uint8_t>(policy_.configured_mode(l));
  if (policy_.utilization) controller_ = std::make_unique<UtilizationController>(*policy_.utilization, clock_.now_us());
  if (policy_.adaptive) {
    size_t n = std::max<size_t>(1, policy_.adaptive->routes.size());
    for (size_t i = 0; i < n; i++)
      adaptive_.push_back(std::make_unique<AdaptiveLimit>(*policy_.adaptive, clock_.now_us()));
  }
  if (store_->remote() && policy_.redis.fallback == Fallback::local)
    fallback_ = std::make_unique<MemoryStore>(clock_, policy_.max_tenants);
  if (policy_.leases() && store_->supports_leases())
    hot_ = std::make_unique<HotTenants>(policy_, *store_, clock_, rng_, metrics_);
  reads_now_ = store_->takes_time() || controller_ || !adaptive_.empty();
  empty_path_family_ = policy_.family_of_path({});
}

// The leases are given back first, then the store goes (its destructor sends what is queued, and fails
// pending async admits through finish(), which needs the metrics, tickets, meter and leases still alive).
Guard::~Guard() {
  if (hot_) hot_->shutdown();
  store_.reset();
  hot_.reset();
}

void Guard::set_mode(Limiter l, Mode m) {
  local_modes_[idx(l)].store(static_cast<uint8_t>(m));
}

Mode Guard::mode(Limiter l) const {
  return policy_.configured(l) ? mode_in_force(l) : Mode::off;
}

void Guard::report_utilization(double u) {
  reported_.store(u);
}

// Samples utilization every sample_s: the application's report when there is one, else the
// time-weighted in-flight requests over the configured workers.
void Guard::tick_utilization(int64_t now_us) {
  std::lock_guard lock(util_mu_);
  if (now_us < controller_->next_sample_us()) return;
  double reported = reported_.load();
  double u = reported;
  if (std::isnan(reported)) {
    // This process's busy workers; on a store the machine's processes share, the machine's utilization.
    double busy = meter_.take_average(now_us);
    int64_t workers = policy_.utilization->workers;
    u = store_->box_utilization(busy, workers, now_us).value_or(busy / static_cast<double>(workers));
  }
  u = std::clamp(u, 0.0, 1.0);
  last_util_.store(u);
  controller_->sample(u, now_us);
}

double Guard::shedding_amount() {
  if (!controller_) return 0;
  int64_t now = clock_.now_us();
  tick_utilization(now);
  std::lock_guard lock(util_mu_);
  return controller_->amount(now);
}

namespace {
[[noreturn, gnu::noinline, gnu::cold]] void cost_above_burst(uint64_t cost, int64_t burst) {
  throw BadRequest("cost: " + std::to_string(cost) + " is above the burst of this tenant's bucket (" +
                   std::to_string(burst) + "); such a request could never be admitted");
}
[[noreturn, gnu::noinline, gnu::cold]] void cost_above_rule(uint64_t cost, const Rule &r) {
  throw BadRequest("cost: " + std::to_string(cost) + " is above " +
                   (r.quota ? "the quota \"" + r.name + "\" (" + std::to_string(r.quota_limit) + " per " +
                                  quota_period_name(r.period) + ")"
                            : "the burst of the limit \"" + r.name + "\" (" + std::to_string(r.bucket.burst) + ")") +
                   "; such a request could never be admitted");
}
}  // namespace

// The limits and quotas that apply to the request's route and method. Every one of them is in
// RateLimit-Policy; those not off (by their own mode or the request-rate limiter's) go to the store.
void Guard::prepare_rules(std::string_view route, std::string_view method, uint64_t cost, Prepared &p) {
  Mode limiter = mode_in_force(Limiter::request_rate);
  for (size_t i = 0; i < policy_.rules.size(); i++) {
    const Rule &rule = policy_.rules[i];
    if (!policy_.applies_to_tier(rule, p.tier) || !rule.applies(route, method)) continue;
    p.rules |= uint64_t{1} << i;
    if (rule.mode == Mode::off || limiter == Mode::off) continue;
    if (cost > static_cast<uint64_t>(rule.quota ? rule.quota_limit : rule.bucket.burst)) cost_above_rule(cost, rule);
    p.op.rules.push(rule_op(rule, i, rule.mode == Mode::enforce && limiter == Mode::enforce));
  }
  if (p.op.rules.n > 0 && p.op.cost_m == 0) p.op.cost_m = static_cast<int64_t>(cost) * 1'000'000;
}

void Guard::prepare(const Request &rq, Prepared &p) {
  if (rq.tenant.empty()) throw BadRequest("tenant: must not be empty");
  // The clock, once per decision, for every part of it that needs the time: the in-process store, the
  // utilization shedder and the adaptive limit (a vDSO read is a sixth of an embedded decision).
  if (reads_now_) p.op.now_us = clock_.now_us();
  p.op.tenant.assign(rq.tenant);
  uint64_t cost = rq.cost == 0 ? 1 : rq.cost;
  p.cost = cost;
  std::string_view method = rq.method.empty() ? std::string_view("GET") : rq.method;
  // The rules match the route's pattern, else the path; the metrics count a path under the policy's glob
  // it matches, so that the route families stay as few as the globs.
  // A request with neither (a caller that names no route) is counted under the family of the empty path,
  // which the policy fixes: found once, in the constructor.
  std::string route_buf;
  std::string_view route;
  if (rq.route.empty() && rq.path.empty()) {
    p.route = metrics_.route_index(empty_path_family_);
  } else {
    route = request_route(rq.route, rq.path, route_buf);
    p.route = metrics_.route_index(rq.route.empty() ? policy_.family_of_path(route) : route);
  }
  p.op.units = static_cast<int64_t>(cost);
  if (any_tier_.load(std::memory_order_relaxed)) {
    p.op.tier = tenant_tier(p.op.tenant);
    if (!policy_.tiers.empty()) p.tier = policy_.tier_index(p.op.tier);
  }

  if (policy_.request_rate) {
    p.bucket = p.tier >= 0 ? &policy_.tiers[static_cast<size_t>(p.tier)].bucket : policy_.bucket_for(p.op.tenant);
    // Such a request could never pass; failing it loudly beats a 429 whose Retry-After lies.
    if (cost > static_cast<uint64_t>(p.bucket->burst)) cost_above_burst(cost, p.bucket->burst);
    Mode m = mode_in_force(Limiter::request_rate);
    if (m != Mode::off) {
      p.op.rate = true;
      p.op.rate_enforce = m == Mode::enforce;
      p.op.rate_m = p.bucket->rate_m;
      p.op.burst_m = p.bucket->burst_m;
      p.op.cost_m = static_cast<int64_t>(cost) * 1'000'000;
    }
  }
  if (!policy_.rules.empty()) prepare_rules(route, method, cost, p);
  if (policy_.concurrency && policy_.concurrency->counts(route)) {
    Mode m = mode_in_force(Limiter::concurrency);
    if (m != Mode::off) {
      p.op.conc = true;
      p.op.conc_enforce = m == Mode::enforce;
      p.op.conc_limit = policy_.concurrency->limit;
      p.op.conc_ttl_us = static_cast<int64_t>(policy_.concurrency->ttl_s * 1e6);
    }
  }
  if (policy_.fleet && !rq.critical) {  // critical requests are never counted against the fleet cap
    Mode m = mode_in_force(Limiter::fleet);
    if (m != Mode::off) {
      p.op.fleet = true;
      p.op.fleet_enforce = m == Mode::enforce;
      p.op.fleet_cap = policy_.fleet->capacity;
      p.op.fleet_ttl_us = static_cast<int64_t>(policy_.fleet->ttl_s * 1e6);
    }
  }
  if (p.op.conc || p.op.fleet) p.op.slot = {rng_.next_u64(), rng_.next_u64()};

  if (controller_) {
    p.util_counted = true;
    int64_t now = p.op.now_us;
    tick_utilization(now);
    Mode m = mode_in_force(Limiter::utilization);
    if (m != Mode::off) {
      double amount;
      {
        std::lock_guard lock(util_mu_);
        amount = controller_->amount(now);
      }
      double drop = UtilizationController::drop_probability(amount, traffic_class_of(rq.sandbox, rq.critical, method));
      bool reject = drop > 0 && rng_.next_unit() < drop;
      metrics_.count(p.route, Limiter::utilization,
                     !reject              ? Outcome::allowed
                     : m == Mode::enforce ? Outcome::rejected
                                          : Outcome::dark_rejected);
      if (reject && m == Mode::enforce) p.shed = true;
      if (reject && m == Mode::dark) p.shed_dark = true;
    }
  }
  if (!adaptive_.empty() && !p.shed) prepare_adaptive(rq, route, method, p);
}

// The adaptive limit, last of the local checks (the request is admitted from here unless the store refuses
// it): a slot of the request's limit, measured from now to its release.
void Guard::prepare_adaptive(const Request &rq, std::string_view route, std::string_view method, Prepared &p) {
  int family = policy_.adaptive->family(route);
  if (family < 0) return;  // a route family it does not limit
  Mode m = mode_in_force(Limiter::adaptive);
  if (m == Mode::off) return;
  bool over = false;
  uint64_t slot = adaptive_[static_cast<size_t>(family)]->acquire(traffic_class_of(rq.sandbox, rq.critical, method),
                                                                  m == Mode::enforce, p.op.now_us, over);
  metrics_.count(p.route, Limiter::adaptive,
                 !over                ? Outcome::allowed
                 : m == Mode::enforce ? Outcome::rejected
                                      : Outcome::dark_rejected);
  if (slot == 0) {
    p.shed = true;
    p.shed_by = Limiter::adaptive;
    return;
  }
  p.adaptive = family;
  p.adaptive_slot = slot;
  p.adaptive_dark = over;
}

void Guard::release_adaptive(int family, uint64_t slot, bool measured) {
  if (slot != 0) adaptive_[static_cast<size_t>(family)]->release(slot, measured, clock_.now_us());
}

void Guard::drop_adaptive(Prepared &p) {
  release_adaptive(p.adaptive, p.adaptive_slot, false);
  p.adaptive_slot = 0;
}

Ticket Guard::hold(const TicketHold &h) {
  Ticket t = next_ticket_.fetch_add(1, std::memory_order_relaxed);
  auto &shard = tickets_[t % kTicketShards];
  std::lock_guard lock(shard.mu);
  shard.held.emplace(t, h);
  return t;
}

namespace {
// seconds_until, without its 64-bit division when at most a second's refill is lacking (a bucket that one
// request took from, the common case): that is one second, exactly as the division says.
int64_t whole_seconds_until(int64_t rate_m, int64_t tokens_m, int64_t want_m) {
  int64_t lack = want_m - tokens_m;
  return lack <= 0 ? 0 : lack <= rate_m ? 1 : seconds_until(rate_m, tokens_m, want_m);
}

// Copied whole into every decision: a copy of a constant is a few vector moves, where assigning the
// initializer list clears the struct with `rep stos` first.
constexpr Decision kAllowed = [] {
  Decision d;
  d.allowed = true;
  d.status = 200;
  return d;
}();
}  // namespace

// The limits' and quotas' verdicts, after the tenant's own bucket and before the concurrency limiter: the
// first enforcing rule that refused names the rejection (with its Retry-After), the first dark one is
// reported, and RateLimit shows the rule closest to exhaustion when it is closer than the tenant's bucket.
void Guard::rule_verdicts(const Prepared &p, const AdmitResult &r, Decision &d) {
  const AdmitOp &op = p.op;
  int64_t burst_m = r.rate_m > 0 ? r.burst_m : op.burst_m;
  double closest = op.rate && burst_m > 0 ? static_cast<double>(r.tokens_m) / static_cast<double>(burst_m) : 2.0;
  size_t n = std::min<size_t>(op.rules.n, r.rules.n);
  for (size_t j = 0; j < n; j++) {
    const RuleOp &ro = op.rules.at[j];
    const Rule &rule = policy_.rules[ro.index];
    bool failed = (r.rules.failed >> j) & 1;
    metrics_.rule(ro.index, !failed ? Outcome::allowed : ro.enforce ? Outcome::rejected : Outcome::dark_rejected);
    int64_t left = r.rules.left[j];
    int64_t capacity = ro.quota ? ro.quota_limit() : ro.burst_m();
    int64_t retry = ro.quota ? std::max<int64_t>(1, r.rules.reset_s[j])
                             : std::max<int64_t>(1, seconds_until(ro.rate_m(), left, op.cost_m));
    bool show = false;
    if (failed && ro.enforce && d.limiter == Limiter::none) {
      d.limiter = Limiter::request_rate;
      d.rule = ro.index;
      d.retry_after_s = retry;
      show = true;
    } else if (failed && !ro.enforce && d.dark_limiter == Limiter::none) {
      d.dark_limiter = Limiter::request_rate;
      d.dark_rule = ro.index;
    }
    double fraction = static_cast<double>(left) / static_cast<double>(capacity);
    if (!show && (d.limiter != Limiter::none || fraction >= closest)) continue;
    closest = fraction;
    d.shown_rule = ro.index;
    d.rule_limit = ro.quota ? ro.quota_limit() : rule.bucket.burst;
    d.rule_remaining = ro.quota ? left : left / 1'000'000;
    d.rule_reset_s = failed ? retry : ro.quota ? r.rules.reset_s[j] : seconds_until(ro.rate_m(), left, ro.burst_m());
    d.rule_window_end_s = ro.quota ? r.rules.window_end_s[j] : 0;
  }
}

// A request the adaptive limit admitted keeps its slot only when it is admitted: one that another limiter
// or the store refuses gives it back unmeasured.
Decision Guard::finish(const Prepared &p, const AdmitResult &store_result) {
  Decision d = decide(p, store_result);
  if (!d.allowed) release_adaptive(p.adaptive, p.adaptive_slot, false);
  return d;
}

// One Decision, built where the caller receives it (a single return of one object: no copy of it). It and
// decide_into are inlined (into finish): each call's frame costs a decision a dozen instructions or more.
[[gnu::always_inline]] inline Decision Guard::decide(const Prepared &p, const AdmitResult &store_result) {
  Decision d = kAllowed;
  if (store_result.other_tier) {  // the tenant's tier kept changing under this admit: the fallback decides
    AdmitResult undecided;
    undecided.reason = FailReason::error;
    decide_into(p, undecided, d);
  } else {
    decide_into(p, store_result, d);
  }
  return d;
}

[[gnu::always_inline]] inline void Guard::decide_into(const Prepared &p, const AdmitResult &store_result, Decision &d) {
  d.cost = p.cost;
  if (p.shed_dark) d.dark_limiter = Limiter::utilization;
  if (p.adaptive_dark && d.dark_limiter == Limiter::none) d.dark_limiter = Limiter::adaptive;
  const AdmitOp &op = p.op;
  if (p.bucket) {
    d.limit = p.bucket->burst;
    d.rate = p.bucket->rate;
  }
  if (op.conc) d.concurrency_limit = op.conc_limit;

  if (p.shed) {
    d.allowed = false;
    d.status = 503;
    d.limiter = p.shed_by;
    // The adaptive limit frees a slot as soon as any request ends: retry soon. The shedder moves each sample.
    d.retry_after_s = p.shed_by == Limiter::adaptive
                          ? 1
                          : std::max<int64_t>(1, static_cast<int64_t>(std::ceil(policy_.utilization->sample_s)));
    return;
  }
  d.rules = p.rules;
  if (!op.asks()) return decide_on(p, store_result, nullptr, d);
  if (!store_result.decided) return decide_without_store(p, store_result, d);
  Metrics::Slab &counts = metrics_.slab();  // once per decision: each look-up is a __tls_get_addr call
  Metrics::source(counts, Source::store);
  decide_on(p, store_result, &counts, d);
}

// The store could not answer in time. Never stop limiting silently: count it, and let redis.fallback
// decide. "local": the same policy on an in-process table, so a flood is still held. Out of the common
// path, with the fallback's result it needs.
void Guard::decide_without_store(const Prepared &p, const AdmitResult &store_result, Decision &d) {
  const AdmitOp &op = p.op;
  d.fail_reason = store_result.reason;
  const std::pair<bool, Limiter> asked[] = {
      {op.rate || op.rules.n > 0, Limiter::request_rate}, {op.conc, Limiter::concurrency}, {op.fleet, Limiter::fleet}};
  for (auto [on, l] : asked)
    if (on) metrics_.failed(l, store_result.reason);
  Metrics::Slab &counts = metrics_.slab();
  if (fallback_) {
    // The local table keeps no control records (a tier's limits go unchecked), and reads its own clock:
    // the store's answer may have come a deadline after the admit began.
    AdmitOp o = op;
    o.tier = {};
    o.now_us = AdmitOp::kStoreClock;
    AdmitResult local = fallback_->admit(o);
    d.degraded = true;
    Metrics::source(counts, Source::fallback);
    return decide_on(p, local, &counts, d);
  }
  if (policy_.redis.fallback == Fallback::closed) {
    // Refuse what cannot be limited: 503, with a body that says the limiter is unavailable.
    d.allowed = false;
    d.status = 503;
    d.retry_after_s = 1;
    Metrics::source(counts, Source::refused);
    return;
  }
  // "open": allowed with no limiter at all, and counted as such.
  d.failed_open = true;
  for (auto [on, l] : asked)
    if (on) Metrics::count(counts, p.route, l, Outcome::failed_open);
  Metrics::source(counts, Source::failed_open);
  decide_on(p, store_result, &counts, d);
}

// The verdicts of the store's (or the fallback's) result `r`, and the ticket of what the request holds.
// `counts`: this thread's metrics slab when the store (or the fallback) was asked; null when it was not.
// Inlined as decide_into is (a second copy in decide_without_store, out of the common path).
[[gnu::always_inline]] inline void Guard::decide_on(const Prepared &p, const AdmitResult &r, Metrics::Slab *counts,
                                                    Decision &d) {
  const AdmitOp &op = p.op;
  bool touched_store = counts != nullptr;
  if (touched_store && r.decided && r.blocked) {
    // The tenant is blocked (the admin API): 403, nothing consumed.
    d.allowed = false;
    d.status = 403;
    d.blocked = true;
    d.blocked_until_s = r.blocked_until_s;
    d.retry_after_s =
        r.blocked_until_s > 0 ? std::max<int64_t>(1, r.blocked_until_s - floor_div(clock_.wall_us(), 1'000'000)) : 0;
    metrics_.tenant_seen(op.tenant, true);
    metrics_.blocked();
    return;
  }
  // A runtime override of the tenant's bucket (its control record): the bucket the store used.
  int64_t rate_m = r.rate_m > 0 ? r.rate_m : op.rate_m, burst_m = r.rate_m > 0 ? r.burst_m : op.burst_m;
  if (r.rate_m > 0 && touched_store && r.decided) {
    d.limit = burst_m / 1'000'000;
    d.rate = static_cast<double>(rate_m) / 1e6;
  }
  if (touched_store && r.decided) {
    // In the order of the path: the first enforcing limiter that rejected names the rejection.
    auto verdict = [&](bool on, bool enforce, bool ok, Limiter l) {
      if (!on) return;  // (a limiter an in-process decision did not need is not evaluated: `on` is false)
      Metrics::count(*counts, p.route, l, ok ? Outcome::allowed : enforce ? Outcome::rejected : Outcome::dark_rejected);
      if (ok) return;
      if (enforce && d.limiter == Limiter::none) d.limiter = l;
      if (!enforce && d.dark_limiter == Limiter::none) d.dark_limiter = l;
    };
    verdict(op.rate && r.rate_evaluated, op.rate_enforce, r.rate_ok, Limiter::request_rate);
    if (op.rules.n > 0) rule_verdicts(p, r, d);
    verdict(op.conc && r.conc_evaluated, op.conc_enforce, r.conc_ok, Limiter::concurrency);
    verdict(op.fleet && r.fleet_evaluated, op.fleet_enforce, r.fleet_ok, Limiter::fleet);
    if (op.rate) {
      d.remaining = r.tokens_m / 1'000'000;
      d.reset_s = whole_seconds_until(rate_m, r.tokens_m, burst_m);
    }
    if (op.conc) d.concurrency_remaining = std::max<int64_t>(0, op.conc_limit - r.conc_count);
    if (d.limiter != Limiter::none) {
      d.allowed = false;
      d.status = d.limiter == Limiter::fleet ? 503 : 429;
      d.retry_after_s = d.rule >= 0 ? d.retry_after_s
                        : d.limiter == Limiter::request_rate
                            ? std::max<int64_t>(1, whole_seconds_until(rate_m, r.tokens_m, op.cost_m))
                            : 1;  // a slot frees when any in-flight request ends
    }
    if (op.rate || op.conc || op.rules.n > 0) metrics_.tenant_seen(op.tenant, !d.allowed);
  }
  if (!d.allowed) return;
  bool acquire = op.max_wait_ns > 0 && r.decided;
  bool conc = op.conc && r.decided && r.committed && r.conc_ok;
  bool fleet = op.fleet && r.decided && r.committed && r.fleet_ok;
  if (!(acquire || conc || fleet || p.util_counted || p.adaptive_slot)) return;  // no ticket (nor a TicketHold)
  TicketHold h;
  if (acquire) {  // its turn (the fallback's, when the fallback decided)
    d.wait_us = ceil_div(r.wait_ns, 1000);
    d.turn_us = r.store_now_us + d.wait_us;
    d.waiting = d.wait_us > 0;
    if (d.waiting && op.rate && r.committed) reservation(op, r, rate_m, burst_m, d.wait_us, h);
  }
  if (!(conc || fleet || p.util_counted || p.adaptive_slot || h.give_back_full_at_ns))
    return;  // nothing to give back: no ticket (leased ones included)
  h.tenant = op.tenant;
  h.slot = r.slot_leased ? r.leased_slot : op.slot;
  h.leased = conc && r.slot_leased;
  h.slot_lease_until_us = r.slot_lease_until_us;
  h.conc = conc && !h.leased;
  h.fleet_in_process = fleet && r.fleet_in_process;
  h.fleet = fleet && !h.fleet_in_process;
  h.in_flight = p.util_counted;
  h.local = d.degraded;
  h.adaptive = p.adaptive;
  h.adaptive_slot = p.adaptive_slot;
  // In flight from the decision: its instant when an in-process store made it, else now (a network store's
  // answer comes later than the admit began).
  if (h.in_flight) meter_.change(+1, store_->takes_time() ? op.now_us : clock_.now_us());
  d.ticket = hold(h);
}

// ------------------------------------------------------------------------------------------ tiers

// The tier a tenant's control record named when the store last said (none when it never did).
std::string_view Guard::tenant_tier(const TenantKey &t) {
  std::lock_guard lock(tiers_mu_);
  auto it = tenant_tiers_.find(std::string(t.view()));
  return it == tenant_tiers_.end() ? std::string_view() : it->second;
}

// The store said the tenant's tier is `tier`: the next admits assume it. Names are interned (ops point
// at them); the map of tenants is bounded, and starts afresh when full (the store teaches it again).
void Guard::learn_tier(const TenantKey &t, std::string_view tier) {
  std::lock_guard lock(tiers_mu_);
  if (tier.empty()) {
    tenant_tiers_.erase(std::string(t.view()));
    return;
  }
  auto name = tier_names_.find(tier);
  if (name == tier_names_.end()) {
    if (tier_names_.size() >= 1024) return;  // a store naming ever more tiers: decided with none
    name = tier_names_.emplace(tier).first;
  }
  if (tenant_tiers_.size() >= kMaxTenantTiers) tenant_tiers_.clear();
  tenant_tiers_[std::string(t.view())] = *name;
  any_tier_.store(true, std::memory_order_relaxed);
}

Decision Guard::admit(const Request &rq) {
  for (int attempt = 0;; attempt++) {
    Prepared p;
    prepare(rq, p);
    bool asks = !p.shed && p.op.asks();
    // A request that a limit or quota applies to is decided by the store, exactly: leases hold the
    // tenant's bucket only (a lease per rule is not built).
    HotTenants::EntryRef e;
    if (asks && hot_ && p.op.rules.n == 0) {
      e = hot_->track(p.op, clock_.now_us());
      AdmitResult leased;
      if (e && hot_->admit(*e, p.op, leased) == HotTenants::Handled::decided) return finish(p, leased);
    }
    int64_t sent = e ? clock_.now_us() : 0;  // a hot tenant's exact admit: when it was sent (learn)
    // Built in place (no copy of a result this size); the in-process stores decide at p.op.now_us.
    AdmitResult r = asks ? store_->admit(p.op) : AdmitResult{};
    if (r.other_tier && attempt < kTierAttempts) {
      learn_tier(p.op.tenant, r.tier);  // nothing was consumed: decide again in that tier
      drop_adaptive(p);
      continue;
    }
    if (e && !r.other_tier && !r.blocked) hot_->learn(*e, p.op, r, sent);
    return finish(p, r);
  }
}

namespace {
// Whether the admit this thread is submitting has completed already. A callback may submit another
// admit, so each submission keeps the outer one's state and puts it back.
thread_local bool tl_submitting = false;
thread_local bool tl_completed_inline = false;
}  // namespace

class Guard::Pending final : public AdmitCompletion, public LeaseWaiter {
 public:
  Pending(Guard &g, AdmitDone done) : g_(g), done_(std::move(done)) {}
  Prepared p;
  HotTenants::EntryRef hot;  // the tenant is hot here
  HotTenants::AsyncState hot_state;
  int64_t sent_us = 0;  // an exact admit of a hot tenant: when it was sent
  void wake() override { g_.resume_hot(this); }
  // The request again, when the store may answer with another tier (the policy has tiers): its strings
  // are the caller's only until admit_async returns. The tenant as the caller named it, not its canonical
  // key: an id over 64 bytes is kept as its hash, which would be hashed again into another tenant.
  std::string tenant, route, path, method;
  Request rq;
  int attempts = 0;
  double max_wait_s = -1;  // an acquire's (Guard::reserve_async); -1: an admit
  void complete(AdmitResult &&r) override {
    Decision d;
    std::exception_ptr error;
    try {
      if (r.other_tier && attempts < kTierAttempts) {
        // Nothing was consumed: decide again in the tenant's tier (exactly, not from a lease).
        attempts++;
        g_.learn_tier(p.op.tenant, r.tier);
        if (g_.policy_.tiers.empty()) {
          p.op.tier = g_.tenant_tier(p.op.tenant);
        } else {
          g_.drop_adaptive(p);
          Prepared again;
          g_.prepare(rq, again);
          p = again;
          if (max_wait_s >= 0) p.op.max_wait_ns = g_.wait_cap_ns(p.op, max_wait_s);
        }
        hot = nullptr;
        g_.store_->admit_async(p.op, this);
        return;
      }
      if (hot && !r.other_tier && !r.blocked) g_.hot_->learn(*hot, p.op, r, sent_us);
      d = g_.finish(p, r);
    } catch (...) {
      error = std::current_exception();
      d = Decision{};
    }
    if (tl_submitting) tl_completed_inline = true;  // before done: it may submit admits of its own
    AdmitDone done = std::move(done_);
    delete this;
    done(d, std::move(error));
  }

 private:
  Guard &g_;
  AdmitDone done_;
};

void Guard::resume_hot(Pending *pending) {
  AdmitResult r;
  switch (hot_->admit_async(*pending->hot, pending->p.op, r, *pending, pending->hot_state)) {
    case HotTenants::Handled::decided: pending->complete(std::move(r)); return;
    case HotTenants::Handled::waiting: return;  // woken (resume_hot again) when the lease call completes
    case HotTenants::Handled::exact:
      pending->sent_us = clock_.now_us();
      store_->admit_async(pending->p.op, pending);
      return;
  }
}

bool Guard::admit_async(const Request &rq, AdmitDone done) {
  return submit_async(rq, std::move(done), -1);
}

bool Guard::submit_async(const Request &rq, AdmitDone done, double max_wait_s) {
  auto pending = std::make_unique<Pending>(*this, std::move(done));
  prepare(rq, pending->p);
  pending->max_wait_s = max_wait_s;
  if (max_wait_s >= 0) pending->p.op.max_wait_ns = wait_cap_ns(pending->p.op, max_wait_s);
  if (!policy_.tiers.empty()) {
    pending->tenant.assign(rq.tenant);
    pending->route.assign(rq.route);
    pending->path.assign(rq.path);
    pending->method.assign(rq.method);
    pending->rq = rq;
    pending->rq.tenant = pending->tenant;
    pending->rq.route = pending->route;
    pending->rq.path = pending->path;
    pending->rq.method = pending->method;
  }
  if (pending->p.shed || !pending->p.op.asks()) {
    pending.release()->complete(AdmitResult{});
    return true;
  }
  // An acquire is decided by the store, exactly: a hot tenant's lease never holds a reservation.
  if (hot_ && pending->p.op.rules.n == 0 && max_wait_s < 0) pending->hot = hot_->track(pending->p.op, clock_.now_us());
  bool outer_submitting = tl_submitting, outer_completed = tl_completed_inline;
  tl_submitting = true;
  tl_completed_inline = false;
  Pending *raw = pending.release();
  if (raw->hot)
    resume_hot(raw);  // raw may be gone once this returns
  else
    store_->admit_async(raw->p.op, raw);
  bool completed = tl_completed_inline;
  tl_submitting = outer_submitting;
  tl_completed_inline = outer_completed;
  return completed;
}

void Guard::release(Ticket t) {
  if (t == 0) return;
  auto &shard = tickets_[t % kTicketShards];
  TicketHold h;
  {
    std::lock_guard lock(shard.mu);
    auto it = shard.held.find(t);
    if (it == shard.held.end()) return;  // released already: idempotent
    h = it->second;
    shard.held.erase(it);
  }
  if (h.in_flight) meter_.change(-1, clock_.now_us());
  release_adaptive(h.adaptive, h.adaptive_slot, true);
  if (h.leased) hot_->release_slot(h.tenant, h.slot, h.slot_lease_until_us);
  if (h.fleet_in_process) hot_->release_fleet_share();
  // A reservation released before its turn: its caller gave up and never went, so its tokens go back.
  bool give_back = h.give_back_full_at_ns > 0 && clock_.now_us() < h.turn_local_us;
  if (h.conc || h.fleet || give_back) {
    ReleaseOp op;
    op.tenant = h.tenant;
    op.slot = h.slot;
    op.conc = h.conc;
    op.fleet = h.fleet;
    if (give_back) {
      op.give_back_full_at_ns = h.give_back_full_at_ns;
      op.give_back_cost_ns = h.give_back_cost_ns;
    }
    (h.local ? *fallback_ : *store_).release(op);
  }
}

Gauges Guard::gauges() {
  Gauges g;
  g.shedding_amount = shedding_amount();
  g.utilization = last_util_.load();
  g.in_flight = meter_.in_flight();
  for (Limiter l : kLimiters) {
    g.configured[idx(l)] = policy_.configured(l);
    g.modes[idx(l)] = mode(l);
  }
  for (const Rule &r : policy_.rules) g.rules.push_back(r.name);
  for (size_t i = 0; i < adaptive_.size(); i++)
    g.adaptive.push_back({policy_.adaptive->routes.empty() ? "*" : policy_.adaptive->routes[i], adaptive_[i]->limit(),
                          adaptive_[i]->in_flight()});
  if (hot_) {
    HotTenants::LeaseTotals totals = hot_->lease_totals();
    g.leases = true;
    g.hot_tenants = totals.hot_tenants;
    g.tokens_in_hand = totals.tokens;
    g.slots_in_hand = totals.slots;
  }
  return g;
}

std::string Guard::metrics_json() {
  return metrics_.json(store_->stats(), gauges());
}
std::string Guard::metrics_prometheus() {
  return metrics_.prometheus(store_->stats(), gauges());
}

}  // namespace floodwall
