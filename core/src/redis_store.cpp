#include "redis_store.hpp"

#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <linux/futex.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "sha1.hpp"
#include "store_factory.hpp"

namespace floodwall {

namespace scripts {
extern const std::string_view tenant_admit;
extern const std::string_view release;
extern const std::string_view read_flags;
extern const std::string_view tenant_lease;
extern const std::string_view fleet_report;
}  // namespace scripts

namespace {

int64_t now_us() {
  using namespace std::chrono;
  return duration_cast<microseconds>(steady_clock::now().time_since_epoch()).count();
}

std::string format(const std::vector<std::string_view> &args) {
  std::vector<const char *> argv;
  std::vector<size_t> lens;
  argv.reserve(args.size());
  lens.reserve(args.size());
  for (auto a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  char *cmd = nullptr;
  int n = redisFormatCommandArgv(&cmd, static_cast<int>(args.size()), argv.data(), lens.data());
  if (n < 0 || !cmd) throw std::bad_alloc();
  std::string out(cmd, static_cast<size_t>(n));
  free(cmd);
  return out;
}

std::string num(int64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

// RESP written straight into a call's buffer: no sprintf, no temporary strings.
void resp_len(std::string &out, char kind, size_t n) {
  char buf[24];
  buf[0] = kind;
  auto r = std::to_chars(buf + 1, buf + sizeof buf - 2, n);
  *r.ptr++ = '\r';
  *r.ptr++ = '\n';
  out.append(buf, r.ptr);
}

void resp_bulk(std::string &out, std::string_view a) {
  resp_len(out, '$', a.size());
  out.append(a);
  out.append("\r\n", 2);
}

void resp_int(std::string &out, int64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  resp_bulk(out, std::string_view(buf, static_cast<size_t>(r.ptr - buf)));
}

// The start of an EVALSHA of `nargs` arguments after the key count.
std::string evalsha_head(const std::string &sha, int nkeys, int nargs) {
  std::string h;
  resp_len(h, '*', static_cast<size_t>(3 + nkeys + nargs));
  resp_bulk(h, "EVALSHA");
  resp_bulk(h, sha);
  resp_bulk(h, num(nkeys));
  return h;
}

long futex(std::atomic<uint32_t> *word, int op, uint32_t val) {
  return syscall(SYS_futex, reinterpret_cast<uint32_t *>(word), op | FUTEX_PRIVATE_FLAG, val, nullptr, nullptr, 0);
}

// WRONGTYPE, CROSSSLOT, MOVED/ASK (a cluster behind a plain redis:// URL), NOPERM: the deployment is
// wrong, not down. These are reported apart from outages.
bool is_config_error(std::string_view e) {
  for (std::string_view marker : {"WRONGTYPE", "CROSSSLOT", "MOVED", "ASK ", "NOPERM", "WRONGPASS", "NOAUTH"})
    if (e.find(marker) != std::string_view::npos) return true;
  return false;
}

}  // namespace

// An admit's reply. A request-rate-only admit: one integer, the micro-tokens left (>= 0) or -1 - the
// micro-tokens the bucket had when it had too few; it committed unless an enforced bucket said no. With
// a slot: {committed, rate_ok, tokens, conc_ok, tenant in-flight, fleet_ok}. False for a reply of
// another shape.
bool parse_admit_reply(const redisReply *r, bool slot, bool rate_enforce, AdmitResult &res) {
  long long v[6] = {0, 1, 0, 1, 0, 1};
  if (!slot && r->type == REDIS_REPLY_INTEGER) {
    bool rate_ok = r->integer >= 0;
    v[0] = rate_ok || !rate_enforce;
    v[1] = rate_ok;
    v[2] = rate_ok ? r->integer : -1 - r->integer;
  } else if (slot && r->type == REDIS_REPLY_ARRAY && r->elements == 6) {
    for (size_t i = 0; i < 6; i++) v[i] = r->element[i]->type == REDIS_REPLY_INTEGER ? r->element[i]->integer : 0;
  } else {
    return false;
  }
  res.decided = true;
  res.committed = v[0] == 1;
  res.rate_ok = v[1] == 1;
  res.tokens_m = v[2];
  res.conc_ok = v[3] == 1;
  res.conc_count = v[4];
  res.fleet_ok = v[5] == 1;
  return true;
}

// {granted, tokens left, slots granted, live slots, Redis' TIME in us}, all integers (tenant_lease.lua).
bool parse_lease_reply(const redisReply *r, LeaseResult &res) {
  if (r->type != REDIS_REPLY_ARRAY || r->elements != 5) return false;
  long long v[5];
  for (size_t i = 0; i < 5; i++) {
    if (r->element[i]->type != REDIS_REPLY_INTEGER) return false;
    v[i] = r->element[i]->integer;
  }
  res.decided = true;
  res.granted_m = v[0];
  res.tokens_m = v[1];
  res.slots = v[2];
  res.conc_count = v[3];
  res.store_now_us = v[4];
  return true;
}

namespace {

void append_slot_id(std::string &cmd, const SlotId &id) {
  char b[16];
  std::memcpy(b, &id.hi, 8);
  std::memcpy(b + 8, &id.lo, 8);
  resp_bulk(cmd, std::string_view(b, 16));
}

}  // namespace

RedisUrl parse_redis_url(const std::string &url) {
  const std::string scheme = "redis://";
  if (url.rfind(scheme, 0) != 0) throw StoreError("store: expected redis://host:port/db");
  std::string rest = url.substr(scheme.size());
  RedisUrl u;
  auto at = rest.rfind('@');
  if (at != std::string::npos) {
    std::string userinfo = rest.substr(0, at);
    rest = rest.substr(at + 1);
    auto colon = userinfo.find(':');
    if (colon == std::string::npos) {
      u.password = userinfo;
    } else {
      u.user = userinfo.substr(0, colon);
      u.password = userinfo.substr(colon + 1);
    }
  }
  std::string hostport = rest, db;
  auto slash = rest.find('/');
  if (slash != std::string::npos) {
    hostport = rest.substr(0, slash);
    db = rest.substr(slash + 1);
  }
  std::string port;
  if (!hostport.empty() && hostport[0] == '[') {
    auto close = hostport.find(']');
    if (close == std::string::npos) throw StoreError("store: unterminated [ in the host of \"" + url + "\"");
    u.host = hostport.substr(1, close - 1);
    if (close + 1 < hostport.size()) {
      if (hostport[close + 1] != ':') throw StoreError("store: bad host in \"" + url + "\"");
      port = hostport.substr(close + 2);
    }
  } else {
    auto colon = hostport.rfind(':');
    if (colon != std::string::npos) {
      port = hostport.substr(colon + 1);
      hostport = hostport.substr(0, colon);
    }
    if (!hostport.empty()) u.host = hostport;
  }
  auto parse_int = [&](const std::string &s, int lo, int hi, const char *what) {
    int v = 0;
    auto r = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || r.ec != std::errc() || r.ptr != s.data() + s.size() || v < lo || v > hi)
      throw StoreError(std::string("store: bad ") + what + " \"" + s.substr(0, 32) + "\" in the redis URL");
    return v;
  };
  if (!port.empty()) u.port = parse_int(port, 1, 65535, "port");
  if (!db.empty()) u.db = parse_int(db, 0, 1 << 20, "database number");
  return u;
}

namespace {

// The stores of this process, flushed at exit: a worker that a preforking server recycles (gunicorn's
// max_requests, Puma's phased restart, a Node worker ending) may release its tickets and exit at once,
// without freeing its client; its releases must still reach Redis. Tried, not waited for: in a forked
// child the mutex may have been held by a parent thread at the fork, and exit must not hang on it.
std::mutex live_stores_mu;
std::vector<RedisStore *> live_stores;

void flush_live_stores() {
  std::unique_lock lock(live_stores_mu, std::defer_lock);
  for (int i = 0; i < 100 && !lock.try_lock(); i++) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (!lock.owns_lock()) return;
  for (RedisStore *s : live_stores) s->flush_for_exit();
}

void register_store(RedisStore *s) {
  static const bool at_exit = std::atexit(flush_live_stores) == 0;
  (void)at_exit;
  std::lock_guard lock(live_stores_mu);
  live_stores.push_back(s);
}

void unregister_store(RedisStore *s) {
  std::lock_guard lock(live_stores_mu);
  live_stores.erase(std::remove(live_stores.begin(), live_stores.end(), s), live_stores.end());
}

}  // namespace

RedisStore::RedisStore(const Policy &p, RedisUrl url)
    : opt_(p.redis),
      url_(std::move(url)),
      prefix_(p.prefix),
      generation_(fork_generation()),
      fleet_reports_(p.leases() && p.fleet.has_value()),
      breaker_(BreakerOptions{p.redis.breaker_window_ms * 1000, p.redis.breaker_min_calls,
                              p.redis.breaker_failure_ratio, p.redis.breaker_open_ms * 1000}) {
  admit_script_ = {scripts::tenant_admit, sha1_hex(scripts::tenant_admit)};
  release_script_ = {scripts::release, sha1_hex(scripts::release)};
  flags_script_ = {scripts::read_flags, sha1_hex(scripts::read_flags)};
  lease_script_ = {scripts::tenant_lease, sha1_hex(scripts::tenant_lease)};
  report_script_ = {scripts::fleet_report, sha1_hex(scripts::fleet_report)};
  admit_head_rate_ = evalsha_head(admit_script_.sha, 1, 4);
  admit_head_full_ = evalsha_head(admit_script_.sha, fleet_reports_ ? 4 : 3, 9);
  release_head_ = evalsha_head(release_script_.sha, 2, 2);
  // The I/O thread gives up a little before the deadline (a tenth of it, 200 us to 1 ms), so that the
  // woken caller has its answer within it, wake-up latency included.
  int64_t deadline = opt_.deadline_ms * 1000;
  deadline_us_ = deadline - std::clamp<int64_t>(deadline / 10, 200, 1000);
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) throw StoreError("store: eventfd failed");
  fds_.set(kWakeFdSlot, wake_fd_);
  conns_.resize(static_cast<size_t>(opt_.connections));
  lanes_ = lanes_wanted_ = conns_.size();
  lanes_in_use_.store(static_cast<uint32_t>(lanes_));
  io_ = std::thread([this] { run(); });
  register_store(this);
  // Give the first connection the connect time-out to come up, so that the first requests of a fresh
  // process are decided by Redis. An unreachable Redis is not an error: the fallback decides.
  std::unique_lock lock(ready_mu_);
  ready_cv_.wait_for(lock, std::chrono::milliseconds(opt_.connect_timeout_ms),
                     [this] { return ever_connected_.load(); });
}

RedisStore::~RedisStore() {
  if (in_forked_child()) {
    // The I/O thread exists only in the parent: nothing to join. Close what we inherited.
    abandon_after_fork();
    io_.detach();
    return;
  }
  unregister_store(this);
  stop_.store(true);
  uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof one);
  if (io_.joinable()) io_.join();
  fds_.clear(kWakeFdSlot);
  close(wake_fd_);
  for (Call *c : pool_) delete c;
  free_direct();
}

