// The admin API on Redis (store.hpp: control, inspect, reset, controlled): a tenant's control record is
// the hash <prefix>:{<tenant>}:ctl, which tenant_admit.lua reads itself, so that a change applies to the
// next request of every client with no poll; the set <prefix>:{~ctl}:tenants lists the tenants that have
// one (written here, never read by an admit). The calls go over a blocking connection of their own, each
// within the store's deadline (at least a second): an operator's call, never a request's.
#include "stores/redis/redis_admin.hpp"

#include <hiredis/hiredis.h>

#include <charconv>
#include <chrono>

#include "stores/quota_window.hpp"
#include "stores/redis/redis_store_internal.hpp"
#include "stores/redis/resp.hpp"
#include "stores/rule_state.hpp"
#include "util/digests.hpp"
#include "util/errors.hpp"

namespace floodwall {

namespace {

std::string key_of(const std::string &prefix, const TenantKey &t, std::string_view limiter) {
  std::string k;
  RedisStore::tenant_key_into(k, prefix, t, limiter);
  return k;
}

std::string rule_key(const std::string &prefix, const TenantKey &t, const RuleOp &r) {
  return key_of(prefix, t, *r.key);
}

std::string_view text(const redisReply *r) {
  return r && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS) ? std::string_view(r->str, r->len)
                                                                               : std::string_view();
}

int64_t number(std::string_view s, int64_t dflt = 0) {
  int64_t v = dflt;
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}

void check(const redisReply *r, const char *what) {
  if (r && r->type == REDIS_REPLY_ERROR)
    throw StoreError(std::string("store: Redis refused ") + what + ": " +
                     message_excerpt(std::string_view(r->str, r->len)));
}

// Takes the bare mark off a bucket (the '.' after its instant), keeping its TTL.
constexpr std::string_view kTakeOffBareMark =
    "local v = redis.call('GET', KEYS[1]) if v and string.byte(v, -1) == 46 then "
    "redis.call('SET', KEYS[1], string.sub(v, 1, -2), 'KEEPTTL') end return 0";

// A control record from HGETALL's reply.
TenantControl control_from(const redisReply *r) {
  TenantControl c;
  if (!r || r->type != REDIS_REPLY_ARRAY) return c;
  for (size_t i = 0; i + 1 < r->elements; i += 2) {
    std::string_view f = text(r->element[i]), v = text(r->element[i + 1]);
    if (f == "tier") c.tier = v;
    if (f == "rate") c.rate_m = number(v);
    if (f == "burst") c.burst_m = number(v);
    if (f == "block") {
      c.blocked = true;
      c.blocked_until_s = number(v);
    }
  }
  if (c.rate_m <= 0 || c.burst_m <= 0) c.rate_m = c.burst_m = 0;
  return c;
}

}  // namespace

std::string control_index_key(const std::string &prefix) {
  return prefix + ":{~ctl}:tenants";
}

void admin_control(const AdminRunner &tenant_node, const AdminRunner &index_node, const AdminRunner &flags_node,
                   const std::string &prefix, const TenantKey &tenant, const ControlChange &ch) {
  std::string ctl = key_of(prefix, tenant, "ctl");
  std::vector<std::vector<std::string>> cmds;
  if (ch.set_tier) {
    if (ch.tier.empty())
      cmds.push_back({"HDEL", ctl, "tier"});
    else
      cmds.push_back({"HSET", ctl, "tier", ch.tier});
  }
  if (ch.set_override) {
    if (ch.rate_m > 0)
      cmds.push_back({"HSET", ctl, "rate", std::to_string(ch.rate_m), "burst", std::to_string(ch.burst_m)});
    else
      cmds.push_back({"HDEL", ctl, "rate", "burst"});
  }
  if (ch.set_block) {
    if (ch.blocked)
      cmds.push_back({"HSET", ctl, "block", std::to_string(ch.blocked_until_s)});
    else
      cmds.push_back({"HDEL", ctl, "block"});
  }
  // The tenant's bucket loses its bare mark (lua/lib/bucket.lua: written when the tenant had no record), after
  // the record's change and on its connection, so that every admit from then on looks for the record.
  // By SHA after SCRIPT LOAD: the commands a floodwall user's ACL allows (docs/redis/production.md).
  static const std::string take_off_sha = sha1_hex(kTakeOffBareMark);
  cmds.push_back({"SCRIPT", "LOAD", std::string(kTakeOffBareMark)});
  cmds.push_back({"EVALSHA", take_off_sha, "1", key_of(prefix, tenant, "rate")});
  cmds.push_back({"EXISTS", ctl});
  auto replies = tenant_node(cmds);
  for (auto &r : replies) check(r.get(), "the control record's change");
  bool exists = replies.back() && replies.back()->type == REDIS_REPLY_INTEGER && replies.back()->integer == 1;
  std::string id(tenant.view());
  auto index = index_node({{exists ? "SADD" : "SREM", control_index_key(prefix), id}});
  check(index.front().get(), "the control records' index");
  auto epoch = flags_node({{"HINCRBY", prefix + ":flags", "ctl_epoch", "1"}});
  check(epoch.front().get(), "the flags' ctl_epoch");
}

