// The Redis store's replies: each matched to its own call and handed to its caller (or dropped, late).
#include <hiredis/hiredis.h>

#include <charconv>
#include <cstdio>

#include "stores/redis/redis_store_internal.hpp"
#include "stores/redis/resp.hpp"

namespace floodwall {

void RedisIo::finish_admit(Call *c, redisReply *r, int64_t now) {
  AdmitResult res;
  if (!parse_admit_reply(r, c->slot, c->rules, c->rate_enforce, res, c->acquire)) {
    if (!c->abandoned) fail_call(c, FailReason::error);
    return;
  }
  bool committed = res.committed, conc_ok = res.conc_ok, fleet_ok = res.fleet_ok;
  answered(c->sent_us, now);
  if (c->abandoned) {
    // The caller was answered by the fallback long ago; if the late command took slots after all, give them back now.
    ReleaseOp back = c->late_release;
    back.conc = back.conc && committed && conc_ok;
    back.fleet = back.fleet && committed && fleet_ok;
    if (back.conc || back.fleet) release(back);
    return;
  }
  complete(c, std::move(res));
}

void RedisIo::answered(int64_t sent_us, int64_t now) {
  breaker_.record(false, now);  // Redis answered, late or not
  direct_.redis_answered();
  double latency = static_cast<double>(now - sent_us);
  bp_.latency_us = bp_.latency_us == 0 ? latency : bp_.latency_us + (latency - bp_.latency_us) / 16;
}

void RedisIo::finish_lease(Call *c, redisReply *r, int64_t now) {
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

void RedisIo::recycle(Call *c) {
  outstanding_.fetch_sub(1, std::memory_order_release);
  spent_.push_back(c);
}

void RedisIo::return_spent() {
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

void RedisIo::handle(Conn &conn, Call *c, redisReply *r, int64_t now) {
  bp_.replies++;
  if (r->type == REDIS_REPLY_ERROR) {
    handle_error(conn, c, std::string_view(r->str, r->len), now);
    return;
  }
  if (c->role_check && !says_master(r)) conn.not_master = true;
  // An answer past the setup: this connection's AUTH and SELECT were accepted.
  if (c->kind != Kind::setup && refused_.load(std::memory_order_relaxed))
    refused_.store(false, std::memory_order_relaxed);
  switch (c->kind) {
    case Kind::admit: finish_admit(c, r, now); break;
    case Kind::lease: finish_lease(c, r, now); break;
    case Kind::report: finish_report(c, r); break;
    case Kind::probe:
      if (!c->abandoned) breaker_.probe_result(true, now);
      break;
    case Kind::flags: apply_flags(r); break;
    case Kind::release:
    case Kind::lease_end:
    case Kind::asking:
    case Kind::setup: break;
  }
  recycle(c);
}

void RedisIo::handle_error(Conn &conn, Call *c, std::string_view err, int64_t now) {
  ErrorReply kind = classify(err);
  if ((kind == ErrorReply::redirect || kind == ErrorReply::try_again || kind == ErrorReply::cluster_down) &&
      cluster_reply(c, err, now))
    return;
  if (kind == ErrorReply::noscript && !c->retried && c->kind != Kind::setup) {
    // Redis restarted, failed over or ran SCRIPT FLUSH: load the scripts and send the call again.
    noscript_reloads_.fetch_add(1, std::memory_order_relaxed);
    c->retried = true;
    for (const Script *s : scripts_.all()) append(conn, setup_call({"SCRIPT", "LOAD", s->body}, now));
    append(conn, c);
    return;
  }
  if (c->kind == Kind::setup) {
    // A wrong password must not pass for a working connection (it used to carry on as the default
    // user): the connection is closed, its calls fail as config errors, and it is said once.
    conn.refused = true;
    refused_.store(true, std::memory_order_relaxed);
    report_refused_setup(*conn.link, err);
    recycle(c);
    return;
  }
  // A replica refusing a write: the master moved (redis+sentinel://); the sentinels are asked again
  // and this call fails over to the fallback as a broken connection would.
  if (kind == ErrorReply::readonly) {
    conn.not_master = true;
    if (c->kind == Kind::release) {
      keep_release(c);
      return;
    }
    if (c->kind == Kind::probe && !c->abandoned) breaker_.probe_result(false, now);
    if (!c->abandoned) fail_call(c, fail_reason(kind));
    recycle(c);
    return;
  }
  // A configuration error means Redis answered: it is up, the deployment is wrong.
  if (kind == ErrorReply::script_refused) report_refused_script(*conn.link, err);
  FailReason why = fail_reason(kind);
  bool config = why == FailReason::config;
  if (awaited(c->kind)) breaker_.record(!config, now);
  if (c->kind == Kind::probe && !c->abandoned) breaker_.probe_result(config, now);
  if (c->kind == Kind::release && !config) {
    // Refused for now (READONLY, BUSY, LOADING): sent again later; ZREM is idempotent.
    unsent_at_us_ = now + 100'000;
    keep_release(c);
    return;
  }
  if (!c->abandoned) fail_call(c, why);
  recycle(c);
}

void RedisIo::finish_report(Call *c, const redisReply *r) {
  if (c->abandoned || !c->report_done) return;
  FleetReportResult res;
  if (r->type == REDIS_REPLY_ARRAY && (r->elements == 2 || r->elements == 3) &&
      r->element[0]->type == REDIS_REPLY_INTEGER && r->element[1]->type == REDIS_REPLY_INTEGER &&
      (r->elements == 2 || r->element[2]->type == REDIS_REPLY_INTEGER)) {
    res.decided = true;
    res.others = r->element[0]->integer;
    res.set_live = r->element[1]->integer;
    if (r->elements == 3) res.reporting = r->element[2]->integer;
  }
  FleetReportCompletion *done = c->report_done;
  c->report_done = nullptr;
  done->complete(std::move(res));
}

void RedisIo::apply_flags(const redisReply *r) {
  if (r->type != REDIS_REPLY_ARRAY) return;
  FleetModes m;
  m.fill(-1);
  for (size_t i = 0; i + 1 < r->elements; i += 2) {
    std::string_view field(r->element[i]->str ? r->element[i]->str : "", r->element[i]->len);
    std::string_view value(r->element[i + 1]->str ? r->element[i + 1]->str : "", r->element[i + 1]->len);
    if (field == "ctl_epoch") {
      // A control record changed somewhere in the fleet: what hot tenants believe is asked again.
      int64_t e = 0;
      std::from_chars(value.data(), value.data() + value.size(), e);
      if (e != seen_ctl_epoch_) {
        seen_ctl_epoch_ = e;
        if (cluster_)
          cluster_->ctl_changed();
        else
          store_.bump_ctl_epoch();
      }
    }
    for (int l = 1; l < kLimiterCount; l++) {
      if (field != limiter_name(static_cast<Limiter>(l))) continue;
      for (Mode mode : {Mode::enforce, Mode::dark, Mode::off})
        if (value == mode_name(mode)) m[static_cast<size_t>(l)] = static_cast<int8_t>(mode);
    }
  }
  if (cluster_)
    cluster_->flags(m);
  else
    for (size_t i = 0; i < m.size(); i++) store_.fleet_modes_[i].store(m[i], std::memory_order_relaxed);
}

ErrorReply RedisIo::classify(std::string_view err) const {
  // A cluster's redirections first: behind a plain redis:// URL, MOVED and ASK are the deployment's error.
  if (cluster_) {
    if (parse_redirect(err)) return ErrorReply::redirect;
    if (is_try_again(err)) return ErrorReply::try_again;
    if (is_cluster_down(err)) return ErrorReply::cluster_down;
  }
  if (err.starts_with("NOSCRIPT")) return ErrorReply::noscript;
  if (sentinel_ && err.starts_with("READONLY")) return ErrorReply::readonly;
  if (resp_is_script_refusal(err)) return ErrorReply::script_refused;
  if (resp_is_config_error(err)) return ErrorReply::config;
  return ErrorReply::other;
}

FailReason RedisIo::fail_reason(ErrorReply e) {
  switch (e) {
    case ErrorReply::redirect:
    case ErrorReply::try_again:
    case ErrorReply::cluster_down: return FailReason::cluster;
    case ErrorReply::readonly: return FailReason::connection;  // as a broken connection: the sentinels are asked again
    case ErrorReply::script_refused:
    case ErrorReply::config: return FailReason::config;
    case ErrorReply::noscript:  // still, after the scripts were loaded
    case ErrorReply::other: break;
  }
  return FailReason::error;
}

bool RedisIo::says_master(const redisReply *role) {
  // ROLE: ["master", offset, replicas] on the master; "slave" or "sentinel" first elsewhere.
  return role->type == REDIS_REPLY_ARRAY && role->elements > 0 && role->element[0]->str &&
         std::string_view(role->element[0]->str, role->element[0]->len) == "master";
}

// A MOVED or ASK is followed (handed to the cluster store, at most kMaxRedirects times a call); CLUSTERDOWN and
// TRYAGAIN (a slot without a master, keys split by a migration) are the fallback's, reason cluster. None
// of them ran the call, so nothing was taken that would need giving back. False for any other error.
bool RedisIo::cluster_reply(Call *c, std::string_view err, int64_t now) {
  std::optional<Redirect> rd = parse_redirect(err);
  if (!rd && !is_cluster_down(err) && !is_try_again(err)) return false;
  if (awaited(c->kind)) breaker_.record(false, now);  // Redis answered
  if (c->kind == Kind::probe && !c->abandoned) breaker_.probe_result(true, now);
  if (c->kind == Kind::setup || c->kind == Kind::probe || c->kind == Kind::asking || c->abandoned) {
    // An abandoned call's caller was answered long ago, and the command did not run: nothing to do.
    recycle(c);
    return true;
  }
  // Releases (nobody waits on them) may follow a migration further than callers' calls.
  constexpr uint8_t kMaxRedirects = 2, kMaxReleaseRedirects = 8;
  if (rd && c->redirects < (gives_back(c->kind) ? kMaxReleaseRedirects : kMaxRedirects)) {
    if (rd->to.host.empty()) rd->to.host = url_.host();  // unknown-endpoint: the host that answered
    c->redirects++;
    if (awaited(c->kind)) bp_.waiting.fetch_sub(1, std::memory_order_relaxed);
    outstanding_.fetch_sub(1, std::memory_order_release);
    cluster_->redirect(store_, c, std::move(*rd));
    return true;
  }
  if (!rd && is_try_again(err) && c->kind == Kind::admit && !c->op.ctl_only && !c->op.no_ctl) {
    // Keys that a migration keeps apart (the control record's is one, usually absent), possibly for
    // long: decided as one-key calls instead (ClusterStore::Split).
    bp_.waiting.fetch_sub(1, std::memory_order_relaxed);
    outstanding_.fetch_sub(1, std::memory_order_release);
    cluster_->split(store_, c);
    return true;
  }
  if (!rd && is_try_again(err) && awaited(c->kind) && now + kTryAgainUs < c->deadline_us - deadline_us_ / 2) {
    // A migration split the call's keys between two nodes (or the target has not all of them yet):
    // Redis asks to try again shortly, which this call does for the first half of its deadline (the
    // second is for the last try's reply: a try sent just before the deadline would be taken for
    // silence).
    try_again_.push_back(c);
    if (try_again_at_us_ == 0) try_again_at_us_ = now + kTryAgainUs;
    return true;
  }
  cluster_->suspect(store_);
  if (c->kind == Kind::release && !rd) {
    // The slot cannot be served now: sent again later (ZREM is idempotent).
    unsent_at_us_ = now + 100'000;
    keep_release(c);
    return true;
  }
  fail_call(c, FailReason::cluster);
  recycle(c);
  return true;
}

// Once per store. Our scripts call nothing but ordinary data commands and TIME, and TIME is the one that
// managed services refuse inside scripts (or rename), so that is what the message proposes.
void RedisIo::report_refused_script(const Connection &link, std::string_view err) {
  if (script_refusal_reported_.exchange(true)) return;
  std::string first = message_excerpt(err);
  std::fprintf(stderr,
               "floodwall: Redis at %s refused a command inside floodwall's scripts (%s)%s; every decision is the "
               "fallback's until it accepts\n",
               link.peer().c_str(), first.c_str(),
               opt_.clock == RedisOptions::Clock::redis
                   ? ": most likely TIME, which some managed services refuse in scripts; set redis.clock to \"client\""
                   : "");
}

}  // namespace floodwall