void RedisStore::abandon_after_fork() {
  fds_.close_all();
}

void RedisStore::flush_for_exit() {
  if (in_forked_child()) return;  // a parent's store: its I/O thread is not here
  uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof one);
  // Every call queued or on the wire is answered (or times out) within its deadline; releases have
  // a second. Calls abandoned to a stopped Redis may never be answered: give up after that long.
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max<int64_t>(1000, opt_.deadline_ms));
  // An open breaker drops releases anyway (their slots heal after ttl_s): nothing to wait for then.
  while (outstanding_.load(std::memory_order_acquire) > 0 && breaker_.closed() &&
         std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::microseconds(200));
}

void RedisStore::free_direct() {
  if (!direct_) return;
  fds_.clear(kDirectFdSlot);
  redisFree(direct_);
  direct_ = nullptr;
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
    // Release: the caller reads result_ after it sees kDone. Wake it only if it went to sleep.
    if (state_.exchange(kDone, std::memory_order_acq_rel) == kSleeping) futex(&state_, FUTEX_WAKE, 1);
  }
  AdmitResult wait() {
    uint32_t s = state_.load(std::memory_order_acquire);
    while (s != kDone) {
      if (s == kWaiting && !state_.compare_exchange_strong(s, kSleeping, std::memory_order_acquire)) continue;
      futex(&state_, FUTEX_WAIT, kSleeping);  // returns at once if the word is no longer kSleeping
      s = state_.load(std::memory_order_acquire);
    }
    state_.store(kWaiting, std::memory_order_relaxed);
    return std::move(result_);
  }

 private:
  static constexpr uint32_t kWaiting = 0, kSleeping = 1, kDone = 2;
  std::atomic<uint32_t> state_{kWaiting};
  AdmitResult result_;
};

// A call's command is formatted here first, then swapped into a pooled call's buffer: neither side
// allocates once both have grown to a command's size.
thread_local std::string tl_cmd;

// Its address names the submitting thread; tl_io_of, the store whose I/O thread this is (what an
// I/O thread submits itself, a late slot's release or a callback's next admit, names no caller).
thread_local const char tl_submitter = 0;
thread_local const void *tl_io_of = nullptr;

}  // namespace