TenantState admin_inspect(const AdminRunner &tenant_node, const std::string &prefix, const AdmitOp &op) {
  std::vector<std::vector<std::string>> cmds = {{"TIME"}, {"HGETALL", key_of(prefix, op.tenant, "ctl")}};
  cmds.push_back({"GET", key_of(prefix, op.tenant, "rate")});
  cmds.push_back({"ZRANGEBYSCORE", key_of(prefix, op.tenant, "conc"), "-inf", "+inf", "WITHSCORES"});
  for (size_t j = 0; j < op.rules.n; j++) cmds.push_back({"GET", rule_key(prefix, op.tenant, op.rules.at[j])});
  auto replies = tenant_node(cmds);
  for (auto &r : replies) check(r.get(), "a read of the tenant's state");
  TenantState st;
  const redisReply *time = replies[0].get();
  if (!time || time->type != REDIS_REPLY_ARRAY || time->elements != 2)
    throw StoreError("store: Redis' TIME: no answer");
  int64_t sec = number(text(time->element[0])), usec = number(text(time->element[1]));
  int64_t now_us = sec * 1'000'000 + usec;
  st.now_s = sec;
  st.control = control_from(replies[1].get());
  // A bucket: "<seconds><9 digits of ns>", the instant it is full again, perhaps with the bare mark after it
  // (lua/lib/bucket.lua).
  auto full_at = [](std::string_view v) -> int64_t {
    if (!v.empty() && v.back() == '.') v.remove_suffix(1);
    if (v.size() < 10) return 0;
    return number(v.substr(0, v.size() - 9)) * 1'000'000'000 + number(v.substr(v.size() - 9));
  };
  if (op.rate) {
    int64_t rate_m = st.control.rate_m > 0 ? st.control.rate_m : op.rate_m;
    int64_t burst_m = st.control.rate_m > 0 ? st.control.burst_m : op.burst_m;
    BucketState b{full_at(text(replies[2].get()))};
    st.tokens_m = bucket_tokens(rate_m, burst_m, bucket_debt_ns(&b, now_us));
  }
  if (op.conc && replies[3] && replies[3]->type == REDIS_REPLY_ARRAY) {
    for (size_t i = 1; i < replies[3]->elements; i += 2)
      st.in_flight += number(text(replies[3]->element[i])) > now_us - op.conc_ttl_us;
  }
  for (size_t j = 0; j < op.rules.n; j++) {
    const RuleOp &r = op.rules.at[j];
    std::string_view v = text(replies[4 + j].get());
    RuleState s;
    bool has = !v.empty();
    if (r.quota && has) {
      size_t colon = v.find(':');
      s = {number(v.substr(0, colon)), colon == std::string_view::npos ? 0 : number(v.substr(colon + 1))};
    } else if (has) {
      s = {full_at(v), 0};
    }
    RuleCheck c = check_rule(r, has ? &s : nullptr, now_us, now_us, 0, 0);
    st.rule_left.push_back(c.left);
    st.rule_reset_s.push_back(r.quota ? c.window.end_s - sec : 0);
  }
  return st;
}

void admin_reset(const AdminRunner &tenant_node, const std::string &prefix, const AdmitOp &op) {
  std::vector<std::string> del = {"DEL", key_of(prefix, op.tenant, "rate")};
  for (size_t j = 0; j < op.rules.n; j++) del.push_back(rule_key(prefix, op.tenant, op.rules.at[j]));
  auto replies = tenant_node({del});
  check(replies.front().get(), "the tenant's reset");
}

