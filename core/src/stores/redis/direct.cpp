// The Redis store's direct path: a blocking caller makes its round trips on its own connection (redis_store.hpp).
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

void RedisIo::free_direct(Direct &d) {
  static_assert(kFirstDirectFdSlot + kDirectConns <= InheritedFds::kMax, "a forked child closes every one");
  if (!d.conn) return;
  fds_.clear(direct_fd_slot(d));
  d.conn.reset();
  d.unread = 0;
}

void RedisIo::read_release_replies(Direct &d, int64_t deadline_us) {
  for (; d.conn && d.unread > 0; d.unread--) {
    redisReply *back = d.conn->next_blocking(deadline_us);
    if (!back) break;  // Redis is gone or silent: the slots go at their TTL
    if (back->type == REDIS_REPLY_ERROR) release_errors_.fetch_add(1, std::memory_order_relaxed);
    freeReplyObject(back);
  }
}

void RedisIo::close_direct(Direct &d, int64_t deadline_us) {
  std::lock_guard lock(d.mu);
  read_release_replies(d, deadline_us);
  free_direct(d);
}

void RedisIo::drop_if_closed(Direct &d, int64_t now) {
  // In use within the last 50 ms: Redis closes only connections idle for seconds (its `timeout`), and a
  // restart shows in the command's reply. Else one poll, which sees the peer's close without reading.
  if (!d.conn || now - d.used_us < 50'000) return;
  pollfd p{d.conn->fd(), POLLRDHUP, 0};
  if (poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL))) free_direct(d);
}

RedisIo::Direct &RedisIo::direct_of_thread() {
  // One number per thread for every store, so that a thread keeps to its connection of each store however
  // it alternates between clients.
  static std::atomic<uint32_t> threads{0};
  thread_local uint32_t tl_thread = threads.fetch_add(1, std::memory_order_relaxed);
  return direct_[tl_thread % static_cast<uint32_t>(opt_.direct_connections)];
}

bool RedisIo::direct_on() const {
  return opt_.direct_connections > 0 && direct_ok_.load(std::memory_order_relaxed) && breaker_.closed() &&
         !in_forked_child() && !tl_holds;
}

bool RedisIo::direct_allowed(const AdmitOp &op) const {
  if (!direct_on()) return false;
  bool quiet = outstanding_.load(std::memory_order_acquire) == 0;
  // A cluster: a lone caller's request-rate-only admit (a redirected slot admit would have to give its slot
  // back on the node that took it, which the I/O thread does).
  if (cluster_) return !op.conc && !op.fleet && lanes_in_use_.load(std::memory_order_relaxed) == 1 && quiet;
  // Nothing of this thread's left on the I/O thread's side: its releases were written within a release's
  // deadline, or nothing at all is outstanding there.
  return quiet || now_us() - tl_io_release_us > patient_us();
}

bool RedisIo::direct_release(const ReleaseOp &op) {
  // Not the I/O thread's own releases (a late reply's slot): it never blocks on a caller's connection.
  if (!direct_on() || tl_io_of == this || cluster_ || (op.conc && op.fleet)) return false;
  Direct &d = direct_of_thread();
  std::unique_lock lock(d.mu, std::try_to_lock);
  if (!lock.owns_lock()) return false;
  int64_t now = now_us();
  drop_if_closed(d, now);
  if (!d.conn || (sentinel_ && d.gen != sentinel_->generation())) return false;
  d.used_us = now;
  format_release(op, tl_cmd);
  // Written, not waited for: the reply is read before the next admit's on this connection. (Measured with
  // CLIENT REPLY SKIP before it, so that Redis writes no reply: no less CPU for Redis under Puma.)
  if (d.conn->send_blocking(tl_cmd, now + patient_us())) {
    d.unread++;
    // A reservation given back (rare: its caller gave up before its turn) is waited for, so that this
    // caller's next reserve sees it whichever connection that takes (docs/concepts/acquire.md).
    if (op.gives_back()) read_release_replies(d, now + patient_us());
    return true;
  }
  free_direct(d);  // broken: the I/O thread sends it
  return false;
}