AdmitResult RedisStore::admit(const AdmitOp &op) {
  // A lone blocking caller makes its round trip itself: the hop to the I/O thread and back is two
  // wake-ups on a path where nothing else is waiting to share the write. Only when nothing at all is
  // outstanding on the I/O thread (so that this admit overtakes no release of this thread's), while one
  // thread submits (several spread over the connections instead), and for a request-rate-only admit (a
  // late reply of a slot admit must give its slot back, which the I/O thread does).
  if (!op.conc && !op.fleet && lanes_in_use_.load(std::memory_order_relaxed) == 1 &&
      outstanding_.load(std::memory_order_acquire) == 0 && direct_ok_.load(std::memory_order_relaxed) &&
      breaker_.closed() && !in_forked_child()) {
    std::unique_lock lock(direct_mu_, std::try_to_lock);
    if (lock.owns_lock()) {
      // Decided by Redis, or undecided with its reason (the fallback decides, and the next admit takes
      // the I/O thread).
      AdmitResult r;
      direct_admit(op, r);
      return r;
    }
  }
  thread_local SyncWaiter waiter;
  admit_async(op, &waiter);
  return waiter.wait();
}

// direct_mu_ held. False with r.reason set when Redis did not answer in time (the direct path is then
// off until the I/O thread sees Redis answer an admit, so that the breaker judges what follows).
bool RedisStore::direct_admit(const AdmitOp &op, AdmitResult &r) {
  int64_t sent_us = now_us();
  auto give_up = [&](FailReason why) {
    free_direct();
    direct_ok_.store(false, std::memory_order_relaxed);
    failures_[static_cast<size_t>(why)].fetch_add(1, std::memory_order_relaxed);
    if (why == FailReason::timeout) {
      // No byte within the deadline: let the I/O thread judge it (it opens the breaker unless its own
      // connections are answering), so that the next admit does not wait a deadline too.
      direct_silent_since_.store(sent_us, std::memory_order_release);
      uint64_t one = 1;
      (void)!write(wake_fd_, &one, sizeof one);
      // It is idle in poll: wait (briefly) for its verdict, so that this caller's next admit sees it.
      for (int i = 0; i < 400 && direct_silent_since_.load(std::memory_order_acquire) != 0; i++)
        std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    r = AdmitResult{};
    r.reason = why;
    return false;
  };
  timeval deadline{static_cast<time_t>(opt_.deadline_ms / 1000),
                   static_cast<suseconds_t>(opt_.deadline_ms % 1000) * 1000};
  auto command = [&](std::initializer_list<std::string_view> args) -> redisReply * {
    std::string cmd = format(std::vector<std::string_view>(args));
    redisAppendFormattedCommand(direct_, cmd.data(), cmd.size());
    void *reply = nullptr;
    return redisGetReply(direct_, &reply) == REDIS_OK ? static_cast<redisReply *>(reply) : nullptr;
  };
  if (!direct_) {
    timeval connect{static_cast<time_t>(opt_.connect_timeout_ms / 1000),
                    static_cast<suseconds_t>(opt_.connect_timeout_ms % 1000) * 1000};
    direct_ = redisConnectWithTimeout(url_.host.c_str(), url_.port, connect);
    if (direct_ && direct_->fd >= 0) fds_.set(kDirectFdSlot, direct_->fd);
    if (!direct_ || direct_->err || redisSetTimeout(direct_, deadline) != REDIS_OK)
      return give_up(FailReason::connection);
    std::vector<std::vector<std::string_view>> setup;
    if (!url_.password.empty())
      setup.push_back(url_.user.empty() ? std::vector<std::string_view>{"AUTH", url_.password}
                                        : std::vector<std::string_view>{"AUTH", url_.user, url_.password});
    std::string db = num(url_.db);
    if (url_.db != 0) setup.push_back({"SELECT", db});
    for (const auto &args : setup) {
      std::string cmd = format(args);
      redisAppendFormattedCommand(direct_, cmd.data(), cmd.size());
      void *reply = nullptr;
      if (redisGetReply(direct_, &reply) != REDIS_OK) return give_up(FailReason::timeout);
      bool error = static_cast<redisReply *>(reply)->type == REDIS_REPLY_ERROR;
      freeReplyObject(reply);
      if (error) return give_up(FailReason::config);  // the I/O thread's connections report it as such
    }
  }
  std::string &cmd = tl_cmd;
  format_admit(op, cmd);
  sent_us = now_us();
  for (int attempt = 0; attempt < 2; attempt++) {
    redisAppendFormattedCommand(direct_, cmd.data(), cmd.size());
    void *reply = nullptr;
    if (redisGetReply(direct_, &reply) != REDIS_OK)
      return give_up(direct_->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK)
                         ? FailReason::timeout
                         : FailReason::connection);
    auto *rep = static_cast<redisReply *>(reply);
    bool noscript = rep->type == REDIS_REPLY_ERROR && std::string_view(rep->str, rep->len).rfind("NOSCRIPT", 0) == 0;
    bool ok = !noscript && parse_admit_reply(rep, false, op.rate && op.rate_enforce, r);
    freeReplyObject(rep);
    if (ok) return true;
    if (!noscript || attempt) return give_up(FailReason::error);
    noscript_reloads_.fetch_add(1, std::memory_order_relaxed);
    redisReply *loaded = command({"SCRIPT", "LOAD", admit_script_.body});
    if (!loaded) return give_up(FailReason::timeout);
    freeReplyObject(loaded);
  }
  return give_up(FailReason::error);
}

std::string_view RedisStore::tenant_key(const TenantKey &t, std::string_view limiter) const {
  thread_local std::string key;
  key.assign(prefix_);
  key.append(":{", 2);
  t.append_encoded(key);
  key.append("}:", 2);
  key.append(limiter);
  return key;
}

RedisStore::Call *RedisStore::take_call(Kind kind, int64_t deadline_us) {
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
  c->slot = c->rate_enforce = c->retried = c->abandoned = false;
  c->deadline_us = deadline_us;
  c->done = nullptr;
  c->lease_done = nullptr;
  c->report_done = nullptr;
  c->held = ReleaseOp{};
  c->cmd.swap(tl_cmd);
  return c;
}

void RedisStore::admit_async(const AdmitOp &op, AdmitCompletion *done) {
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
                       : waiting_.load(std::memory_order_relaxed) >= waiting_cap_.load(std::memory_order_relaxed)
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
  c->rate_enforce = op.rate && op.rate_enforce;
  c->affinity = std::hash<std::string_view>{}(op.tenant.view());
  c->held.tenant = op.tenant;
  c->held.slot = op.slot;
  c->held.conc = op.conc;
  c->held.fleet = op.fleet;
  waiting_.fetch_add(1, std::memory_order_relaxed);
  submit(c);
}

