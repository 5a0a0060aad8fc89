// The Redis store's direct path (direct_path.hpp): a blocking caller makes its round trips on its own connection.
#include <hiredis/hiredis.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <thread>

#include "stores/redis/redis_store_internal.hpp"
#include "stores/redis/resp.hpp"

namespace floodwall {

// AUTH and SELECT, as a blocking connection of this store's sends them first (the direct path's, the
// admin API's).
std::vector<std::string> RedisIo::setup_commands() const {
  std::vector<std::string> out;
  if (!url_.password.empty())
    out.push_back(url_.user.empty() ? resp_format({"AUTH", url_.password})
                                    : resp_format({"AUTH", url_.user, url_.password}));
  if (url_.db != 0) out.push_back(resp_format({"SELECT", resp_num(url_.db)}));
  return out;
}

thread_local DirectConn *DirectPath::tl_unread_on = nullptr;
thread_local bool DirectPath::tl_holds = false;
thread_local int64_t DirectPath::tl_io_release_us = INT64_MIN / 2;

int DirectPath::fd_slot(const DirectConn &d) const {
  return RedisIo::kFirstDirectFdSlot + static_cast<int>(&d - conns_.data());
}

int64_t DirectPath::deadline() const {
  return RedisIo::now_us() + io_.opt_.deadline_ms * 1000;
}

void DirectPath::free_conn(DirectConn &d) {
  static_assert(RedisIo::kFirstDirectFdSlot + kConns <= InheritedFds::kMax, "a forked child closes every one");
  if (!d.conn) return;
  io_.fds_.clear(fd_slot(d));
  d.conn.reset();
  d.unread = 0;
}

void DirectPath::read_release_replies(DirectConn &d, int64_t deadline_us) {
  for (; d.conn && d.unread > 0; d.unread--) {
    redisReply *back = d.conn->next_blocking(deadline_us);
    if (!back) break;  // Redis is gone or silent: the slots go at their TTL
    if (back->type == REDIS_REPLY_ERROR) io_.release_errors_.fetch_add(1, std::memory_order_relaxed);
    freeReplyObject(back);
  }
}

void DirectPath::close_all(int64_t deadline_us) {
  for (DirectConn &d : conns_) {
    std::lock_guard lock(d.mu);
    read_release_replies(d, deadline_us);
    free_conn(d);
  }
}

void DirectPath::drain_for_exit(int64_t deadline_us) {
  for (DirectConn &d : conns_) {
    std::unique_lock lock(d.mu, std::try_to_lock);
    if (lock.owns_lock()) read_release_replies(d, deadline_us);
  }
}

void DirectPath::drop_if_closed(DirectConn &d, int64_t now) {
  // In use within the last 50 ms: Redis closes only connections idle for seconds (its `timeout`), and a
  // restart shows in the command's reply. Else one poll, which sees the peer's close without reading.
  if (!d.conn || now - d.used_us < 50'000) return;
  pollfd p{d.conn->fd(), POLLRDHUP, 0};
  if (poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL))) free_conn(d);
}

DirectConn &DirectPath::of_thread() {
  // One number per thread for every store, so that a thread keeps to its connection of each store however
  // it alternates between clients.
  static std::atomic<uint32_t> threads{0};
  thread_local uint32_t tl_thread = threads.fetch_add(1, std::memory_order_relaxed);
  return conns_[tl_thread % static_cast<uint32_t>(io_.opt_.direct_connections)];
}

bool DirectPath::on(int64_t in_flight) const {
  // Few callers: each its own round trip. Many: the I/O thread's pipeline, which batches them.
  return io_.opt_.direct_connections > 0 && in_flight <= io_.opt_.direct_connections &&
         ok_.load(std::memory_order_relaxed) && io_.breaker_.closed() && !io_.in_forked_child() && !tl_holds;
}

bool DirectPath::allowed(const AdmitOp &op, int64_t in_flight) const {
  if (!on(in_flight)) return false;
  bool quiet = io_.outstanding_.load(std::memory_order_acquire) == 0;
  // A cluster: a lone caller's request-rate-only admit (a redirected slot admit would have to give its slot
  // back on the node that took it, which the I/O thread does).
  if (io_.cluster_) return !op.conc && !op.fleet && io_.lanes_in_use_.load(std::memory_order_relaxed) == 1 && quiet;
  // Nothing of this thread's left on the I/O thread's side: its releases were written within a release's
  // deadline, or nothing at all is outstanding there.
  return quiet || RedisIo::now_us() - tl_io_release_us > io_.patient_us();
}

void DirectPath::settle_releases() {
  DirectConn *d = tl_unread_on;
  if (!d || d < conns_.data() || d >= conns_.data() + kConns) return;  // none, or another store's
  tl_unread_on = nullptr;
  std::lock_guard lock(d->mu);  // short: a thread sharing it is in one round trip at most
  read_release_replies(*d, RedisIo::now_us() + io_.patient_us());
}