StoreStatus admin_status(const AdminRunner &flags_node, const AdminRunner &fleet_node, const AdminRunner &index_node,
                         const std::string &prefix, const std::string &fleet_key, const std::string &reports_key,
                         int64_t fleet_ttl_us) {
  StoreStatus st;
  st.fleet_wide_modes = true;  // <prefix>:flags, which every client polls
  auto t0 = std::chrono::steady_clock::now();
  auto ping = flags_node({{"PING"}});
  st.round_trip_us =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count();
  check(ping.front().get(), "PING");
  auto flags = flags_node({{"HGETALL", prefix + ":flags"}, {"INFO", "server"}});
  check(flags[0].get(), "a read of the flags");
  st.modes.fill(-1);
  const redisReply *f = flags[0].get();
  for (size_t i = 0; f->type == REDIS_REPLY_ARRAY && i + 1 < f->elements; i += 2) {
    for (int l = 1; l < kLimiterCount; l++) {
      if (text(f->element[i]) != limiter_name(static_cast<Limiter>(l))) continue;
      for (int m = 0; m <= static_cast<int>(Mode::off); m++)
        if (text(f->element[i + 1]) == mode_name(static_cast<Mode>(m))) st.modes[l] = static_cast<int8_t>(m);
    }
  }
  std::string_view info = text(flags[1].get());
  size_t v = info.find("redis_version:");
  if (v != std::string_view::npos) {
    std::string_view rest = info.substr(v + 14);
    st.server = "redis " + message_excerpt(rest.substr(0, rest.find_first_of("\r\n")));
  } else {
    st.server = "redis";
  }
  auto time = fleet_node({{"TIME"}});
  check(time.front().get(), "TIME");
  const redisReply *t = time.front().get();
  if (t->type != REDIS_REPLY_ARRAY || t->elements != 2) throw StoreError("store: Redis' TIME: no answer");
  int64_t now = number(text(t->element[0])) * 1'000'000 + number(text(t->element[1]));
  auto fleet =
      fleet_node({{"ZCOUNT", fleet_key, "(" + std::to_string(now - fleet_ttl_us), "+inf"}, {"HGETALL", reports_key}});
  check(fleet[0].get(), "a read of the fleet set");
  check(fleet[1].get(), "a read of the fleet's reports");
  st.fleet_in_flight = fleet[0]->type == REDIS_REPLY_INTEGER ? fleet[0]->integer : 0;
  const redisReply *rep = fleet[1].get();
  for (size_t i = 0; rep->type == REDIS_REPLY_ARRAY && i + 1 < rep->elements; i += 2) {
    std::string_view field = text(rep->element[i]), value = text(rep->element[i + 1]);
    size_t colon = value.find(':');
    if (field == "sum" || colon == std::string_view::npos || number(value.substr(colon + 1)) <= now) continue;
    st.fleet_in_flight += number(value.substr(0, colon));
    st.reporting_clients++;
  }
  auto index = index_node({{"SCARD", control_index_key(prefix)}});
  check(index.front().get(), "the control records' index");
  st.controlled = index.front()->type == REDIS_REPLY_INTEGER ? index.front()->integer : 0;
  return st;
}

std::vector<std::pair<std::string, TenantControl>> admin_controlled(
    const AdminRunner &index_node, const std::function<AdminRunner(const TenantKey &)> &node_of,
    const std::string &prefix, size_t limit) {
  auto members = index_node({{"SMEMBERS", control_index_key(prefix)}});
  check(members.front().get(), "the control records' index");
  std::vector<std::pair<std::string, TenantControl>> out;
  const redisReply *m = members.front().get();
  for (size_t i = 0; m && m->type == REDIS_REPLY_ARRAY && i < m->elements && out.size() < limit; i++) {
    std::string_view id = text(m->element[i]);
    if (id.empty() || id.size() > TenantKey::kSize) continue;
    TenantKey t = TenantKey::from_canonical(id);
    auto rec = node_of(t)({{"HGETALL", key_of(prefix, t, "ctl")}});
    check(rec.front().get(), "a control record");
    TenantControl c = control_from(rec.front().get());
    if (!c.empty()) out.emplace_back(std::string(id), std::move(c));
  }
  return out;
}

// ------------------------------------------------------------------------- the store's connection