void RedisStore::format_admit(const AdmitOp &op, std::string &cmd) const {
  // A request-rate-only admit sends one key and four arguments; one with a slot sends everything.
  auto mode = [](bool on, bool enforce) { return !on ? '-' : enforce ? 'E' : 'D'; };
  const char limiters[3] = {mode(op.rate, op.rate_enforce), mode(op.conc, op.conc_enforce),
                            mode(op.fleet, op.fleet_enforce)};
  bool slot = op.conc || op.fleet;
  cmd.assign(slot ? admit_head_full_ : admit_head_rate_);
  resp_bulk(cmd, tenant_key(op.tenant, "rate"));
  if (slot) {
    resp_bulk(cmd, tenant_key(op.tenant, "conc"));
    resp_bulk(cmd, fleet_key_);
    if (fleet_reports_) resp_bulk(cmd, fleet_reports_key());
  }
  resp_bulk(cmd, std::string_view(limiters, 3));
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
}

void RedisStore::release(const ReleaseOp &op) {
  int64_t now = now_us();
  if (in_forked_child()) return;  // the parent's slots: they heal after ttl_s
  char id[16];
  std::memcpy(id, &op.slot.hi, 8);
  std::memcpy(id + 8, &op.slot.lo, 8);
  const char flags[2] = {op.conc ? '1' : '0', op.fleet ? '1' : '0'};
  std::string &cmd = tl_cmd;
  cmd.assign(release_head_);
  resp_bulk(cmd, tenant_key(op.tenant, "conc"));
  resp_bulk(cmd, fleet_key_);
  resp_bulk(cmd, std::string_view(flags, 2));
  resp_bulk(cmd, std::string_view(id, 16));
  Call *c = take_call(Kind::release, now + std::max<int64_t>(1000, opt_.deadline_ms) * 1000);
  c->affinity = std::hash<std::string_view>{}(op.tenant.view());
  submit(c);
}

void RedisStore::format_lease(const LeaseOp &op, std::string &cmd) const {
  size_t wanted = op.slots ? op.wanted.size() : 0;
  cmd = evalsha_head(lease_script_.sha, 2, static_cast<int>(9 + op.released.size() + wanted));
  resp_bulk(cmd, tenant_key(op.tenant, "rate"));
  resp_bulk(cmd, tenant_key(op.tenant, "conc"));
  const char asks[2] = {op.tokens ? 'T' : '-', op.slots ? 'S' : '-'};
  resp_bulk(cmd, std::string_view(asks, 2));
  resp_int(cmd, op.rate_m);
  resp_int(cmd, op.burst_m);
  resp_int(cmd, op.min_m);
  resp_int(cmd, op.want_m);
  resp_int(cmd, op.give_back_m);
  resp_int(cmd, op.conc_limit);
  resp_int(cmd, op.conc_ttl_us);
  resp_int(cmd, static_cast<int64_t>(op.released.size()));
  for (const SlotId &id : op.released) append_slot_id(cmd, id);
  for (size_t i = 0; i < wanted; i++) append_slot_id(cmd, op.wanted[i]);
}

void RedisStore::lease_async(const LeaseOp &op, LeaseCompletion *done) {
  int64_t now = now_us();
  FailReason at_once = in_forked_child()    ? FailReason::error
                       : !breaker_.closed() ? open_reason()
                       : waiting_.load(std::memory_order_relaxed) >= waiting_cap_.load(std::memory_order_relaxed)
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
  waiting_.fetch_add(1, std::memory_order_relaxed);
  submit(c);
}

void RedisStore::end_lease(const LeaseOp &op) {
  int64_t now = now_us();
  if (in_forked_child() || !op.gives_back()) return;  // the parent's lease is the parent's
  if (!breaker_.closed()) {
    release_errors_.fetch_add(1, std::memory_order_relaxed);  // stays debited; the slots heal after ttl_s
    return;
  }
  LeaseOp back = op;
  back.tokens = back.slots = false;
  format_lease(back, tl_cmd);
  Call *c = take_call(Kind::lease_end, now + std::max<int64_t>(1000, opt_.deadline_ms) * 1000);
  c->affinity = std::hash<std::string_view>{}(op.tenant.view());
  submit(c);
}

void RedisStore::fleet_report_async(const FleetReportOp &op, FleetReportCompletion *done) {
  int64_t now = now_us();
  if (in_forked_child() || !breaker_.closed()) {
    done->complete(FleetReportResult{});
    return;
  }
  std::string &cmd = tl_cmd;
  cmd = evalsha_head(report_script_.sha, 2, 4);
  resp_bulk(cmd, fleet_reports_key());
  resp_bulk(cmd, fleet_key_);
  resp_bulk(cmd, op.client);
  resp_int(cmd, op.in_flight);
  resp_int(cmd, op.expires_us);
  resp_int(cmd, op.fleet_ttl_us);
  Call *c = take_call(Kind::report, now + deadline_us_);
  c->report_done = done;
  c->affinity = std::hash<std::string_view>{}(fleet_key_);
  submit(c);
}

void RedisStore::submit(Call *c) {
  bool was_empty;
  const void *self = &tl_submitter;
  bool counted = tl_io_of != this;
  {
    std::lock_guard lock(queue_mu_);
    was_empty = queue_.empty();
    queue_.push_back(c);
    if (counted && self != last_submitter_) {
      if (last_submitter_) submitter_changes_++;
      last_submitter_ = self;
    }
  }
  if (was_empty) {
    uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof one);
  }
}

StoreStats RedisStore::stats() const {
  StoreStats s;
  for (size_t i = 0; i < s.failures.size(); i++) s.failures[i] = failures_[i].load();
  s.release_errors = release_errors_.load();
  s.reconnects = reconnects_.load();
  s.noscript_reloads = noscript_reloads_.load();
  s.connections_in_use = lanes_in_use_.load();
  s.waiting = waiting_.load();
  int64_t cap = waiting_cap_.load();
  s.waiting_cap = cap == INT64_MAX ? 0 : cap;
  s.breaker = breaker_.state();
  return s;
}

// ------------------------------------------------------------------------------------ I/O thread

void RedisStore::fail_call(Call *c, FailReason why) {
  if (c->kind == Kind::admit && c->done) {
    failures_[static_cast<size_t>(why)].fetch_add(1, std::memory_order_relaxed);
    AdmitResult r;
    r.reason = why;
    complete(c, std::move(r));
  } else if (c->kind == Kind::lease && c->lease_done) {
    failures_[static_cast<size_t>(why)].fetch_add(1, std::memory_order_relaxed);
    LeaseResult r;
    r.reason = why;
    complete_lease(c, std::move(r));
  } else if (c->kind == Kind::report && c->report_done) {
    FleetReportCompletion *done = c->report_done;
    c->report_done = nullptr;
    done->complete(FleetReportResult{});
  } else if (gives_back(c->kind)) {
    release_errors_.fetch_add(1, std::memory_order_relaxed);
  }
}