// ------------------------------------------------------------------------------------ callers

bool RedisIo::direct_admit(Direct &d, const AdmitOp &op, AdmitResult &r) {
  int64_t sent_us = now_us();
  const bool slot = op.conc || op.fleet;
  if (d.conn && sentinel_ && d.gen != sentinel_->generation()) free_direct(d);  // the master moved
  drop_if_closed(d, sent_us);
  d.used_us = sent_us;
  if (!d.conn)
    if (FailReason why = direct_connect(d); why != FailReason::none)
      return direct_give_up(d, op, false, sent_us, why, r);  // nothing was sent
  format_admit(op, tl_cmd);
  sent_us = now_us();
  for (int attempt = 0; attempt < 2; attempt++) {
    redisReply *rep = direct_exchange(d, tl_cmd);
    if (!rep) return direct_give_up(d, op, slot, sent_us, direct_lost(d), r);
    if (rep->type != REDIS_REPLY_ERROR) {
      bool ok = parse_admit_reply(rep, slot, op.rules.n, op.rate && op.rate_enforce, r, op.max_wait_ns > 0);
      freeReplyObject(rep);
      return ok || direct_give_up(d, op, slot, sent_us, FailReason::error, r);
    }
    ErrorReply kind = classify(std::string_view(rep->str, rep->len));
    if (kind != ErrorReply::noscript || attempt) return direct_refused(d, op, rep, kind, sent_us, r);
    // Redis restarted, failed over or ran SCRIPT FLUSH: the script is loaded and the admit sent again, once.
    freeReplyObject(rep);
    noscript_reloads_.fetch_add(1, std::memory_order_relaxed);
    redisReply *loaded = d.conn->roundtrip(resp_format({"SCRIPT", "LOAD", scripts_.admit.body}), direct_deadline());
    if (!loaded) return direct_give_up(d, op, false, sent_us, direct_lost(d), r);
    freeReplyObject(loaded);
  }
  return direct_give_up(d, op, slot, sent_us, FailReason::error, r);
}

FailReason RedisIo::direct_connect(Direct &d) {
  RedisEndpoint to;
  if (!target(to, d.gen))
    return sentinel_->unknown_reason() == FailReason::config ? FailReason::config : FailReason::connection;
  d.conn = std::make_unique<Connection>();
  bool up = d.conn->connect_blocking(to, tls_.get(), now_us() + opt_.connect_timeout_ms * 1000);
  if (d.conn->fd() >= 0) fds_.set(direct_fd_slot(d), d.conn->fd());
  if (!up) {
    // A TLS verification failure is the deployment's: said once, counted as config.
    if (d.conn->failure() == FailReason::config) report_tls_failure(*d.conn);
    return d.conn->failure() == FailReason::config ? FailReason::config : FailReason::connection;
  }
  for (const std::string &cmd : setup_commands()) {
    redisReply *reply = d.conn->roundtrip(cmd, direct_deadline());
    if (!reply) return direct_lost(d);
    bool error = reply->type == REDIS_REPLY_ERROR;
    freeReplyObject(reply);
    if (error) return FailReason::config;  // the I/O thread's connections say it too
  }
  if (sentinel_) {
    // The sentinels' answer may be stale (a failover in progress): the server must say it is the master.
    redisReply *role = d.conn->roundtrip(resp_format({kRoleCommand}), direct_deadline());
    if (!role) return direct_lost(d);
    bool master = says_master(role);
    freeReplyObject(role);
    if (!master) {
      sentinel_->suspect(d.gen);
      return FailReason::connection;
    }
  }
  return FailReason::none;
}

redisReply *RedisIo::direct_exchange(Direct &d, const std::string &cmd) {
  if (!d.conn->send_blocking(cmd, direct_deadline())) return nullptr;
  // The replies to this thread's releases come first (nobody waits on them; an error is counted).
  for (; d.unread > 0; d.unread--) {
    redisReply *back = d.conn->next_blocking(direct_deadline());
    if (!back) return nullptr;
    if (back->type == REDIS_REPLY_ERROR) release_errors_.fetch_add(1, std::memory_order_relaxed);
    freeReplyObject(back);
  }
  redisReply *rep = d.conn->next_blocking(direct_deadline());
  if (rep) direct_read_us_.store(now_us(), std::memory_order_relaxed);  // Redis answers (any_answering)
  return rep;
}