bool DirectPath::release(const ReleaseOp &op) {
  // Not the I/O thread's own releases (a late reply's slot): it never blocks on a caller's connection.
  if (!on(callers_.load(std::memory_order_relaxed) + 1) || RedisIo::tl_io_of == &io_ || io_.cluster_ ||
      (op.conc && op.fleet))
    return false;
  DirectConn &d = of_thread();
  std::unique_lock lock(d.mu, std::try_to_lock);
  if (!lock.owns_lock()) return false;
  int64_t now = RedisIo::now_us();
  drop_if_closed(d, now);
  if (!d.conn || (io_.sentinel_ && d.gen != io_.sentinel_->generation())) return false;
  d.used_us = now;
  io_.format_release(op, RedisIo::tl_cmd);
  // Written, not waited for: the reply is read before the next admit's on this connection. (Measured with
  // CLIENT REPLY SKIP before it, so that Redis writes no reply: no less CPU for Redis under Puma.)
  if (d.conn->send_blocking(RedisIo::tl_cmd, now + io_.patient_us())) {
    d.unread++;
    tl_unread_on = &d;
    // A reservation given back (rare: its caller gave up before its turn) is waited for, so that this
    // caller's next reserve sees it whichever connection that takes (docs/concepts/acquire.md).
    if (op.gives_back()) read_release_replies(d, now + io_.patient_us());
    return true;
  }
  free_conn(d);  // broken: the I/O thread sends it
  return false;
}

// ------------------------------------------------------------------------------------ callers

bool DirectPath::admit(const AdmitOp &op, const Caller &me, AdmitResult &r) {
  if (allowed(op, me.in_flight())) {
    DirectConn &d = of_thread();
    std::unique_lock lock(d.mu, std::try_to_lock);  // busy: a thread sharing it (more than kConns)
    if (lock.owns_lock()) {
      if (&d == tl_unread_on) tl_unread_on = nullptr;  // this admit reads those replies first
      // Undecided with no reason: a cluster's MOVED or ASK, which the I/O thread follows.
      if (run(d, op, r) || r.reason != FailReason::none) return true;
    }
  }
  settle_releases();
  return false;
}

bool DirectPath::run(DirectConn &d, const AdmitOp &op, AdmitResult &r) {
  int64_t sent_us = RedisIo::now_us();
  const bool slot = op.conc || op.fleet;
  if (d.conn && io_.sentinel_ && d.gen != io_.sentinel_->generation()) free_conn(d);  // the master moved
  drop_if_closed(d, sent_us);
  d.used_us = sent_us;
  if (!d.conn)
    if (FailReason why = connect(d); why != FailReason::none)
      return give_up(d, op, false, sent_us, why, r);  // nothing was sent
  io_.format_admit(op, RedisIo::tl_cmd);
  sent_us = RedisIo::now_us();
  for (int attempt = 0; attempt < 2; attempt++) {
    redisReply *rep = exchange(d, RedisIo::tl_cmd);
    if (!rep) return give_up(d, op, slot, sent_us, lost(d), r);
    if (rep->type != REDIS_REPLY_ERROR) {
      bool ok = parse_admit_reply(rep, slot, op.rules.n, op.rate && op.rate_enforce, r, op.max_wait_ns > 0);
      freeReplyObject(rep);
      return ok || give_up(d, op, slot, sent_us, FailReason::error, r);
    }
    ErrorReply kind = io_.classify(std::string_view(rep->str, rep->len));
    if (kind != ErrorReply::noscript || attempt) return refused(d, op, rep, kind, sent_us, r);
    // Redis restarted, failed over or ran SCRIPT FLUSH: the script is loaded and the admit sent again, once.
    freeReplyObject(rep);
    io_.noscript_reloads_.fetch_add(1, std::memory_order_relaxed);
    redisReply *loaded = d.conn->roundtrip(resp_format({"SCRIPT", "LOAD", io_.scripts_.admit.body}), deadline());
    if (!loaded) return give_up(d, op, false, sent_us, lost(d), r);
    freeReplyObject(loaded);
  }
  return give_up(d, op, slot, sent_us, FailReason::error, r);
}

FailReason DirectPath::connect(DirectConn &d) {
  RedisEndpoint to;
  if (!io_.target(to, d.gen))
    return io_.sentinel_->unknown_reason() == FailReason::config ? FailReason::config : FailReason::connection;
  d.conn = std::make_unique<Connection>();
  bool up = d.conn->connect_blocking(to, io_.tls_.get(), RedisIo::now_us() + io_.opt_.connect_timeout_ms * 1000);
  if (d.conn->fd() >= 0) io_.fds_.set(fd_slot(d), d.conn->fd());
  if (!up) {
    // A TLS verification failure is the deployment's: said once, counted as config.
    if (d.conn->failure() == FailReason::config) io_.report_tls_failure(*d.conn);
    return d.conn->failure() == FailReason::config ? FailReason::config : FailReason::connection;
  }
  for (const std::string &cmd : io_.setup_commands()) {
    redisReply *reply = d.conn->roundtrip(cmd, deadline());
    if (!reply) return lost(d);
    bool error = reply->type == REDIS_REPLY_ERROR;
    freeReplyObject(reply);
    if (error) return FailReason::config;  // the I/O thread's connections say it too
  }
  if (io_.sentinel_) {
    // The sentinels' answer may be stale (a failover in progress): the server must say it is the master.
    redisReply *role = d.conn->roundtrip(resp_format({RedisIo::kRoleCommand}), deadline());
    if (!role) return lost(d);
    bool master = RedisIo::says_master(role);
    freeReplyObject(role);
    if (!master) {
      io_.sentinel_->suspect(d.gen);
      return FailReason::connection;
    }
  }
  return FailReason::none;
}