void RedisStore::complete(Call *c, AdmitResult &&r) {
  waiting_.fetch_sub(1, std::memory_order_relaxed);
  AdmitCompletion *done = c->done;
  c->done = nullptr;
  done->complete(std::move(r));
}

void RedisStore::complete_lease(Call *c, LeaseResult &&r) {
  waiting_.fetch_sub(1, std::memory_order_relaxed);
  LeaseCompletion *done = c->lease_done;
  c->lease_done = nullptr;
  done->complete(std::move(r));
}

void RedisStore::trip(FailReason why, int64_t now) {
  breaker_.trip(now);
  for (Conn &conn : conns_) {
    for (Call *c : conn.inflight) {
      if (c->abandoned || !(awaited(c->kind) || c->kind == Kind::report)) continue;
      c->abandoned = true;  // its reply, if it ever comes, is read and dropped
      fail_call(c, why);
    }
  }
}

bool RedisStore::any_ready() const {
  for (const Conn &conn : conns_)
    if (conn.state == Conn::State::ready) return true;
  return false;
}

bool RedisStore::any_answering(int64_t since_us) const {
  for (const Conn &conn : conns_)
    if (conn.state == Conn::State::ready && conn.last_read_us > since_us) return true;
  return false;
}

void RedisStore::send_probe(int64_t now) {
  for (Conn &conn : conns_) {
    if (conn.state != Conn::State::ready) continue;
    if (!breaker_.probe_due(now)) return;
    tl_cmd = format({"PING"});
    // The probe may take the whole open period: it asks whether Redis answers at all, not how fast.
    append(conn, take_call(Kind::probe, now + std::max<int64_t>(opt_.breaker_open_ms, opt_.deadline_ms) * 1000));
    return;
  }
}

void RedisStore::measure(int64_t now) {
  int64_t elapsed = now - rate_since_us_;
  if (elapsed < kRateWindowUs) return;
  if (replies_ > 0 || waiting_.load(std::memory_order_relaxed) > 0) {
    double sample = static_cast<double>(replies_) * 1e6 / static_cast<double>(elapsed);
    reply_rate_ = reply_rate_ == 0 ? sample : 0.7 * reply_rate_ + 0.3 * sample;
  }
  replies_ = 0;
  rate_since_us_ = now;
  // Far from the deadline there is nothing to bound: a rate measured below saturation says what callers
  // asked for, not what Redis could answer.
  int64_t cap = INT64_MAX;
  if (latency_us_ >= static_cast<double>(deadline_us_) / 4)
    cap = std::max<int64_t>(kMinWaiting, static_cast<int64_t>(reply_rate_ * static_cast<double>(deadline_us_) / 1e6));
  waiting_cap_.store(cap, std::memory_order_relaxed);
}

RedisStore::Call *RedisStore::setup_call(std::initializer_list<std::string_view> args, int64_t now) {
  tl_cmd = format(std::vector<std::string_view>(args));
  return take_call(Kind::setup, now + opt_.connect_timeout_ms * 1000);
}

void RedisStore::start_connect(Conn &conn, int64_t now) {
  redisContext *ctx = redisConnectNonBlock(url_.host.c_str(), url_.port);
  if (!ctx || ctx->err) {
    if (ctx) redisFree(ctx);
    conn.state = Conn::State::down;
    conn.reconnect_at_us = now + conn.backoff_ms * 1000;
    conn.backoff_ms = std::min<int64_t>(conn.backoff_ms * 2, 1000);
    return;
  }
  conn.ctx = ctx;
  fds_.set(conn_fd_slot(conn), ctx->fd);
  conn.state = Conn::State::connecting;
  conn.connect_deadline_us = now + opt_.connect_timeout_ms * 1000;
}

// Once per store: the reply says what is wrong (WRONGPASS, NOPERM, a SELECT out of range); the
// password never appears in it, nor here.
void RedisStore::report_refused_setup(std::string_view err) {
  if (refused_reported_.exchange(true)) return;
  std::string first(err.substr(0, 200));
  for (char &ch : first)
    if (static_cast<unsigned char>(ch) < 0x20 || static_cast<unsigned char>(ch) >= 0x7f) ch = '?';
  std::fprintf(stderr,
               "floodwall: Redis at %s:%d refused the connection's setup (%s); every decision is the fallback's "
               "until it accepts (check the URL's user, password and database)\n",
               url_.host.c_str(), url_.port, first.c_str());
}

void RedisStore::on_connected(Conn &conn, int64_t now) {
  conn.state = Conn::State::ready;
  conn.refused = false;
  conn.backoff_ms = 50;
  // Pipelined ahead of any request on this connection, so every EVALSHA after them finds its script.
  if (!url_.password.empty()) {
    if (url_.user.empty())
      append(conn, setup_call({"AUTH", url_.password}, now));
    else
      append(conn, setup_call({"AUTH", url_.user, url_.password}, now));
  }
  if (url_.db != 0) append(conn, setup_call({"SELECT", num(url_.db)}, now));
  for (const Script *s : scripts()) append(conn, setup_call({"SCRIPT", "LOAD", s->body}, now));
  // Counted per connection: the first connect of each of a client's connections is not a reconnect.
  if (conn.was_ready) reconnects_.fetch_add(1, std::memory_order_relaxed);
  conn.was_ready = true;
  ever_connected_.store(true);
  {
    std::lock_guard lock(ready_mu_);
    ready_cv_.notify_all();
  }
}

void RedisStore::fail_conn(Conn &conn, FailReason why, int64_t now) {
  if (conn.ctx) {
    fds_.clear(conn_fd_slot(conn));
    redisFree(conn.ctx);
    conn.ctx = nullptr;
    for (Call *c : conn.inflight) {
      if (c->kind == Kind::release) {
        if (c->abandoned)
          recycle(c);  // copied when it timed out
        else
          keep_release(c);
        continue;
      }
      if (c->kind == Kind::admit && c->slot) {
        // Its reply never came: it may have taken its slot. Giving back one it never took is harmless.
        ReleaseOp back = c->held;
        if (back.conc || back.fleet) release(back);
      }
      if (!c->abandoned) {
        if (awaited(c->kind)) breaker_.record(true, now);
        if (c->kind == Kind::probe) breaker_.probe_result(false, now);
        fail_call(c, why);
      }
      recycle(c);
    }
  }
  conn.inflight.clear();
  conn.releases_done = conn.releases_sent;
  conn.want_write = conn.partial = false;
  conn.awaiting = 0;
  conn.state = Conn::State::down;
  conn.reconnect_at_us = now + conn.backoff_ms * 1000;
  conn.backoff_ms = std::min<int64_t>(conn.backoff_ms * 2, 1000);
  if (!any_ready()) trip(why, now);  // nothing left to ask
}

