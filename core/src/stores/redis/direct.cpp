// The Redis store's direct path: a lone blocking caller makes its round trip itself (redis_store.hpp).
#include <hiredis/hiredis.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <thread>

#include "stores/redis/redis_store.hpp"
#include "stores/redis/resp.hpp"

namespace floodwall {

// AUTH and SELECT, as a blocking connection of this store's sends them first (the direct path's, the
// admin API's).
std::vector<std::string> RedisStore::setup_commands() const {
  std::vector<std::string> out;
  if (!url_.password.empty())
    out.push_back(url_.user.empty() ? resp_format({"AUTH", url_.password})
                                    : resp_format({"AUTH", url_.user, url_.password}));
  if (url_.db != 0) out.push_back(resp_format({"SELECT", resp_num(url_.db)}));
  return out;
}

void RedisStore::free_direct() {
  if (!direct_) return;
  fds_.clear(kDirectFdSlot);
  direct_.reset();
}

// ------------------------------------------------------------------------------------ callers

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
      wake_io();
      // It is idle in poll: wait (briefly) for its verdict, so that this caller's next admit sees it.
      for (int i = 0; i < 400 && direct_silent_since_.load(std::memory_order_acquire) != 0; i++)
        std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    r = AdmitResult{};
    r.reason = why;
    return false;
  };
  // Each command has the whole deadline, as each call on the I/O thread has.
  auto deadline = [&] { return now_us() + opt_.deadline_ms * 1000; };
  auto command = [&](const std::string &cmd) -> redisReply * { return direct_->roundtrip(cmd, deadline()); };
  // No reply: a time-out, a broken connection, or the server refusing our TLS certificate (said once).
  auto lost = [&] {
    FailReason why = direct_->failure();
    if (why == FailReason::config) report_tls_failure(*direct_);
    return give_up(why == FailReason::config || why == FailReason::timeout ? why : FailReason::connection);
  };
  if (direct_ && sentinel_ && direct_gen_ != sentinel_->generation()) free_direct();  // the master moved
  if (!direct_) {
    RedisEndpoint to;
    if (!target(to, direct_gen_))
      return give_up(sentinel_->unknown_reason() == FailReason::config ? FailReason::config : FailReason::connection);
    direct_ = std::make_unique<Connection>();
    bool up = direct_->connect_blocking(to, tls_.get(), now_us() + opt_.connect_timeout_ms * 1000);
    if (direct_->fd() >= 0) fds_.set(kDirectFdSlot, direct_->fd());
    if (!up) {
      // A TLS verification failure is the deployment's: said once, counted as config.
      if (direct_->failure() == FailReason::config) report_tls_failure(*direct_);
      return give_up(direct_->failure() == FailReason::config ? FailReason::config : FailReason::connection);
    }
    for (const std::string &cmd : setup_commands()) {
      redisReply *reply = command(cmd);
      if (!reply) return lost();
      bool error = reply->type == REDIS_REPLY_ERROR;
      freeReplyObject(reply);
      if (error) return give_up(FailReason::config);  // the I/O thread's connections report it as such
    }
    if (sentinel_) {
      // The sentinels' answer may be stale (a failover in progress): the server must say it is the master.
      redisReply *role = command(resp_format({"ROLE"}));
      if (!role) return lost();
      bool master = role->type == REDIS_REPLY_ARRAY && role->elements > 0 && role->element[0]->str &&
                    std::string_view(role->element[0]->str, role->element[0]->len) == "master";
      freeReplyObject(role);
      if (!master) {
        sentinel_->suspect(direct_gen_);
        return give_up(FailReason::connection);
      }
    }
  }
  std::string &cmd = tl_cmd;
  format_admit(op, cmd);
  sent_us = now_us();
  for (int attempt = 0; attempt < 2; attempt++) {
    redisReply *rep = command(cmd);
    if (!rep) return lost();
    bool noscript = rep->type == REDIS_REPLY_ERROR && std::string_view(rep->str, rep->len).rfind("NOSCRIPT", 0) == 0;
    bool ok = !noscript && parse_admit_reply(rep, false, op.rules.n, op.rate && op.rate_enforce, r);
    FailReason why = FailReason::error;
    if (!ok && rep->type == REDIS_REPLY_ERROR && sentinel_ &&
        std::string_view(rep->str, rep->len).rfind("READONLY", 0) == 0) {
      // The master moved (a failover): ask the sentinels again; this admit is the fallback's.
      freeReplyObject(rep);
      sentinel_->suspect(direct_gen_);
      return give_up(FailReason::connection);
    }
    if (!ok && rep->type == REDIS_REPLY_ERROR && cluster_) {
      std::string_view err(rep->str, rep->len);
      // MOVED, ASK or TRYAGAIN (keys a migration keeps apart): the I/O thread follows or splits it.
      bool redirect = parse_redirect(err).has_value() || is_try_again(err), busy = is_cluster_down(err);
      if (redirect || busy) {
        freeReplyObject(rep);
        cluster_->suspect(*this);
        if (busy) {
          failures_[static_cast<size_t>(FailReason::cluster)].fetch_add(1, std::memory_order_relaxed);
          r = AdmitResult{};
          r.reason = FailReason::cluster;
          return false;
        }
        // MOVED, ASK or TRYAGAIN: undecided with no reason, and the admit goes to the I/O thread.
        r = AdmitResult{};
        return false;
      }
    }
    if (!ok && rep->type == REDIS_REPLY_ERROR) {
      std::string_view err(rep->str, rep->len);
      if (resp_is_script_refusal(err)) report_refused_script(*direct_, err);
      if (resp_is_script_refusal(err) || resp_is_config_error(err)) why = FailReason::config;
    }
    freeReplyObject(rep);
    if (ok) return true;
    if (why == FailReason::config) return give_up(why);
    if (!noscript || attempt) return give_up(FailReason::error);
    noscript_reloads_.fetch_add(1, std::memory_order_relaxed);
    redisReply *loaded = command(resp_format({"SCRIPT", "LOAD", scripts_.admit.body}));
    if (!loaded) return lost();
    freeReplyObject(loaded);
  }
  return give_up(FailReason::error);
}

}  // namespace floodwall
