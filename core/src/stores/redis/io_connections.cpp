// The Redis store's connections: connect (TCP, then TLS), the setup every new connection sends before
// any call (AUTH, SELECT, SCRIPT LOAD), writes, reads, and what a broken connection leaves behind.
#include <hiredis/hiredis.h>

#include <algorithm>
#include <cstdio>

#include "stores/redis/redis_store_internal.hpp"
#include "stores/redis/resp.hpp"

namespace floodwall {

RedisIo::Call *RedisIo::setup_call(std::initializer_list<std::string_view> args, int64_t now) {
  tl_cmd = resp_format(std::vector<std::string_view>(args));
  return take_call(Kind::setup, now + opt_.connect_timeout_ms * 1000);
}

void RedisIo::start_connect(Conn &conn, int64_t now) {
  RedisEndpoint to;
  if (!target(to, conn.master_gen)) {
    // No sentinel has named the master yet (or they do not know its name: config, said once).
    if (sentinel_->unknown_reason() == FailReason::config) refused_.store(true, std::memory_order_relaxed);
    conn.state = Conn::State::down;
    conn.reconnect_at_us = now + 100'000;
    return;
  }
  conn.not_master = false;
  if (!conn.link->start(to, tls_.get())) {
    if (conn.link->failure() == FailReason::config) report_tls_failure(*conn.link);
    if (sentinel_) sentinel_->suspect(conn.master_gen);
    conn.state = Conn::State::down;
    conn.reconnect_at_us = now + conn.backoff_ms * 1000;
    conn.backoff_ms = std::min<int64_t>(conn.backoff_ms * 2, 1000);
    return;
  }
  fds_.set(conn_fd_slot(conn), conn.link->fd());
  conn.state = Conn::State::connecting;
  conn.connect_deadline_us = now + opt_.connect_timeout_ms * 1000;
}

// Once per store: the reply says what is wrong (WRONGPASS, NOPERM, a SELECT out of range); the
// password never appears in it, nor here.
void RedisIo::report_refused_setup(const Connection &link, std::string_view err) {
  if (refused_reported_.exchange(true)) return;
  std::string first = message_excerpt(err);
  std::string user =
      url_.user.empty() ? std::string("the default user") : "user \"" + message_excerpt(url_.user) + "\"";
  std::fprintf(stderr,
               "floodwall: Redis at %s refused the connection's setup as %s (%s); every decision is the "
               "fallback's until it accepts (check the user, password and database)\n",
               link.peer().c_str(), user.c_str(), first.c_str());
}

// Once per store: which check failed (a CA that did not sign the server, another server name, a client
// certificate the server refused). The decisions go to the fallback, counted as config.
void RedisIo::report_tls_failure(const Connection &link) {
  refused_.store(true, std::memory_order_relaxed);
  if (tls_reported_.exchange(true)) return;
  std::fprintf(stderr,
               "floodwall: TLS to Redis at %s failed: %s; every decision is the fallback's until it succeeds "
               "(check redis.tls)\n",
               link.peer().c_str(), link.error().c_str());
}

void RedisIo::on_connected(Conn &conn, int64_t now) {
  conn.state = Conn::State::ready;
  conn.refused = false;
  conn.backoff_ms = 50;
  // Ahead of any request on this connection, so every EVALSHA after them finds its script; and the
  // requests wait behind them until Redis accepted them all, so that none runs as the default user (or
  // on database 0) behind a refused AUTH (or SELECT).
  size_t before = conn.inflight.size();
  if (!url_.password.empty()) {
    if (url_.user.empty())
      append(conn, setup_call({"AUTH", url_.password}, now));
    else
      append(conn, setup_call({"AUTH", url_.user, url_.password}, now));
  }
  if (url_.db != 0) append(conn, setup_call({"SELECT", resp_num(url_.db)}, now));
  if (sentinel_) {
    // The sentinels' answer may be stale (a failover in progress): the server must say it is the master.
    Call *role = setup_call({kRoleCommand}, now);
    role->role_check = true;
    append(conn, role);
  }
  for (const Script *s : scripts_.all()) append(conn, setup_call({"SCRIPT", "LOAD", s->body}, now));
  conn.setup_calls = conn.inflight.size();
  conn.setup_left = static_cast<int>(conn.setup_calls - before);
  conn.link->set_barrier();
  // Counted per connection: the first connect of each of a client's connections is not a reconnect.
  if (conn.was_ready) reconnects_.fetch_add(1, std::memory_order_relaxed);
  conn.was_ready = true;
  ever_connected_.store(true);
  {
    std::lock_guard lock(ready_mu_);
    ready_cv_.notify_all();
  }
}

void RedisIo::fail_conn(Conn &conn, FailReason why, int64_t now) {
  if (why == FailReason::none) why = FailReason::connection;
  if (why == FailReason::config && conn.link->failure() == FailReason::config) report_tls_failure(*conn.link);
  if (conn.link->fd() >= 0) {
    fds_.clear(conn_fd_slot(conn));
    conn.link->close();
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
        ReleaseOp back = c->late_release;
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
  conn.setup_left = 0;
  conn.setup_calls = 0;
  conn.state = Conn::State::down;
  conn.reconnect_at_us = now + conn.backoff_ms * 1000;
  conn.backoff_ms = std::min<int64_t>(conn.backoff_ms * 2, 1000);
  if (sentinel_) sentinel_->suspect(conn.master_gen);  // broken: is it still the master?
  if (cluster_) cluster_->suspect(store_);             // or its slots' master?
  // Nothing left to ask: the breaker opens, unless the master just changed and the new one is being
  // connected to.
  if (!any_ready() && now >= switch_grace_until_us_) trip(why, now);
}

void RedisIo::drop_stale_masters(int64_t now) {
  uint64_t gen = sentinel_->generation();
  for (Conn &conn : conns_) {
    if (conn.master_gen == gen) continue;
    if (conn.state != Conn::State::down) {
      switch_grace_until_us_ = now + opt_.connect_timeout_ms * 1000;
      fail_conn(conn, FailReason::connection, now);
    }
    conn.master_gen = gen;
    conn.reconnect_at_us = now;  // to the new master at once
    conn.backoff_ms = 50;
  }
}

void RedisIo::append(Conn &conn, Call *c) {
  if (c->asking) {
    // An ASK redirection: this one call, on this connection, right after ASKING.
    tl_cmd = resp_format({"ASKING"});
    Call *asking = take_call(Kind::asking, c->deadline_us);
    asking->appended_us = now_us();
    if (conn.inflight.empty()) conn.quiet_since_us = asking->appended_us;
    conn.link->append(asking->cmd);
    conn.inflight.push_back(asking);
  }
  c->appended_us = now_us();
  if (conn.inflight.empty()) conn.quiet_since_us = c->appended_us;
  conn.link->append(c->cmd);
  conn.inflight.push_back(c);
  conn.want_write = true;
  if (gives_back(c->kind)) conn.releases_sent++;
}

void RedisIo::flush(Conn &conn, int64_t now) {
  bool done = false;
  if (!conn.link->write(done)) {
    fail_conn(conn, conn.link->failure(), now);
    return;
  }
  conn.want_write = !done;
  conn.partial = !done;
  // Written: everything, or, behind the setup, the setup calls.
  if (done) conn.awaiting = conn.setup_left > 0 ? conn.setup_calls : conn.inflight.size();
}

void RedisIo::read(Conn &conn, int64_t now) {
  if (!conn.link->read()) {
    fail_conn(conn, conn.link->failure(), now);
    return;
  }
  for (;;) {
    redisReply *r = nullptr;
    int got = conn.link->next_reply(&r);
    if (got < 0) {
      fail_conn(conn, FailReason::error, now);
      return;
    }
    if (got == 0) return;
    if (conn.inflight.empty()) {  // cannot happen: every reply has its call
      freeReplyObject(r);
      fail_conn(conn, FailReason::error, now);
      return;
    }
    Call *c = conn.inflight.front();
    conn.inflight.pop_front();
    if (conn.awaiting) conn.awaiting--;
    if (gives_back(c->kind)) conn.releases_done++;
    bool setup = c->kind == Kind::setup && conn.setup_left > 0;
    if (setup) conn.setup_calls--;
    handle(conn, c, r, now);
    freeReplyObject(r);
    if (conn.not_master) {
      // A replica (the old master after a failover): every call behind it fails over to the fallback
      // while the sentinels are asked again.
      switch_grace_until_us_ = now + opt_.connect_timeout_ms * 1000;
      fail_conn(conn, FailReason::connection, now);
      return;
    }
    if (setup && --conn.setup_left == 0 && !conn.refused) {
      // Redis accepted the setup: the calls held behind it go out now.
      conn.link->clear_barrier();
      conn.want_write = conn.link->has_output();
      conn.partial = false;
    }
    if (conn.refused) {
      // Every call behind the refused setup ran as someone else (Redis' default user, database 0) or
      // not at all: none of them is an answer. Their callers get the fallback, counted as config.
      fail_conn(conn, FailReason::config, now);
      return;
    }
  }
}

}  // namespace floodwall
