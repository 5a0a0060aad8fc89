// redis+cluster://: routing by slot, redirections, the map, and the fleet decided in process (cluster_store.hpp).
#include "stores/redis/cluster_store.hpp"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "stores/redis/redis_store_internal.hpp"
#include "stores/redis/resp.hpp"
#include "util/clock.hpp"
#include "util/errors.hpp"

namespace floodwall {

// This client's fleet report: what it answers is the others' count.
class ClusterStore::Report final : public FleetReportCompletion {
 public:
  explicit Report(ClusterStore &owner) : owner_(owner) {}
  void complete(FleetReportResult &&r) override {
    if (r.decided) {
      // What this client may hold until the next report: its count as reported plus its part of the room
      // left, shared with the others that report, so that clients acting on one view do not all take the
      // whole room. The part is rounded down; a client that holds nothing and whose part is nothing (more
      // clients than room) gets one slot with the probability room / clients, so that the room is still
      // used, by as many clients as it has slots on average.
      int64_t others = r.others + r.set_live;
      int64_t room = std::max<int64_t>(0, owner_.fleet_cap_ - others - sent);
      int64_t clients = r.reporting + 1, part = room / clients;
      if (part == 0 && sent == 0 &&
          static_cast<int64_t>(SystemRng().next_u64() % static_cast<uint64_t>(clients)) < room)
        part = 1;
      owner_.fleet_allowance_.store(sent + part, std::memory_order_relaxed);
      owner_.fleet_others_.store(others, std::memory_order_relaxed);
      owner_.fleet_view_at_.store(now_us(), std::memory_order_relaxed);
    }
    in_flight.store(false, std::memory_order_release);
  }
  std::atomic<bool> in_flight{false};
  int64_t sent = 0;  // the count this report told

 private:
  ClusterStore &owner_;
};

// An async admit with a fleet share taken or refused: the tenant's part went to its master; the fleet's
// verdict is put back into the result when it comes.
class ClusterStore::FleetAdmit final : public AdmitCompletion {
 public:
  FleetAdmit(ClusterStore &owner, const AdmitOp &op, Share share, AdmitCompletion *done)
      : owner_(owner), op_(op), share_(share), done_(done) {}
  void complete(AdmitResult &&r) override {
    owner_.with_fleet(op_, share_, r);
    AdmitCompletion *done = done_;
    delete this;
    done->complete(std::move(r));
  }

 private:
  ClusterStore &owner_;
  AdmitOp op_;
  Share share_;
  AdmitCompletion *done_;
};

// An admit that Redis refused with TRYAGAIN: its keys (the tenant's bucket, its concurrency set, its rules
// and its control record, usually absent) are on two sides of a migration of their slot, or some are
// missing on the side asked, possibly for as long as the migration lasts. Decided as calls of one key each
// where that matters, each served through ASK: the control record first (a block or another tier decides
// there; an override is carried into what follows), then the rest without it: the concurrency slot and
// then the bucket (with the rules, which share it) when both are asked, the slot given back if the bucket
// refuses. Never more is admitted than by the one script: a slot is taken before the tokens, and tokens
// only with a slot. What the one script did better: another request of the tenant may find the set full
// for the one round trip a slot was held and then given back, and a change of the control record between
// the first call and the others applies from the next request.
class ClusterStore::Split final : public AdmitCompletion {
 public:
  Split(ClusterStore &owner, const AdmitOp &op, AdmitCompletion *done) : owner_(owner), op_(op), done_(done) {}
  void start() {
    AdmitOp ctl = op_;
    ctl.rate = ctl.conc = ctl.fleet = false;
    ctl.rules = RuleOps{};
    ctl.max_wait_ns = 0;  // an acquire's turn is the bucket's call's (its slot, taken first, counts from now)
    ctl.ctl_only = true;
    owner_.admit_async(ctl, this);
  }
  void complete(AdmitResult &&r) override {
    switch (stage_) {
      case Stage::control:
        if (!r.decided || r.blocked || r.other_tier) return finish(std::move(r));
        if (r.rate_m > 0) {
          rate_m_ = op_.rate_m = r.rate_m;
          burst_m_ = op_.burst_m = r.burst_m;
        }
        op_.no_ctl = true;
        if (op_.rate && op_.conc) {
          stage_ = Stage::slot;
          AdmitOp conc = op_;
          conc.rate = false;
          conc.rules = RuleOps{};  // the limits and quotas go with the bucket
          owner_.admit_async(conc, this);
        } else {
          stage_ = Stage::rest;
          owner_.admit_async(op_, this);
        }
        return;
      case Stage::slot: {
        slot_ = r;
        if (!r.decided || !r.committed) {
          // Undecided (the fallback decides), or the set refused: the bucket was not asked.
          r.rate_evaluated = false;
          return finish(std::move(r));
        }
        stage_ = Stage::bucket;
        AdmitOp rate = op_;
        rate.conc = false;
        owner_.admit_async(rate, this);
        return;
      }
      case Stage::bucket: {
        bool slot_taken = slot_.conc_ok;  // the slot call committed
        if (!r.decided) {
          if (slot_taken) give_back();
          return finish(std::move(r));
        }
        r.conc_ok = slot_.conc_ok;
        r.conc_count = slot_.conc_count;
        r.conc_evaluated = true;
        r.committed = commits(op_, r.rate_ok, r.conc_ok, true, r.rules.failed);
        if (slot_taken && !r.committed) {
          give_back();
          r.conc_count--;
        }
        return finish(std::move(r));
      }
      case Stage::rest: return finish(std::move(r));
    }
  }