void RedisStore::append(Conn &conn, Call *c) {
  c->appended_us = now_us();
  if (conn.inflight.empty()) conn.quiet_since_us = c->appended_us;
  redisAppendFormattedCommand(conn.ctx, c->cmd.data(), c->cmd.size());
  conn.inflight.push_back(c);
  conn.want_write = true;
  if (gives_back(c->kind)) conn.releases_sent++;
}

void RedisStore::dispatch(Call *c, int64_t now) {
  // One tenant's calls always take the same connection (while it is up and the lanes stay), so that a
  // release followed by an admit of that tenant reaches Redis in that order.
  size_t first = c->affinity % lanes_;
  for (size_t i = 0; i < conns_.size(); i++) {
    Conn &conn = conns_[(first + i) % conns_.size()];
    if (conn.state == Conn::State::ready) {
      append(conn, c);
      return;
    }
  }
  if (c->kind == Kind::release) {
    keep_release(c);
    return;
  }
  if (awaited(c->kind)) breaker_.trip(now);  // no connection is up
  fail_call(c, FailReason::connection);
  recycle(c);
}

void RedisStore::keep_release(Call *c) {
  if (unsent_.size() >= 65536) {
    release_errors_.fetch_add(1, std::memory_order_relaxed);
    recycle(c);
    return;
  }
  c->abandoned = false;
  unsent_.push_back(c);
}

RedisStore::Call *RedisStore::copy_release(const Call *c) {
  tl_cmd = c->cmd;
  Call *n = take_call(Kind::release, now_us() + std::max<int64_t>(1000, opt_.deadline_ms) * 1000);
  n->affinity = c->affinity;
  return n;
}

void RedisStore::choose_lanes(bool several, int64_t now) {
  next_lane_check_us_ = now + kLaneWindowUs;
  size_t want = lanes_;
  if (several) {
    single_windows_ = 0;
    want = conns_.size();
  } else {
    single_windows_ = std::min(single_windows_ + 1, kSingleWindows);
    if (single_windows_ == kSingleWindows) want = 1;
  }
  if (want == lanes_ || lanes_wanted_ != lanes_ || now < retry_lanes_at_us_) return;
  lanes_wanted_ = want;
  for (Conn &conn : conns_) conn.drain_to = conn.releases_sent;
  // The calls that move wait at most half their deadline for the releases ahead of them.
  switch_by_us_ = now + deadline_us_ / 2;
}

void RedisStore::settle_lanes(std::vector<Call *> &batch, int64_t now) {
  bool drained = true;
  for (const Conn &conn : conns_) drained = drained && conn.releases_done >= conn.drain_to;
  if (drained) {
    lanes_ = lanes_wanted_;
    lanes_in_use_.store(static_cast<uint32_t>(lanes_), std::memory_order_relaxed);
    give_ups_ = 0;
  } else if (now < switch_by_us_ && !stop_.load(std::memory_order_relaxed)) {
    return;  // still draining
  } else {
    // The releases did not come back in time (a stalled Redis, a deep pipeline): stay, and try again
    // after 2, 4, ... 64 windows, so that a change that cannot happen does not hold calls every window.
    lanes_wanted_ = lanes_;
    give_ups_ = std::min(give_ups_ + 1, 6);
    retry_lanes_at_us_ = now + (kLaneWindowUs << give_ups_);
  }
  batch.insert(batch.begin(), parked_.begin(), parked_.end());
  parked_.clear();
}

void RedisStore::flush(Conn &conn, int64_t now) {
  int done = 0;
  if (redisBufferWrite(conn.ctx, &done) == REDIS_ERR) {
    fail_conn(conn, FailReason::connection, now);
    return;
  }
  conn.want_write = !done;
  conn.partial = !done;
  if (done) conn.awaiting = conn.inflight.size();
}

void RedisStore::read(Conn &conn, int64_t now) {
  if (redisBufferRead(conn.ctx) == REDIS_ERR) {
    fail_conn(conn, FailReason::connection, now);
    return;
  }
  for (;;) {
    void *reply = nullptr;
    if (redisGetReplyFromReader(conn.ctx, &reply) == REDIS_ERR) {
      fail_conn(conn, FailReason::error, now);
      return;
    }
    if (!reply) return;
    auto *r = static_cast<redisReply *>(reply);
    if (conn.inflight.empty()) {  // cannot happen: every reply has its call
      freeReplyObject(r);
      fail_conn(conn, FailReason::error, now);
      return;
    }
    Call *c = conn.inflight.front();
    conn.inflight.pop_front();
    if (conn.awaiting) conn.awaiting--;
    if (gives_back(c->kind)) conn.releases_done++;
    handle(conn, c, r, now);
    freeReplyObject(r);
    if (conn.refused) {
      // Every call behind the refused setup ran as someone else (Redis' default user, database 0) or
      // not at all: none of them is an answer. Their callers get the fallback, counted as config.
      fail_conn(conn, FailReason::config, now);
      return;
    }
  }
}

void RedisStore::finish_admit(Call *c, redisReply *r, int64_t now) {
  AdmitResult res;
  if (!parse_admit_reply(r, c->slot, c->rate_enforce, res)) {
    if (!c->abandoned) fail_call(c, FailReason::error);
    return;
  }
  bool committed = res.committed, conc_ok = res.conc_ok, fleet_ok = res.fleet_ok;
  answered(c->sent_us, now);
  if (c->abandoned) {
    // The caller was answered by the fallback long ago; if the late command took slots after all, give them back now.
    ReleaseOp back = c->held;
    back.conc = back.conc && committed && conc_ok;
    back.fleet = back.fleet && committed && fleet_ok;
    if (back.conc || back.fleet) release(back);
    return;
  }
  complete(c, std::move(res));
}

void RedisStore::answered(int64_t sent_us, int64_t now) {
  breaker_.record(false, now);  // Redis answered, late or not
  if (!direct_ok_.load(std::memory_order_relaxed)) direct_ok_.store(true, std::memory_order_relaxed);
  double latency = static_cast<double>(now - sent_us);
  latency_us_ = latency_us_ == 0 ? latency : latency_us_ + (latency - latency_us_) / 16;
}

void RedisStore::finish_lease(Call *c, redisReply *r, int64_t now) {
  LeaseResult res;
  if (!parse_lease_reply(r, res)) {
    if (!c->abandoned) fail_call(c, FailReason::error);
    return;
  }
  answered(c->sent_us, now);
  if (c->abandoned) {
    // The waiting requests were decided by the fallback long ago: what the late call took goes back now.
    LeaseOp back;
    back.tenant = c->lease.tenant;
    back.rate_m = c->lease.rate_m;
    back.burst_m = c->lease.burst_m;
    back.give_back_m = res.granted_m;
    for (int64_t i = 0; i < res.slots && i < static_cast<int64_t>(c->lease.wanted.size()); i++)
      back.released.push_back(c->lease.wanted[static_cast<size_t>(i)]);
    end_lease(back);
    return;
  }
  complete_lease(c, std::move(res));
}

