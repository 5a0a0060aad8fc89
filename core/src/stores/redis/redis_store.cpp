// The Redis store's callers' side: admits, releases, leases and reports queued for the I/O thread.
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "stores/redis/redis_store_internal.hpp"
#include "stores/redis/resp.hpp"
#include "util/errors.hpp"
#include "util/futex_event.hpp"
#include "util/wake_fds.hpp"

namespace floodwall {

namespace {

// The stores of this process, flushed at exit: a worker that a preforking server recycles (gunicorn's
// max_requests, Puma's phased restart, a Node worker ending) may release its tickets and exit at once,
// without freeing its client; its releases must still reach Redis. Tried, not waited for: in a forked
// child the mutex may have been held by a parent thread at the fork, and exit must not hang on it.
std::mutex live_stores_mu;
std::vector<RedisIo *> live_stores;

void flush_live_stores() {
  std::unique_lock lock(live_stores_mu, std::defer_lock);
  for (int i = 0; i < 100 && !lock.try_lock(); i++) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (!lock.owns_lock()) return;
  for (RedisIo *s : live_stores) s->flush_for_exit();
}

void register_store(RedisIo *s) {
  static const bool at_exit = std::atexit(flush_live_stores) == 0;
  (void)at_exit;
  std::lock_guard lock(live_stores_mu);
  live_stores.push_back(s);
}

void unregister_store(RedisIo *s) {
  std::lock_guard lock(live_stores_mu);
  live_stores.erase(std::remove(live_stores.begin(), live_stores.end(), s), live_stores.end());
}

}  // namespace

RedisIo::RedisIo(RedisStore &store, const Policy &p, RedisUrl url, ClusterHooks *cluster)
    : store_(store),
      opt_(p.redis),
      url_(std::move(url)),
      prefix_(p.prefix),
      generation_(fork_generation()),
      cluster_(cluster),
      fleet_key_(RedisStore::fleet_key_for(p.prefix, cluster != nullptr)),
      reports_key_(RedisStore::reports_key_for(p.prefix, cluster != nullptr)),
      fleet_reports_(!cluster && p.leases() && p.fleet.has_value()),
      breaker_(BreakerOptions{p.redis.breaker_window_ms * 1000, p.redis.breaker_min_calls,
                              p.redis.breaker_failure_ratio, p.redis.breaker_open_ms * 1000}) {
  store_url_ = p.store;
  admit_head_rate_ = resp_evalsha_head(scripts_.admit.sha, 2, 5);
  admit_head_ctl_ = resp_evalsha_head(scripts_.admit.sha, 1, 5);
  admit_head_full_ = resp_evalsha_head(scripts_.admit.sha, fleet_reports_ ? 5 : 4, 10);
  release_head_ = resp_evalsha_head(scripts_.release.sha, 2, 2);
  // The I/O thread gives up a little before the deadline (a tenth of it, 200 us to 1 ms), so that the
  // woken caller has its answer within it, wake-up latency included.
  int64_t deadline = opt_.deadline_ms * 1000;
  deadline_us_ = deadline - std::clamp<int64_t>(deadline / 10, 200, 1000);
  if (url_.tls) {
    tls_ = std::make_unique<TlsContext>(opt_.tls, url_.host());
    static std::atomic<bool> warned{false};
    if (opt_.tls.insecure && !warned.exchange(true))
      std::fprintf(stderr,
                   "floodwall: redis.tls.insecure is set: the Redis server's certificate is not verified, so anyone "
                   "on the path can impersonate it\n");
  }
  WakeFds wake;
  if (!wake.open()) throw StoreError("store: no descriptor to wake the I/O thread (eventfd or pipe failed)");
  wake_fd_ = wake.read_fd;
  wake_write_fd_ = wake.write_fd;
  fds_.set(kWakeFdSlot, wake_fd_);
  if (url_.kind == RedisUrl::Kind::sentinel) {
    // The sentinels are asked with their own password (redis.sentinel_password_env), else with the URL's.
    SentinelWatch::Options so;
    if (!opt_.sentinel_password.empty()) {
      so.password = opt_.sentinel_password;
    } else {
      so.user = url_.user;
      so.password = url_.password;
    }
    so.connect_timeout_ms = opt_.connect_timeout_ms;
    sentinel_ = std::make_unique<SentinelWatch>(url_, tls_.get(), std::move(so), [this] { wake_io(); });
    sentinel_->wait_known(opt_.connect_timeout_ms);
  }
  if (!cluster_)
    notices_ =
        std::make_unique<SlotNotices>([this](RedisEndpoint &to, uint64_t &gen) { return target(to, gen); },
                                      [this](uint64_t gen) { return !sentinel_ || sentinel_->generation() == gen; },
                                      setup_commands(), tls_.get(), opt_.connect_timeout_ms);
  conns_.resize(static_cast<size_t>(opt_.connections));
  lanes_ = lanes_wanted_ = conns_.size();
  lanes_in_use_.store(static_cast<uint32_t>(lanes_));
  io_ = std::thread([this] { run(); });
  register_store(this);
  // Give the first connection the connect time-out to come up, so that the first requests of a fresh
  // process are decided by Redis. An unreachable Redis is not an error: the fallback decides. (A cluster's
  // stores are waited for by the cluster store, all at once.)
  if (!cluster_) wait_connected(opt_.connect_timeout_ms);
}

RedisIo::~RedisIo() {
  if (in_forked_child()) {
    // The I/O thread exists only in the parent: nothing to join. Close what we inherited.
    abandon_after_fork();
    io_.detach();
    return;
  }
  notices_.reset();                  // its thread asks sentinel_ for the master
  if (sentinel_) sentinel_->stop();  // first: it wakes the I/O thread through wake_fd_
  unregister_store(this);
  stop_.store(true);
  wake_io();
  if (io_.joinable()) io_.join();
  fds_.clear(kWakeFdSlot);
  close(wake_fd_);
  if (wake_write_fd_ != wake_fd_) close(wake_write_fd_);
  for (Call *c : pool_) delete c;
  // As the I/O thread waits for the replies to what it sent (closing_drained), with the same bound.
  const int64_t drain_until = now_us() + std::max<int64_t>(200, opt_.deadline_ms) * 1000;
  direct_.close_all(drain_until);
}

void RedisIo::abandon_after_fork() {
  fds_.close_all();
  if (notices_) {
    notices_->abandon_after_fork();
    (void)notices_.release();  // its thread and lock are the parent's
  }
  if (sentinel_) {
    sentinel_->abandon_after_fork();
    (void)sentinel_.release();  // its lock may be held by the parent's thread: never touched again
  }
}

bool RedisIo::target(RedisEndpoint &to, uint64_t &generation) const {
  if (!sentinel_) {
    to = url_.nodes.front();
    return true;
  }
  std::optional<RedisEndpoint> m = sentinel_->master(&generation);
  if (!m) return false;
  to = *m;
  return true;
}

void RedisIo::flush_for_exit() {
  if (in_forked_child()) return;  // a parent's store: its I/O thread is not here
  wake_io();
  // Every call queued or on the wire is answered (or times out) within its deadline; releases have
  // a second. Calls abandoned to a stopped Redis may never be answered: give up after that long.
  auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(patient_us());
  // An open breaker drops releases anyway (their slots heal after ttl_s): nothing to wait for then.
  while (outstanding_.load(std::memory_order_acquire) > 0 && breaker_.closed() &&
         std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  // The releases written on callers' own connections: their replies read, so that the exit closes those
  // sockets with nothing unread (else they are reset, and Redis loses what it had not read yet of them).
  // A connection some thread is using now is left alone: exit must not wait on it.
  direct_.drain_for_exit(now_us() + patient_us());
}

// ------------------------------------------------------------------------------------ callers

namespace {

// What a blocking admit waits on: one per caller thread, so that it outlives every call it waits for
// and the I/O thread can wake it with no lock held (a mutex and condition variable here cost two wakes:
// the notify, then the unlock that the woken caller blocks on at once).
class SyncWaiter final : public AdmitCompletion {
 public:
  void complete(AdmitResult &&r) override {
    result_ = std::move(r);
    done_.set();  // the caller reads result_ after it sees the event
  }
  AdmitResult wait() {
    done_.wait();
    done_.reset();
    return std::move(result_);
  }

 private:
  FutexEvent done_;
  AdmitResult result_;
};

}  // namespace

thread_local std::string RedisIo::tl_cmd;
thread_local const char RedisIo::tl_submitter = 0;
thread_local const void *RedisIo::tl_io_of = nullptr;

AdmitResult RedisIo::admit(const AdmitOp &op) {
  // A blocking caller makes its round trip itself, on its own connection (direct.cpp): the hop to the I/O
  // thread and back is two wake-ups of another thread per admit.
  // It does while few callers are in flight; many share the I/O thread's pipeline (direct_path.hpp).
  DirectPath::Caller me(direct_);
  if (AdmitResult r; direct_.admit(op, me, r)) return r;
  thread_local SyncWaiter waiter;
  admit_async(op, &waiter);
  end_hold(&tl_submitter);  // a blocking admit never waits for a hold of its own thread's to end
  return waiter.wait();
}

void RedisStore::tenant_key_into(std::string &key, const std::string &prefix, const TenantKey &t,
                                 std::string_view limiter) {
  key.assign(prefix);
  key.append(":{", 2);
  t.append_encoded(key);
  key.append("}:", 2);
  key.append(limiter);
}

std::string_view RedisIo::tenant_key(const TenantKey &t, std::string_view limiter) const {
  thread_local std::string key;
  RedisStore::tenant_key_into(key, prefix_, t, limiter);
  return key;
}

RedisIo::Call *RedisIo::take_call(Kind kind, int64_t deadline_us) {
  Call *c = nullptr;
  {
    std::lock_guard lock(pool_mu_);
    if (!pool_.empty()) {
      c = pool_.back();
      pool_.pop_back();
    }
  }
  if (!c) c = new Call;
  outstanding_.fetch_add(1, std::memory_order_relaxed);
  c->kind = kind;
  c->slot = c->rate_enforce = c->acquire = c->retried = c->abandoned = c->role_check = false;
  c->asking = false;
  c->redirects = 0;
  c->deadline_us = deadline_us;
  c->done = nullptr;
  c->lease_done = nullptr;
  c->report_done = nullptr;
  c->late_release = ReleaseOp{};
  c->cmd.swap(tl_cmd);
  return c;
}

void RedisIo::admit_async(const AdmitOp &op, AdmitCompletion *done) {
  int64_t now = now_us();
  if (in_forked_child()) {
    // A store made before fork() has no I/O thread in the child (a ProcessGuard makes a new one; a Guard used
    // directly does not): the fallback decides at once, never a hang.
    failures_[static_cast<size_t>(FailReason::error)].fetch_add(1, std::memory_order_relaxed);
    AdmitResult r;
    r.reason = FailReason::error;
    done->complete(std::move(r));
    return;
  }
  // Open: Redis is down or silent, and nobody waits for it. Beyond the cap: Redis would not answer this
  // one within the deadline. Either way the fallback decides now.
  FailReason at_once = !breaker_.closed() ? open_reason()
                       : bp_.waiting.load(std::memory_order_relaxed) >= bp_.cap.load(std::memory_order_relaxed)
                           ? FailReason::overload
                           : FailReason::none;
  if (at_once != FailReason::none) {
    failures_[static_cast<size_t>(at_once)].fetch_add(1, std::memory_order_relaxed);
    AdmitResult r;
    r.reason = at_once;
    done->complete(std::move(r));
    return;
  }
  bool slot = op.conc || op.fleet;
  format_admit(op, tl_cmd);
  Call *c = take_call(Kind::admit, now + deadline_us_);
  c->sent_us = now;
  c->done = done;
  c->slot = slot;
  c->rules = op.rules.n;
  c->rate_enforce = op.rate && op.rate_enforce;
  c->acquire = op.max_wait_ns > 0;
  c->affinity = std::hash<std::string_view>{}(op.tenant.view());
  c->late_release = release_of(op);
  if (cluster_) c->op = op;
  bp_.waiting.fetch_add(1, std::memory_order_relaxed);
  submit(c);
}

void RedisIo::format_admit(const AdmitOp &op, std::string &cmd) const {
  // A request-rate-only admit sends one key and four arguments; one with a slot sends everything.
  auto mode = [](bool on, bool enforce) { return !on ? '-' : enforce ? 'E' : 'D'; };
  char limiters[4 + kMaxRules + 24] = {mode(op.rate, op.rate_enforce), mode(op.conc, op.conc_enforce),
                                       mode(op.fleet, op.fleet_enforce)};
  if (op.ctl_only) {
    // The control record alone (a cluster slot in migration): one key, nothing else asked.
    cmd.assign(admit_head_ctl_);
    resp_bulk(cmd, tenant_key(op.tenant, "ctl"));
    resp_flags(cmd, "---");
    resp_int(cmd, 0);
    resp_int(cmd, 0);
    resp_int(cmd, op.cost_m);
    resp_bulk(cmd, op.tier);
    return;
  }
  size_t flag_len = 3;
  if (op.no_ctl) limiters[flag_len++] = '!';
  // The limits and quotas that apply: one character each, their keys after the others, their numbers
  // after the slot id (lua/tenant_admit.lua).
  int rule_args = 0;
  for (size_t j = 0; j < op.rules.n; j++) {
    const RuleOp &r = op.rules.at[j];
    limiters[flag_len++] = r.quota ? (r.enforce ? 'Q' : 'q') : (r.enforce ? 'L' : 'l');
    rule_args += r.quota ? 3 : 2;
  }
  // An acquire: '~' and its max wait (ns) after the rules; the reply is then always the array, with the
  // request's turn and Redis' TIME at its end.
  bool acquire = op.max_wait_ns > 0;
  if (acquire) {
    limiters[flag_len++] = '~';
    flag_len = static_cast<size_t>(std::to_chars(limiters + flag_len, limiters + sizeof limiters, op.max_wait_ns).ptr -
                                   limiters);
  }
  bool slot = op.conc || op.fleet || op.rules.n > 0;
  int ctl_key = op.no_ctl ? 0 : 1;
  if (op.rules.n > 0 || op.no_ctl || acquire)
    cmd.assign(resp_evalsha_head(scripts_.admit.sha,
                                 slot ? (fleet_reports_ ? 4 : 3) + op.rules.n + ctl_key : 1 + ctl_key,
                                 slot ? 10 + rule_args : 5));
  else
    cmd.assign(slot ? admit_head_full_ : admit_head_rate_);
  // On a cluster every key of a script must share its slot, and the fleet is decided in process (the
  // cluster store never asks for it here): the tenant's set stands in for the fleet set, never touched,
  // and for the bucket when the request rate is not asked. A call that names one key is then served
  // throughout a migration of its slot (ASK), where one that names two that are not both on one side is
  // refused with TRYAGAIN.
  bool set_only = cluster_ && !op.rate;
  resp_bulk(cmd, tenant_key(op.tenant, set_only ? "conc" : "rate"));
  if (slot) {
    resp_bulk(cmd, tenant_key(op.tenant, "conc"));
    resp_bulk(cmd, cluster_ ? tenant_key(op.tenant, "conc") : std::string_view(fleet_key_));
    if (fleet_reports_) resp_bulk(cmd, fleet_reports_key());
  }
  for (size_t j = 0; j < op.rules.n; j++) {
    const RuleOp &r = op.rules.at[j];
    resp_bulk(cmd, tenant_key(op.tenant, *r.key));
  }
  if (!op.no_ctl) resp_bulk(cmd, tenant_key(op.tenant, "ctl"));
  resp_flags(cmd, std::string_view(limiters, flag_len));
  resp_int(cmd, op.rate_m);
  resp_int(cmd, op.burst_m);
  resp_int(cmd, op.cost_m);
  if (slot) {
    resp_int(cmd, op.conc_limit);
    resp_int(cmd, op.conc_ttl_us);
    resp_int(cmd, op.fleet_cap);
    resp_int(cmd, op.fleet_ttl_us);
    char id[16];
    std::memcpy(id, &op.slot.hi, 8);
    std::memcpy(id + 8, &op.slot.lo, 8);
    resp_bulk(cmd, std::string_view(id, 16));
  }
  for (size_t j = 0; j < op.rules.n; j++) {
    const RuleOp &r = op.rules.at[j];
    resp_int(cmd, r.rate_or_limit);  // a limit's rate and burst, or a quota's limit and period
    resp_int(cmd, r.burst_or_period);
    if (r.quota) resp_int(cmd, r.utc_offset_s);
  }
  resp_bulk(cmd, op.tier);
}

void RedisIo::release(const ReleaseOp &op) {
  if (in_forked_child()) return;  // the parent's slots: they heal after ttl_s
  if (!direct_.release(op)) release_via_io(op);
}

void RedisIo::release_via_io(const ReleaseOp &op) {
  int64_t now = now_us();
  DirectPath::tl_io_release_us = now;
  format_release(op, tl_cmd);
  Call *c = take_call(Kind::release, now + patient_us());
  c->affinity = std::hash<std::string_view>{}(op.tenant.view());
  submit(c);
}

namespace {
// A bucket's full instant as lib/bucket.lua writes it: "<seconds><9 digits of ns>".
std::string full_at_text(int64_t ns) {
  char buf[48];
  int n = std::snprintf(buf, sizeof buf, "%lld%09lld", static_cast<long long>(ns / 1'000'000'000),
                        static_cast<long long>(ns % 1'000'000'000));
  return std::string(buf, static_cast<size_t>(n));
}
}  // namespace

void RedisIo::format_release(const ReleaseOp &op, std::string &cmd) const {
  char id[16];
  std::memcpy(id, &op.slot.hi, 8);
  std::memcpy(id + 8, &op.slot.lo, 8);
  // A tenant slot freed on one node or through Sentinel is published on the tenant's channel, for the
  // acquires waiting for one (slot_notices.cpp; a cluster's store signals none).
  const bool publish = op.conc && !cluster_;
  if (op.gives_back() || publish) {  // release.lua: the slots (on a cluster both in the tenant's set)
    const char flags[4] = {op.conc || (cluster_ && op.fleet) ? '1' : '0', op.fleet && !cluster_ ? '1' : '0',
                           op.gives_back() ? '1' : '0', '1'};
    cmd = resp_evalsha_head(scripts_.release.sha, 3, publish ? 5 : 4);
    resp_bulk(cmd, tenant_key(op.tenant, "conc"));
    resp_bulk(cmd, cluster_ ? tenant_key(op.tenant, "conc") : std::string_view(fleet_key_));
    resp_bulk(cmd, tenant_key(op.tenant, "rate"));
    resp_bulk(cmd, std::string_view(flags, publish ? 4 : 3));
    resp_bulk(cmd, std::string_view(id, 16));
    resp_bulk(cmd, op.gives_back() ? full_at_text(op.give_back_full_at_ns) : std::string());
    resp_bulk(cmd, op.gives_back() ? full_at_text(op.give_back_full_at_ns - op.give_back_cost_ns) : std::string());
    if (publish) resp_bulk(cmd, tenant_key(op.tenant, "freed"));
    return;
  }
  // One key (the fleet's; on a cluster the fleet slot is in the tenant's set too, see format_admit): a plain
  // ZREM, idempotent as the script is, and about half the redis-server's time of running one.
  static constexpr std::string_view kZrem = "*3\r\n$4\r\nZREM\r\n";
  cmd.assign(kZrem);
  resp_bulk(cmd, op.conc || cluster_ ? tenant_key(op.tenant, "conc") : std::string_view(fleet_key_));
  resp_bulk(cmd, std::string_view(id, 16));
}

void RedisIo::resp_flags(std::string &cmd, std::string_view flags) const {
  if (opt_.clock != RedisOptions::Clock::client) {
    resp_bulk(cmd, flags);
    return;
  }
  // redis.clock "client": the scripts take this process's wall clock instead of TIME.
  char buf[4 + kMaxRules + 24 + 32];  // the flags (an acquire's '~' and wait too), "@" and at most 20 digits
  std::memcpy(buf, flags.data(), flags.size());
  char *p = buf + flags.size();
  *p++ = '@';
  p = std::to_chars(p, buf + sizeof buf, wall_us()).ptr;
  resp_bulk(cmd, std::string_view(buf, static_cast<size_t>(p - buf)));
}

void RedisIo::format_lease(const LeaseOp &op, std::string &cmd) const {
  size_t wanted = op.slots ? op.wanted.size() : 0;
  cmd = resp_evalsha_head(scripts_.lease.sha, 3, static_cast<int>(9 + op.released.size() + wanted));
  resp_bulk(cmd, tenant_key(op.tenant, "rate"));
  resp_bulk(cmd, tenant_key(op.tenant, "conc"));
  resp_bulk(cmd, tenant_key(op.tenant, "ctl"));
  const char asks[2] = {op.tokens ? 'T' : '-', op.slots ? 'S' : '-'};
  resp_flags(cmd, std::string_view(asks, 2));
  resp_int(cmd, op.rate_m);
  resp_int(cmd, op.burst_m);
  resp_int(cmd, op.min_m);
  resp_int(cmd, op.want_m);
  resp_int(cmd, op.give_back_m);
  resp_int(cmd, op.conc_limit);
  resp_int(cmd, op.conc_ttl_us);
  resp_int(cmd, static_cast<int64_t>(op.released.size()));
  for (const SlotId &id : op.released) resp_slot_id(cmd, id);
  for (size_t i = 0; i < wanted; i++) resp_slot_id(cmd, op.wanted[i]);
}

void RedisIo::lease_async(const LeaseOp &op, LeaseCompletion *done) {
  int64_t now = now_us();
  FailReason at_once = in_forked_child()    ? FailReason::error
                       : !breaker_.closed() ? open_reason()
                       : bp_.waiting.load(std::memory_order_relaxed) >= bp_.cap.load(std::memory_order_relaxed)
                           ? FailReason::overload
                           : FailReason::none;
  if (at_once != FailReason::none) {
    // What it gives back stays debited (tokens) or heals after ttl_s (slots): never given back twice.
    failures_[static_cast<size_t>(at_once)].fetch_add(1, std::memory_order_relaxed);
    if (op.gives_back()) release_errors_.fetch_add(1, std::memory_order_relaxed);
    LeaseResult r;
    r.reason = at_once;
    done->complete(std::move(r));
    return;
  }
  format_lease(op, tl_cmd);
  Call *c = take_call(Kind::lease, now + deadline_us_);
  c->sent_us = now;
  c->lease_done = done;
  c->lease.tenant = op.tenant;
  c->lease.rate_m = op.rate_m;
  c->lease.burst_m = op.burst_m;
  c->lease.conc_limit = op.conc_limit;
  c->lease.conc_ttl_us = op.conc_ttl_us;
  c->lease.wanted.assign(op.wanted.begin(), op.wanted.end());
  c->affinity = std::hash<std::string_view>{}(op.tenant.view());
  bp_.waiting.fetch_add(1, std::memory_order_relaxed);
  submit(c);
}

void RedisIo::end_lease(const LeaseOp &op) {
  int64_t now = now_us();
  if (in_forked_child() || !op.gives_back()) return;  // the parent's lease is the parent's
  if (!breaker_.closed()) {
    release_errors_.fetch_add(1, std::memory_order_relaxed);  // stays debited; the slots heal after ttl_s
    return;
  }
  DirectPath::tl_io_release_us = now;
  LeaseOp back = op;
  back.tokens = back.slots = false;
  format_lease(back, tl_cmd);
  Call *c = take_call(Kind::lease_end, now + patient_us());
  c->affinity = std::hash<std::string_view>{}(op.tenant.view());
  submit(c);
}

void RedisIo::fleet_report_async(const FleetReportOp &op, FleetReportCompletion *done) {
  int64_t now = now_us();
  if (in_forked_child() || !breaker_.closed()) {
    done->complete(FleetReportResult{});
    return;
  }
  std::string &cmd = tl_cmd;
  bool client_clock = opt_.clock == RedisOptions::Clock::client;
  cmd = resp_evalsha_head(scripts_.report.sha, 2, client_clock ? 5 : 4);
  resp_bulk(cmd, fleet_reports_key());
  resp_bulk(cmd, fleet_key_);
  resp_bulk(cmd, op.client);
  resp_int(cmd, op.in_flight);
  resp_int(cmd, op.expires_us);
  resp_int(cmd, op.fleet_ttl_us);
  if (client_clock) resp_int(cmd, wall_us());
  Call *c = take_call(Kind::report, now + deadline_us_);
  c->report_done = done;
  c->affinity = std::hash<std::string_view>{}(fleet_key_);
  submit(c);
}

void RedisIo::submit(Call *c) {
  bool wake = false;
  const void *self = &tl_submitter;
  bool counted = tl_io_of != this;
  {
    std::lock_guard lock(queue_mu_);
    if (counted && self != last_submitter_) {
      if (last_submitter_) submitter_changes_++;
      last_submitter_ = self;
    }
    if (held_by_ == self) {
      c->held_us = now_us();
      held_.push_back(c);  // out of the I/O thread's reach until the holder's flush_writes()
    } else if (held_by_ == nullptr && c->kind == Kind::release && queue_.empty() && opt_.batch_window_us > 0) {
      // A release outside any hold: nobody waits on it, so it rides with the next call anyone sends (a
      // worker's next admit, or another thread's) instead of costing Redis a read and a reply of its own,
      // and goes alone once it has waited redis.batch_window_us. The I/O thread is woken only to time it:
      // not when an admit's reply (or deadline) will bring it round anyway, nor for a second release.
      wake = bp_.waiting.load(std::memory_order_relaxed) == 0 && held_.empty();
      c->held_us = now_us();
      held_.push_back(c);
    } else {
      wake = queue_.empty();  // else a wake-up is on its way for what is queued already
      // Releases waiting for a ride (no hold: the held calls are those) go first: a thread's release stays
      // ahead of its next admit.
      if (held_by_ == nullptr) (void)release_held();
      queue_.push_back(c);
    }
  }
  if (wake) wake_io();
}

bool RedisIo::release_held() {
  if (held_.empty()) return false;
  // A call's deadline, and the latency its reply measures, are Redis': the time it waited for its turn to
  // end (a long turn, a pause of the collector) is given back, so that a late flush is not taken for a
  // silent or slow Redis.
  int64_t now = now_us();
  for (Call *c : held_) {
    c->deadline_us += now - c->held_us;
    c->sent_us += now - c->held_us;
  }
  bool wake = queue_.empty();
  queue_.insert(queue_.end(), held_.begin(), held_.end());
  held_.clear();
  return wake;
}

void RedisIo::hold_writes() {
  DirectPath::tl_holds = true;
  bool wake;
  {
    std::lock_guard lock(queue_mu_);
    // Another thread's hold ends here: its calls go out now, not at this thread's flush.
    wake = held_by_ != &tl_submitter && release_held();
    held_by_ = &tl_submitter;
  }
  if (wake) wake_io();
}

void RedisIo::flush_writes() {
  end_hold(nullptr);
}

void RedisIo::send_riders() {
  bool wake;
  {
    std::lock_guard lock(queue_mu_);
    wake = held_by_ == nullptr && release_held();
  }
  if (wake) wake_io();
}

void RedisIo::end_hold(const void *only) {
  bool wake;
  {
    std::lock_guard lock(queue_mu_);
    if (only && held_by_ != only) return;
    held_by_ = nullptr;
    wake = release_held();
  }
  if (wake) wake_io();
}

void RedisIo::poll_flags() {
  if (in_forked_child() || !breaker_.closed()) return;
  tl_cmd = resp_format({"EVALSHA", scripts_.flags.sha, "1", flags_key()});
  submit(take_call(Kind::flags, now_us() + patient_us()));
}

bool RedisIo::wait_connected(int64_t ms) {
  std::unique_lock lock(ready_mu_);
  return ready_cv_.wait_for(lock, std::chrono::milliseconds(ms), [this] { return ever_connected_.load(); });
}

void RedisIo::adopt(Call *c, bool ask) {
  outstanding_.fetch_add(1, std::memory_order_relaxed);
  if (awaited(c->kind)) bp_.waiting.fetch_add(1, std::memory_order_relaxed);
  c->asking = ask;
  c->retried = false;  // a NOSCRIPT here is this server's, answered by loading the scripts here
  submit(c);
}

StoreStats RedisIo::stats() const {
  StoreStats s;
  for (size_t i = 0; i < s.failures.size(); i++) s.failures[i] = failures_[i].load();
  s.release_errors = release_errors_.load();
  s.reconnects = reconnects_.load();
  s.noscript_reloads = noscript_reloads_.load();
  s.connections_in_use = lanes_in_use_.load();
  s.waiting = bp_.waiting.load();
  int64_t cap = bp_.cap.load();
  s.waiting_cap = cap == INT64_MAX ? 0 : cap;
  s.breaker = breaker_.state();
  return s;
}

// ------------------------------------------------------------------------------------ I/O thread
}  // namespace floodwall