 private:
  enum class Stage : uint8_t { control, slot, bucket, rest };
  void give_back() {
    ReleaseOp back;
    back.tenant = op_.tenant;
    back.slot = op_.slot;
    back.conc = true;
    owner_.release(back);
  }
  void finish(AdmitResult &&r) {
    if (r.decided && !r.blocked && !r.other_tier && rate_m_ > 0) {
      r.rate_m = rate_m_;
      r.burst_m = burst_m_;
    }
    AdmitCompletion *done = done_;
    delete this;
    done->complete(std::move(r));
  }
  ClusterStore &owner_;
  AdmitOp op_;
  AdmitCompletion *done_;
  AdmitResult slot_;
  Stage stage_ = Stage::control;
  int64_t rate_m_ = 0, burst_m_ = 0;  // an override the control record carried
};

int64_t ClusterStore::now_us() {
  using namespace std::chrono;
  return duration_cast<microseconds>(steady_clock::now().time_since_epoch()).count();
}

ClusterStore::ClusterStore(const Policy &p, RedisUrl url)
    : policy_(p),
      url_(std::move(url)),
      generation_(fork_generation()),
      client_id_([] {
        SystemRng rng;
        return random_id(rng);
      }()),
      fleet_(p.fleet.has_value()),
      fleet_cap_(p.fleet ? p.fleet->capacity : 0),
      report_(std::make_unique<Report>(*this)) {
  if (url_.tls) tls_ = std::make_unique<TlsContext>(policy_.redis.tls, url_.host());
  for (auto &o : owner_) o.store(nullptr, std::memory_order_relaxed);
  // The first map, and a connection to each master, within the connect time-out: the first requests of a
  // fresh process are decided by Redis. Nothing answering is no error: the fallback decides meanwhile.
  refresh();
  int64_t wait_until = now_us() + policy_.redis.connect_timeout_ms * 1000;
  if (fleet_ && map_known_.load()) {
    report_fleet();
    while (report_->in_flight.load(std::memory_order_acquire) && now_us() < wait_until)
      std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  thread_ = std::make_unique<std::thread>([this] { run(); });
}

ClusterStore::~ClusterStore() {
  if (in_forked_child()) {
    // The maintenance thread and the nodes' I/O threads exist only in the parent.
    abandon_after_fork();
    return;
  }
  {
    std::lock_guard lock(run_mu_);
    stop_ = true;
  }
  run_cv_.notify_all();
  if (thread_ && thread_->joinable()) thread_->join();
  // This client's report counts no more (it would until it expired): a report of nothing, once the one in
  // flight (if any) is answered.
  if (fleet_ && map_known_.load()) {
    auto wait_report = [this] {
      int64_t until = now_us() + policy_.redis.deadline_ms * 1000;
      while (report_->in_flight.load() && now_us() < until) std::this_thread::sleep_for(std::chrono::microseconds(200));
    };
    wait_report();
    if (!report_->in_flight.load()) {
      FleetReportOp op;
      op.client = client_id_;
      op.expires_us = 0;  // withdrawn
      op.fleet_ttl_us = static_cast<int64_t>(policy_.fleet->ttl_s * 1e6);
      report_->in_flight.store(true);
      fleet_report_async(op, report_.get());
      wait_report();
    }
  }
  std::vector<std::unique_ptr<Node>> nodes;
  {
    std::unique_lock lock(nodes_mu_);
    closing_ = true;
    nodes.swap(nodes_);
  }
  {
    std::lock_guard lock(handoffs_mu_);
    for (Handoff &h : handoffs_) RedisStore::drop(h.call, FailReason::connection);
    handoffs_.clear();
  }
  nodes.clear();  // each store sends what is queued (releases above all) and joins its I/O thread
}

void ClusterStore::abandon_after_fork() {
  // Touch no lock: a parent's thread may have held one at the fork. The nodes' stores close what they
  // inherited; the thread object is leaked (never joined, never detached: its id may be a child's thread's).
  for (auto &n : nodes_) n->store->abandon_after_fork();
  (void)thread_.release();
}

// ------------------------------------------------------------------------------------ routing

RedisStore *ClusterStore::owner_of_key(std::string_view key, FailReason &reason) const {
  RedisStore *s = owner_[key_slot(key)].load(std::memory_order_acquire);
  if (!s) reason = map_known_.load(std::memory_order_relaxed) ? FailReason::cluster : map_failure_.load();
  return s;
}

RedisStore *ClusterStore::owner_of(const TenantKey &t, FailReason &reason) const {
  thread_local std::string key;
  RedisStore::tenant_key_into(key, policy_.prefix, t, "rate");
  return owner_of_key(key, reason);
}

AdmitResult ClusterStore::undecided(FailReason why) {
  failures_[static_cast<size_t>(why)].fetch_add(1, std::memory_order_relaxed);
  AdmitResult r;
  r.reason = why;
  return r;
}

ClusterStore::Share ClusterStore::take_share(const AdmitOp &op) {
  int64_t at = fleet_view_at_.load(std::memory_order_relaxed);
  if (at == 0 || now_us() - at >= kFleetViewUs) return Share::unknown;
  int64_t others = fleet_others_.load(std::memory_order_relaxed);
  int64_t limit = std::min(op.fleet_cap - others, fleet_allowance_.load(std::memory_order_relaxed));
  int64_t mine = fleet_local_.load(std::memory_order_relaxed);
  while (mine < limit)
    if (fleet_local_.compare_exchange_weak(mine, mine + 1, std::memory_order_relaxed)) return Share::ok;
  return Share::no;
}

AdmitOp ClusterStore::without_fleet(const AdmitOp &op) {
  AdmitOp t = op;
  t.fleet = false;
  return t;
}

// r: the tenant's part as its master decided it (or a default, decided result when there was none).
// The share taken goes back unless the request committed.
void ClusterStore::with_fleet(const AdmitOp &op, Share share, AdmitResult &r) {
  if (!r.decided) {
    if (share == Share::ok) give_share();
    return;
  }
  r.fleet_ok = share == Share::ok;
  r.committed = commits(op, r.rate_ok, r.conc_ok, r.fleet_ok, r.rules.failed);
  if (share == Share::ok && !r.committed) give_share();
}

AdmitResult ClusterStore::admit(const AdmitOp &op) {
  if (!op.fleet) {
    FailReason why = FailReason::none;
    RedisStore *s = owner_of(op.tenant, why);
    return s ? s->admit(op) : undecided(why);
  }
  Share share = take_share(op);
  if (share == Share::unknown) return undecided(map_known_.load() ? FailReason::connection : map_failure_.load());
  if (decided_here(op, share)) return here(op, share);
  FailReason why = FailReason::none;
  RedisStore *s = owner_of(op.tenant, why);
  AdmitResult r = s ? s->admit(without_fleet(op)) : undecided(why);
  with_fleet(op, share, r);
  return r;
}

AdmitResult ClusterStore::here(const AdmitOp &op, Share share) {
  AdmitResult r;
  r.decided = true;
  if (share == Share::no && op.fleet_enforce) {
    // The fleet refuses: nothing is consumed anywhere, and the tenant's limiters were not asked.
    r.fleet_ok = r.committed = false;
    r.rate_evaluated = r.conc_evaluated = false;
    return r;
  }
  with_fleet(op, share, r);  // no tenant limiter asked
  return r;
}

void ClusterStore::admit_async(const AdmitOp &op, AdmitCompletion *done) {
  Share share = Share::ok;
  if (op.fleet) {
    share = take_share(op);
    if (share == Share::unknown) {
      done->complete(undecided(map_known_.load() ? FailReason::connection : map_failure_.load()));
      return;
    }
    if (decided_here(op, share)) {
      done->complete(here(op, share));
      return;
    }
  }
  FailReason why = FailReason::none;
  RedisStore *s = owner_of(op.tenant, why);
  if (!s) {
    if (op.fleet && share == Share::ok) give_share();
    done->complete(undecided(why));
    return;
  }
  if (!op.fleet) {
    s->admit_async(op, done);
    return;
  }
  s->admit_async(without_fleet(op), new FleetAdmit(*this, op, share, done));
}

void ClusterStore::release(const ReleaseOp &op) {
  if (in_forked_child()) return;
  if (op.fleet) give_share();
  if (!op.conc && !op.gives_back()) return;
  FailReason why = FailReason::none;
  RedisStore *s = owner_of(op.tenant, why);
  if (!s) return;  // no master known: the slot heals after ttl_s
  ReleaseOp t = op;
  t.fleet = false;
  s->release(t);
}

void ClusterStore::lease_async(const LeaseOp &op, LeaseCompletion *done) {
  FailReason why = FailReason::none;
  RedisStore *s = owner_of(op.tenant, why);
  if (!s) {
    failures_[static_cast<size_t>(why)].fetch_add(1, std::memory_order_relaxed);
    LeaseResult r;
    r.reason = why;
    done->complete(std::move(r));
    return;
  }
  s->lease_async(op, done);
}

void ClusterStore::end_lease(const LeaseOp &op) {
  FailReason why = FailReason::none;
  if (RedisStore *s = owner_of(op.tenant, why)) s->end_lease(op);
}

void ClusterStore::fleet_report_async(const FleetReportOp &op, FleetReportCompletion *done) {
  FailReason why = FailReason::none;
  RedisStore *s = owner_of_key(RedisStore::reports_key_for(policy_.prefix, true), why);
  if (!s) {
    done->complete(FleetReportResult{});
    return;
  }
  s->fleet_report_async(op, done);
}

StoreStats ClusterStore::stats() const {
  StoreStats s;
  for (size_t i = 0; i < s.failures.size(); i++) s.failures[i] = failures_[i].load();
  std::vector<const RedisStore *> owners = masters();
  std::shared_lock lock(nodes_mu_);
  bool any_open = false, any_half = false;
  for (const auto &n : nodes_) {
    StoreStats ns = n->store->stats();
    for (size_t i = 0; i < s.failures.size(); i++) s.failures[i] += ns.failures[i];
    s.release_errors += ns.release_errors;
    s.reconnects += ns.reconnects;
    s.noscript_reloads += ns.noscript_reloads;
    s.connections_in_use += ns.connections_in_use;
    s.waiting += ns.waiting;
    s.waiting_cap += ns.waiting_cap;
    // A node that owns no slot (an old master, down) does not speak for the cluster's breaker.
    if (std::find(owners.begin(), owners.end(), n->store.get()) == owners.end()) continue;
    any_open = any_open || ns.breaker == BreakerState::open;
    any_half = any_half || ns.breaker == BreakerState::half_open;
  }
  s.breaker = any_open ? BreakerState::open : any_half ? BreakerState::half_open : BreakerState::closed;
  return s;
}

std::vector<const RedisStore *> ClusterStore::masters() const {
  std::vector<const RedisStore *> out;
  for (const auto &o : owner_) {
    const RedisStore *s = o.load(std::memory_order_relaxed);
    if (s && std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
  }
  return out;
}

// ------------------------------------------------------------------------------------ hooks

void ClusterStore::redirect(RedisStore &, RedisStore::Call *c, Redirect rd) {
  std::shared_lock lock(nodes_mu_);
  if (closing_) {
    RedisStore::drop(c, FailReason::connection);
    return;
  }
  RedisStore *to = nullptr;
  for (const auto &n : nodes_)
    if (n->at == rd.to) to = n->store.get();
  if (!rd.ask) {
    suspect_until_us_.store(now_us() + kSuspectUs, std::memory_order_relaxed);
    if (to) owner_[rd.slot].store(to, std::memory_order_release);
  }
  if (to) {
    to->adopt(c, rd.ask);
    return;
  }
  lock.unlock();
  {
    std::lock_guard hl(handoffs_mu_);
    handoffs_.push_back({c, std::move(rd)});
  }
  wake();
}

void ClusterStore::split(RedisStore &, RedisStore::Call *c) {
  auto *s = new Split(*this, c->op, c->done);
  c->done = nullptr;
  delete c;
  s->start();
}

void ClusterStore::suspect(RedisStore &) {
  int64_t now = now_us();
  // Only the first suspicion of a quiet period wakes the thread; the others find it refreshing.
  if (suspect_until_us_.exchange(now + kSuspectUs, std::memory_order_relaxed) < now) wake();
}

void ClusterStore::flags(const FleetModes &m) {
  for (size_t i = 0; i < m.size(); i++) fleet_modes_[i].store(m[i], std::memory_order_relaxed);
}

void ClusterStore::wake() {
  {
    std::lock_guard lock(run_mu_);
    woken_ = true;
  }
  run_cv_.notify_all();
}

// ------------------------------------------------------------------------------------ maintenance

void ClusterStore::run() {
  int64_t next_refresh = now_us() + kRefreshUs, next_flags = 0, next_report = 0;
  for (;;) {
    {
      std::unique_lock lock(run_mu_);
      run_cv_.wait_for(lock, std::chrono::milliseconds(20), [this] { return stop_ || woken_; });
      if (stop_) return;
      woken_ = false;
    }
    int64_t now = now_us();
    std::vector<Handoff> handoffs;
    {
      std::lock_guard lock(handoffs_mu_);
      handoffs.swap(handoffs_);
    }
    bool suspicious = now < suspect_until_us_.load(std::memory_order_relaxed);
    if (!handoffs.empty() || now >= next_refresh) {
      refresh();
      now = now_us();
      next_refresh = now + (suspicious || !map_known_.load() ? kSuspectRefreshUs : kRefreshUs);
    } else if (suspicious && next_refresh > now + kSuspectRefreshUs) {
      next_refresh = now + kSuspectRefreshUs;
    }
    for (Handoff &h : handoffs) {
      // MOVED or ASK to a node the map did not name yet: connect to it, then hand the call on (its caller's
      // deadline still runs; a call whose deadline passed meanwhile is answered by that store's expiry).
      RedisStore *to = node_at(h.rd.to, true);
      if (!to) {
        RedisStore::drop(h.call, FailReason::connection);
        continue;
      }
      if (!h.rd.ask) owner_[h.rd.slot].store(to, std::memory_order_release);
      to->adopt(h.call, h.rd.ask);
    }
    if (now >= next_flags) {
      next_flags = now + policy_.redis.flags_poll_ms * 1000;
      FailReason why = FailReason::none;
      if (RedisStore *s = owner_of_key(policy_.prefix + ":flags", why)) s->poll_flags();
    }
    if (fleet_ && now >= next_report) {
      next_report = now + kReportUs;
      report_fleet();
    }
  }
}

void ClusterStore::report_fleet() {
  if (report_->in_flight.load(std::memory_order_acquire)) return;
  FleetReportOp op;
  op.client = client_id_;
  op.in_flight = fleet_local_.load(std::memory_order_relaxed);
  report_->sent = op.in_flight;
  op.expires_us = kReportTtlUs;
  op.fleet_ttl_us = static_cast<int64_t>(policy_.fleet->ttl_s * 1e6);
  report_->in_flight.store(true, std::memory_order_release);
  fleet_report_async(op, report_.get());
}

RedisStore *ClusterStore::node_at(const RedisEndpoint &at, bool make) {
  {
    std::shared_lock lock(nodes_mu_);
    for (const auto &n : nodes_)
      if (n->at == at) return n->store.get();
    if (!make || closing_) return nullptr;
  }
  RedisUrl u;
  u.kind = RedisUrl::Kind::single;
  u.tls = url_.tls;
  u.nodes = {at};
  u.user = url_.user;
  u.password = url_.password;
  auto node = std::make_unique<Node>();
  node->at = at;
  try {
    ClusterHooks *hooks = this;
    node->store = std::make_unique<RedisStore>(policy_, std::move(u), hooks);
  } catch (const std::exception &e) {
    std::fprintf(stderr, "floodwall: Redis Cluster node %s cannot be used: %s\n", endpoint_name(at).c_str(), e.what());
    return nullptr;
  }
  node->store->wait_connected(policy_.redis.connect_timeout_ms);
  RedisStore *s = node->store.get();
  std::unique_lock lock(nodes_mu_);
  if (closing_) return nullptr;  // node goes with this scope: its store joins its thread
  nodes_.push_back(std::move(node));
  return s;
}

// ------------------------------------------------------------------------------------- admin API

AdminRunner ClusterStore::runner_of(const TenantKey &t) const {
  FailReason why = FailReason::none;
  RedisStore *s = owner_of(t, why);
  if (!s)
    throw StoreError("store: no master of the cluster is known for the tenant's slot now (" +
                     std::string(fail_reason_name(why)) + ")");
  return [s](const auto &cmds) { return s->admin_run(cmds); };
}

AdminRunner ClusterStore::runner_of_key(const std::string &key) const {
  FailReason why = FailReason::none;
  RedisStore *s = owner_of_key(key, why);
  if (!s)
    throw StoreError("store: no master of the cluster is known for " + key + " now (" +
                     std::string(fail_reason_name(why)) + ")");
  return [s](const auto &cmds) { return s->admin_run(cmds); };
}

void ClusterStore::control(const TenantKey &tenant, const ControlChange &change) {
  admin_control(runner_of(tenant), runner_of_key(control_index_key(policy_.prefix)),
                runner_of_key(policy_.prefix + ":flags"), policy_.prefix, tenant, change);
  bump_ctl_epoch();
}

TenantState ClusterStore::inspect(const AdmitOp &op) {
  return admin_inspect(runner_of(op.tenant), policy_.prefix, op);
}

void ClusterStore::reset(const AdmitOp &op) {
  admin_reset(runner_of(op.tenant), policy_.prefix, op);
}

void ClusterStore::set_fleet_mode(Limiter l, int8_t mode) {
  FailReason why = FailReason::none;
  RedisStore *s = owner_of_key(policy_.prefix + ":flags", why);
  if (!s) throw StoreError("store: no master of the cluster is known for the flags now");
  s->set_fleet_mode(l, mode);
  fleet_modes_[static_cast<size_t>(l)].store(mode);
}

void ClusterStore::hold_writes() {
  std::shared_lock lock(nodes_mu_);
  for (const auto &n : nodes_) n->store->hold_writes();
}

void ClusterStore::flush_writes() {
  std::shared_lock lock(nodes_mu_);
  for (const auto &n : nodes_) n->store->flush_writes();
}

StoreStatus ClusterStore::status(int64_t fleet_ttl_us) {
  StoreStatus st = admin_status(
      runner_of_key(policy_.prefix + ":flags"), runner_of_key(RedisStore::fleet_key_for(policy_.prefix, true)),
      runner_of_key(control_index_key(policy_.prefix)), policy_.prefix, RedisStore::fleet_key_for(policy_.prefix, true),
      RedisStore::reports_key_for(policy_.prefix, true), fleet_ttl_us);
  std::vector<const RedisStore *> masters;
  for (const auto &o : owner_) {
    const RedisStore *s = o.load(std::memory_order_acquire);
    if (s && std::find(masters.begin(), masters.end(), s) == masters.end()) masters.push_back(s);
  }
  st.topology = "cluster of " + std::to_string(masters.size()) + " masters";
  return st;
}

std::vector<std::pair<std::string, TenantControl>> ClusterStore::controlled(size_t limit) {
  return admin_controlled(
      runner_of_key(control_index_key(policy_.prefix)), [this](const TenantKey &t) { return runner_of(t); },
      policy_.prefix, limit);
}

}  // namespace floodwall