void RedisStore::recycle(Call *c) {
  outstanding_.fetch_sub(1, std::memory_order_release);
  spent_.push_back(c);
}

void RedisStore::return_spent() {
  if (spent_.empty()) return;
  std::lock_guard lock(pool_mu_);
  for (Call *c : spent_) {
    if (pool_.size() < kPoolMax)
      pool_.push_back(c);
    else
      delete c;
  }
  spent_.clear();
}

void RedisStore::handle(Conn &conn, Call *c, redisReply *r, int64_t now) {
  replies_++;
  if (r->type == REDIS_REPLY_ERROR) {
    std::string_view err(r->str, r->len);
    if (err.rfind("NOSCRIPT", 0) == 0 && !c->retried && c->kind != Kind::setup) {
      // Redis restarted, failed over or ran SCRIPT FLUSH: load the scripts and send the call again.
      noscript_reloads_.fetch_add(1, std::memory_order_relaxed);
      c->retried = true;
      for (const Script *s : scripts()) append(conn, setup_call({"SCRIPT", "LOAD", s->body}, now));
      append(conn, c);
      return;
    }
    if (c->kind == Kind::setup) {
      // A wrong password must not pass for a working connection (it used to carry on as the default
      // user): the connection is closed, its calls fail as config errors, and it is said once.
      conn.refused = true;
      refused_.store(true, std::memory_order_relaxed);
      report_refused_setup(err);
      recycle(c);
      return;
    }
    // A configuration error means Redis answered: it is up, the deployment is wrong.
    bool config = is_config_error(err);
    if (awaited(c->kind)) breaker_.record(!config, now);
    if (c->kind == Kind::probe && !c->abandoned) breaker_.probe_result(config, now);
    if (c->kind == Kind::release && !config) {
      // Refused for now (READONLY, BUSY, LOADING): sent again later; ZREM is idempotent.
      unsent_at_us_ = now + 100'000;
      keep_release(c);
      return;
    }
    if (!c->abandoned) fail_call(c, config ? FailReason::config : FailReason::error);
    recycle(c);
    return;
  }
  // An answer past the setup: this connection's AUTH and SELECT were accepted.
  if (c->kind != Kind::setup && refused_.load(std::memory_order_relaxed))
    refused_.store(false, std::memory_order_relaxed);
  switch (c->kind) {
    case Kind::admit: finish_admit(c, r, now); break;
    case Kind::lease: finish_lease(c, r, now); break;
    case Kind::report:
      if (!c->abandoned && c->report_done) {
        FleetReportResult res;
        if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 && r->element[0]->type == REDIS_REPLY_INTEGER &&
            r->element[1]->type == REDIS_REPLY_INTEGER) {
          res.decided = true;
          res.others = r->element[0]->integer;
          res.set_live = r->element[1]->integer;
        }
        FleetReportCompletion *done = c->report_done;
        c->report_done = nullptr;
        done->complete(std::move(res));
      }
      break;
    case Kind::probe:
      if (!c->abandoned) breaker_.probe_result(true, now);
      break;
    case Kind::flags:
      if (r->type == REDIS_REPLY_ARRAY) {
        FleetModes m;
        m.fill(-1);
        for (size_t i = 0; i + 1 < r->elements; i += 2) {
          std::string_view field(r->element[i]->str ? r->element[i]->str : "", r->element[i]->len);
          std::string_view value(r->element[i + 1]->str ? r->element[i + 1]->str : "", r->element[i + 1]->len);
          for (int l = 1; l < kLimiterCount; l++) {
            if (field != limiter_name(static_cast<Limiter>(l))) continue;
            for (Mode mode : {Mode::enforce, Mode::dark, Mode::off})
              if (value == mode_name(mode)) m[static_cast<size_t>(l)] = static_cast<int8_t>(mode);
          }
        }
        for (size_t i = 0; i < m.size(); i++) fleet_modes_[i].store(m[i], std::memory_order_relaxed);
      }
      break;
    case Kind::release:
    case Kind::lease_end:
    case Kind::setup: break;
  }
  recycle(c);
}

void RedisStore::expire(int64_t now) {
  bool silent_admit = false;
  int64_t silent_since = INT64_MAX;  // when the oldest call that got no byte back was sent
  for (Conn &conn : conns_) {
    if (conn.state == Conn::State::connecting && now >= conn.connect_deadline_us) {
      fail_conn(conn, FailReason::timeout, now);
      continue;
    }
    if (conn.state != Conn::State::ready) continue;
    bool due = false;
    for (const Call *c : conn.inflight) due = due || (!c->abandoned && c->deadline_us <= now);
    if (!due) continue;
    // Before judging, take what arrived while this loop was busy elsewhere: silence is Redis', not ours.
    {
      const size_t before = conn.inflight.size();
      read(conn, now);
      if (conn.state != Conn::State::ready) continue;
      if (conn.inflight.size() != before) conn.quiet_since_us = conn.last_read_us = now;
    }
    // A call that missed its deadline while replies kept arriving was late because of the queue; one
    // that got no reply byte on its connection since it was sent, for its whole deadline, was not
    // answered at all. (Per call: a call is sent a little after its deadline starts, at submit.)
    bool probe_lost = false;
    for (Call *c : conn.inflight) {
      if (c->abandoned || c->deadline_us > now) continue;
      c->abandoned = true;  // its reply, if it ever comes, is read and dropped
      bool quiet = conn.quiet_since_us <= c->appended_us;
      if (awaited(c->kind)) {
        if (quiet) {
          breaker_.record(true, now);
          silent_admit = true;
          silent_since = std::min(silent_since, c->appended_us);
        }
        fail_call(c, FailReason::timeout);
      } else if (c->kind == Kind::release) {
        keep_release(copy_release(c));
      } else if (gives_back(c->kind) || c->kind == Kind::report) {
        fail_call(c, FailReason::timeout);
      } else if (c->kind == Kind::probe) {
        breaker_.probe_result(false, now);
        probe_lost = true;
      }
    }
    // A connection that answers nothing for the whole open period, not even a probe, is dropped: a
    // half-open socket never recovers, and a new connection to a Redis that is back answers at once.
    if (probe_lost || silent(conn, now, std::max<int64_t>(opt_.breaker_open_ms, opt_.deadline_ms) * 1000))
      fail_conn(conn, FailReason::timeout, now);
  }
  // Redis answered nothing sent since: it went silent, and nobody waits for it any more.
  if (silent_admit && !any_answering(silent_since)) trip(FailReason::timeout, now);
}