redisReply *DirectPath::exchange(DirectConn &d, const std::string &cmd) {
  if (!d.conn->send_blocking(cmd, deadline())) return nullptr;
  // The replies to this thread's releases come first (nobody waits on them; an error is counted).
  for (; d.unread > 0; d.unread--) {
    redisReply *back = d.conn->next_blocking(deadline());
    if (!back) return nullptr;
    if (back->type == REDIS_REPLY_ERROR) io_.release_errors_.fetch_add(1, std::memory_order_relaxed);
    freeReplyObject(back);
  }
  redisReply *rep = d.conn->next_blocking(deadline());
  if (rep) read_us_.store(RedisIo::now_us(), std::memory_order_relaxed);  // Redis answers (any_answering)
  return rep;
}

bool DirectPath::refused(DirectConn &d, const AdmitOp &op, redisReply *rep, ErrorReply kind, int64_t sent_us,
                         AdmitResult &r) {
  std::string_view err(rep->str, rep->len);
  switch (kind) {
    case ErrorReply::readonly:
      // The master moved (a failover): ask the sentinels again; this admit is the fallback's.
      freeReplyObject(rep);
      io_.sentinel_->suspect(d.gen);
      return give_up(d, op, false, sent_us, RedisIo::fail_reason(kind), r);  // a replica ran nothing
    case ErrorReply::redirect:
    case ErrorReply::try_again:
    case ErrorReply::cluster_down:
      freeReplyObject(rep);
      io_.cluster_->suspect(io_.store_);
      r = AdmitResult{};
      if (kind == ErrorReply::cluster_down) {
        io_.failures_[static_cast<size_t>(FailReason::cluster)].fetch_add(1, std::memory_order_relaxed);
        r.reason = RedisIo::fail_reason(kind);
      }
      // MOVED, ASK or TRYAGAIN (keys a migration keeps apart): undecided with no reason, and the admit goes to
      // the I/O thread, which follows or splits it.
      return false;
    case ErrorReply::script_refused:
      io_.report_refused_script(*d.conn, err);
      freeReplyObject(rep);
      return give_up(d, op, false, sent_us, RedisIo::fail_reason(kind), r);  // a refused script took nothing
    case ErrorReply::config:
    case ErrorReply::noscript:  // still, after the script was loaded: it ran nothing
      freeReplyObject(rep);
      return give_up(d, op, false, sent_us, RedisIo::fail_reason(kind), r);
    case ErrorReply::other: break;
  }
  freeReplyObject(rep);
  return give_up(d, op, op.conc || op.fleet, sent_us, FailReason::error, r);
}

bool DirectPath::give_up(DirectConn &d, const AdmitOp &op, bool may_hold_slot, int64_t sent_us, FailReason why,
                         AdmitResult &r) {
  if (may_hold_slot) give_back(d, op);
  free_conn(d);  // when there was nothing to give back
  ok_.store(false, std::memory_order_relaxed);
  io_.failures_[static_cast<size_t>(why)].fetch_add(1, std::memory_order_relaxed);
  if (why == FailReason::timeout) {
    // No byte within the deadline: let the I/O thread judge it (it opens the breaker unless its own
    // connections are answering), so that the next admit does not wait a deadline too.
    silent_since_.store(sent_us, std::memory_order_release);
    io_.wake_io();
    // It is idle in poll: wait (briefly) for its verdict, so that this caller's next admit sees it.
    for (int i = 0; i < 400 && silent_since_.load(std::memory_order_acquire) != 0; i++)
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  r = AdmitResult{};
  r.reason = why;
  return false;
}

void DirectPath::give_back(DirectConn &d, const AdmitOp &op) {
  // The admit may run in Redis after all (a slow Redis, a reply lost with the connection): its slot is given
  // back behind it, on the same connection when it can still take a write (Redis runs the two in order), else
  // through the I/O thread once this connection is gone.
  ReleaseOp back = RedisIo::release_of(op);
  std::string cmd;
  io_.format_release(back, cmd);
  bool sent = false;
  if (d.conn && d.conn->open()) {
    d.conn->append(cmd);
    (void)d.conn->write(sent);
  }
  free_conn(d);  // what it sent goes before the close
  if (!sent) io_.release_via_io(back);
}

FailReason DirectPath::lost(DirectConn &d) {
  FailReason why = d.conn->failure();
  if (why == FailReason::config) io_.report_tls_failure(*d.conn);  // the server refused our certificate: said once
  return why == FailReason::config || why == FailReason::timeout ? why : FailReason::connection;
}

}  // namespace floodwall