std::vector<ReplyPtr> RedisIo::admin_run(const std::vector<std::vector<std::string>> &cmds) {
  // Releases waiting for a ride go now, ahead of what this reads, as they went before they could wait.
  send_riders();
  std::lock_guard lock(admin_mu_);
  int64_t budget_us = patient_us();
  auto unreachable = [&](const std::string &why) {
    admin_.reset();
    return StoreError("store: cannot reach " + redact_url(store_url_) + " (" + why + ")");
  };
  if (admin_ && sentinel_ && admin_gen_ != sentinel_->generation()) admin_.reset();
  if (!admin_) {
    RedisEndpoint to;
    if (!target(to, admin_gen_)) throw unreachable("no master known to the sentinels");
    admin_ = std::make_unique<Connection>();
    if (!admin_->connect_blocking(to, tls_.get(), now_us() + opt_.connect_timeout_ms * 1000))
      throw unreachable(admin_->error().empty() ? "no connection" : admin_->error());
    for (const std::string &cmd : setup_commands()) {
      redisReply *r = admin_->roundtrip(cmd, now_us() + budget_us);
      if (!r) throw unreachable(admin_->error().empty() ? "no answer" : admin_->error());
      bool refused = r->type == REDIS_REPLY_ERROR;
      std::string why = refused ? message_excerpt(std::string_view(r->str, r->len)) : "";
      freeReplyObject(r);
      if (refused) {
        admin_.reset();
        throw StoreError("store: " + redact_url(store_url_) + " refused the connection's setup: " + why);
      }
    }
  }
  std::vector<ReplyPtr> out;
  for (const auto &cmd : cmds) {
    std::vector<std::string_view> args(cmd.begin(), cmd.end());
    redisReply *r = admin_->roundtrip(resp_format(args), now_us() + budget_us);
    if (!r)
      throw unreachable(admin_->error().empty() ? "no answer within " + std::to_string(budget_us / 1000) + " ms"
                                                : admin_->error());
    if (r->type == REDIS_REPLY_ERROR && (std::string_view(r->str, r->len).rfind("MOVED", 0) == 0 ||
                                         std::string_view(r->str, r->len).rfind("ASK", 0) == 0)) {
      freeReplyObject(r);
      throw StoreError("store: the cluster's slot map changed during the call: try it again");
    }
    out.emplace_back(r);
  }
  return out;
}

void RedisIo::control(const TenantKey &tenant, const ControlChange &change) {
  AdminRunner run = [this](const auto &cmds) { return admin_run(cmds); };
  admin_control(run, run, run, prefix_, tenant, change);
  store_.bump_ctl_epoch();  // this process's hot tenants at once
}

TenantState RedisIo::inspect(const AdmitOp &op) {
  return admin_inspect([this](const auto &cmds) { return admin_run(cmds); }, prefix_, op);
}

void RedisIo::reset(const AdmitOp &op) {
  admin_reset([this](const auto &cmds) { return admin_run(cmds); }, prefix_, op);
}

void RedisIo::set_fleet_mode(Limiter l, int8_t mode) {
  std::vector<std::vector<std::string>> cmd = {
      mode < 0 ? std::vector<std::string>{"HDEL", flags_key(), limiter_name(l)}
               : std::vector<std::string>{"HSET", flags_key(), limiter_name(l), mode_name(static_cast<Mode>(mode))}};
  auto replies = admin_run(cmd);
  check(replies.front().get(), "the fleet-wide mode");
  store_.fleet_modes_[static_cast<size_t>(l)].store(mode);  // here at once; the others at their next poll
}

StoreStatus RedisIo::status(int64_t fleet_ttl_us) {
  AdminRunner run = [this](const auto &cmds) { return admin_run(cmds); };
  StoreStatus st = admin_status(run, run, run, prefix_, fleet_key_, reports_key_, fleet_ttl_us);
  if (sentinel_) {
    std::optional<RedisEndpoint> m = sentinel_->master();
    st.topology = m ? "sentinel: master " + m->host + ":" + std::to_string(m->port) : "sentinel: no master known";
  } else {
    st.topology = "standalone";
  }
  return st;
}

std::vector<std::pair<std::string, TenantControl>> RedisIo::controlled(size_t limit) {
  AdminRunner run = [this](const auto &cmds) { return admin_run(cmds); };
  return admin_controlled(
      run, [&](const TenantKey &) { return run; }, prefix_, limit);
}

}  // namespace floodwall