bool RedisIo::direct_refused(Direct &d, const AdmitOp &op, redisReply *rep, ErrorReply kind, int64_t sent_us,
                             AdmitResult &r) {
  std::string_view err(rep->str, rep->len);
  switch (kind) {
    case ErrorReply::readonly:
      // The master moved (a failover): ask the sentinels again; this admit is the fallback's.
      freeReplyObject(rep);
      sentinel_->suspect(d.gen);
      return direct_give_up(d, op, false, sent_us, fail_reason(kind), r);  // a replica ran nothing
    case ErrorReply::redirect:
    case ErrorReply::try_again:
    case ErrorReply::cluster_down:
      freeReplyObject(rep);
      cluster_->suspect(store_);
      r = AdmitResult{};
      if (kind == ErrorReply::cluster_down) {
        failures_[static_cast<size_t>(FailReason::cluster)].fetch_add(1, std::memory_order_relaxed);
        r.reason = fail_reason(kind);
      }
      // MOVED, ASK or TRYAGAIN (keys a migration keeps apart): undecided with no reason, and the admit goes to
      // the I/O thread, which follows or splits it.
      return false;
    case ErrorReply::script_refused:
      report_refused_script(*d.conn, err);
      freeReplyObject(rep);
      return direct_give_up(d, op, false, sent_us, fail_reason(kind), r);  // a refused script took nothing
    case ErrorReply::config:
    case ErrorReply::noscript:  // still, after the script was loaded: it ran nothing
      freeReplyObject(rep);
      return direct_give_up(d, op, false, sent_us, fail_reason(kind), r);
    case ErrorReply::other: break;
  }
  freeReplyObject(rep);
  return direct_give_up(d, op, op.conc || op.fleet, sent_us, FailReason::error, r);
}

bool RedisIo::direct_give_up(Direct &d, const AdmitOp &op, bool may_hold_slot, int64_t sent_us, FailReason why,
                             AdmitResult &r) {
  if (may_hold_slot) direct_give_back(d, op);
  free_direct(d);  // when there was nothing to give back
  direct_ok_.store(false, std::memory_order_relaxed);
  failures_[static_cast<size_t>(why)].fetch_add(1, std::memory_order_relaxed);
  if (why == FailReason::timeout) {
    // No byte within the deadline: let the I/O thread judge it (it opens the breaker unless its own
    // connections are answering), so that the next admit does not wait a deadline too.
    direct_silent_since_.store(sent_us, std::memory_order_release);
    wake_io();
    // It is idle in poll: wait (briefly) for its verdict, so that this caller's next admit sees it.
    for (int i = 0; i < 400 && direct_silent_since_.load(std::memory_order_acquire) != 0; i++)
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  r = AdmitResult{};
  r.reason = why;
  return false;
}

void RedisIo::direct_give_back(Direct &d, const AdmitOp &op) {
  // The admit may run in Redis after all (a slow Redis, a reply lost with the connection): its slot is given
  // back behind it, on the same connection when it can still take a write (Redis runs the two in order), else
  // through the I/O thread once this connection is gone.
  ReleaseOp back = release_of(op);
  std::string cmd;
  format_release(back, cmd);
  bool sent = false;
  if (d.conn && d.conn->open()) {
    d.conn->append(cmd);
    (void)d.conn->write(sent);
  }
  free_direct(d);  // what it sent goes before the close
  if (!sent) release_via_io(back);
}

FailReason RedisIo::direct_lost(Direct &d) {
  FailReason why = d.conn->failure();
  if (why == FailReason::config) report_tls_failure(*d.conn);  // the server refused our certificate: said once
  return why == FailReason::config || why == FailReason::timeout ? why : FailReason::connection;
}

}  // namespace floodwall