void RedisStore::run() {
  // Wake at the deadline itself, not up to the default 50 us timer slack after it.
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  tl_io_of = this;
  std::vector<Call *> batch;
  std::vector<pollfd> fds;
  int64_t drain_until = 0;
  for (;;) {
    int64_t now = now_us();
    if (stop_.load()) {
      // Closing: send what callers already queued (releases above all) and wait briefly for the
      // replies, so that a process that exits cleanly leaves no slot held.
      if (drain_until == 0) drain_until = now + std::max<int64_t>(200, opt_.deadline_ms) * 1000;
      bool pending;
      {
        std::lock_guard lock(queue_mu_);
        pending = !queue_.empty() || !parked_.empty();
      }
      for (Conn &conn : conns_)
        for (Call *c : conn.inflight)
          pending = pending || (!c->abandoned && c->kind != Kind::flags && c->kind != Kind::probe);
      if (!pending || now >= drain_until) break;
    }
    for (Conn &conn : conns_)
      if (conn.state == Conn::State::down && now >= conn.reconnect_at_us) start_connect(conn, now);
    return_spent();
    bool window_over = now >= next_lane_check_us_, several = false, idle = false;
    {
      std::lock_guard lock(queue_mu_);
      batch.swap(queue_);
      if (window_over) {
        several = submitter_changes_ >= kSeveralChanges;
        idle = last_submitter_ == nullptr;
        submitter_changes_ = 0;
        last_submitter_ = nullptr;
      }
    }
    if (window_over) {
      if (idle)
        next_lane_check_us_ = now + kLaneWindowUs;  // no caller: the lanes stay as they are
      else
        choose_lanes(several, now);
    }
    if (int64_t since = direct_silent_since_.exchange(0, std::memory_order_acquire); since && !any_answering(since))
      trip(FailReason::timeout, now);
    if (lanes_wanted_ != lanes_) settle_lanes(batch, now);
    if (!unsent_.empty() && breaker_.closed() && any_ready() && lanes_wanted_ == lanes_ && now >= unsent_at_us_) {
      std::deque<Call *> again;
      again.swap(unsent_);
      for (Call *c : again) {
        c->deadline_us = now + std::max<int64_t>(1000, opt_.deadline_ms) * 1000;
        dispatch(c, now);
      }
    }
    for (Call *c : batch) {
      if (c->kind == Kind::release && !breaker_.closed()) {
        keep_release(c);
      } else if ((awaited(c->kind) || c->kind == Kind::report) && !breaker_.closed()) {  // just before it opened
        fail_call(c, open_reason());
        recycle(c);
      } else if (lanes_wanted_ != lanes_ && moves(c))
        parked_.push_back(c);
      else
        dispatch(c, now);
    }
    batch.clear();
    if (now >= next_flags_us_) {
      next_flags_us_ = now + opt_.flags_poll_ms * 1000;
      if (breaker_.closed()) {
        tl_cmd = format({"EVALSHA", flags_script_.sha, "1", flags_key()});
        dispatch(take_call(Kind::flags, now + std::max<int64_t>(1000, opt_.deadline_ms) * 1000), now);
      }
    }
    send_probe(now);
    measure(now);
    for (Conn &conn : conns_)
      if (conn.state == Conn::State::ready && should_flush(conn)) flush(conn, now);

    // Sleep until something happens or the nearest deadline.
    int64_t wake_at = std::min(next_flags_us_, now + 100'000);
    if (any_ready()) wake_at = std::min(wake_at, breaker_.next_probe_us());
    if (lanes_wanted_ != lanes_) wake_at = std::min(wake_at, switch_by_us_);
    fds.clear();
    fds.push_back({wake_fd_, POLLIN, 0});
    for (Conn &conn : conns_) {
      if (conn.state == Conn::State::down) {
        wake_at = std::min(wake_at, conn.reconnect_at_us);
        fds.push_back({-1, 0, 0});
        continue;
      }
      short ev = conn.state == Conn::State::connecting
                     ? POLLOUT
                     : static_cast<short>(POLLIN | (should_flush(conn) ? POLLOUT : 0));
      fds.push_back({conn.ctx->fd, ev, 0});
      if (conn.state == Conn::State::connecting) wake_at = std::min(wake_at, conn.connect_deadline_us);
      for (Call *c : conn.inflight)
        if (!c->abandoned) wake_at = std::min(wake_at, c->deadline_us);
    }
    int64_t wait_us = std::max<int64_t>(0, wake_at - now);
    timespec timeout{static_cast<time_t>(wait_us / 1'000'000), static_cast<long>(wait_us % 1'000'000) * 1000};
    ppoll(fds.data(), fds.size(), &timeout, nullptr);
    now = now_us();
    if (fds[0].revents & POLLIN) {
      uint64_t n;
      (void)!::read(wake_fd_, &n, sizeof n);
    }
    for (size_t i = 0; i < conns_.size(); i++) {
      Conn &conn = conns_[i];
      short rev = fds[i + 1].revents;
      if (conn.state == Conn::State::down || !rev) continue;
      if (conn.state == Conn::State::connecting) {
        int err = 0;
        socklen_t len = sizeof err;
        getsockopt(conn.ctx->fd, SOL_SOCKET, SO_ERROR, &err, &len);
        if (err || (rev & (POLLERR | POLLHUP)))
          fail_conn(conn, FailReason::connection, now);
        else
          on_connected(conn, now);
        continue;
      }
      if (rev & POLLIN) conn.quiet_since_us = conn.last_read_us = now;
      if (rev & (POLLIN | POLLERR | POLLHUP)) read(conn, now);
      if (conn.state == Conn::State::ready && (rev & POLLOUT)) flush(conn, now);
    }
    expire(now);
  }
  // Shutting down: nobody may wait forever on a call of ours.
  {
    std::lock_guard lock(queue_mu_);
    batch.swap(queue_);
  }
  batch.insert(batch.begin(), parked_.begin(), parked_.end());
  parked_.clear();
  batch.insert(batch.end(), unsent_.begin(), unsent_.end());
  unsent_.clear();
  for (Call *c : batch) {
    fail_call(c, FailReason::connection);
    recycle(c);
  }
  for (Conn &conn : conns_) {
    for (Call *c : conn.inflight) {
      if (!c->abandoned) fail_call(c, FailReason::connection);
      recycle(c);
    }
    conn.inflight.clear();
    fds_.clear(conn_fd_slot(conn));
    if (conn.ctx) redisFree(conn.ctx);
    conn.ctx = nullptr;
  }
  return_spent();
}

}  // namespace floodwall
