// The admin API (guard.hpp): set and remove a tenant's override, its tier, its block; show and reset a
// tenant; the fleet-wide modes; the list of tenants with a control record.
#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "engine/guard.hpp"
#include "http/formatter.hpp"
#include "stores/quota_window.hpp"
#include "util/errors.hpp"
#include "util/redact.hpp"
#include "util/token_bucket.hpp"

namespace floodwall {

namespace {

nlohmann::json name_or_null(const std::string &s) {
  return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s);
}

// A tenant's control record as every admin answer shows it: tenant, tier, override, blocked, blocked_until. A
// timed block that has run out at now_s is no block (the admit scripts read it so), though its record stays.
nlohmann::json control_json(const TenantKey &t, const TenantControl &c, int64_t now_s) {
  bool blocked = c.blocked && (c.blocked_until_s == 0 || c.blocked_until_s > now_s);
  return {{"tenant", t.escaped()},
          {"tier", name_or_null(c.tier)},
          {"override", c.rate_m > 0 ? nlohmann::json{{"rate", static_cast<double>(c.rate_m) / 1e6},
                                                     {"burst", c.burst_m / 1'000'000}}
                                    : nlohmann::json(nullptr)},
          {"blocked", blocked},
          {"blocked_until",
           blocked && c.blocked_until_s > 0 ? nlohmann::json(utc_time(c.blocked_until_s)) : nlohmann::json(nullptr)}};
}

// The records a store lists (Store::controlled), each as control_json shows it.
nlohmann::json controlled_json(const std::vector<std::pair<std::string, TenantControl>> &records, int64_t now_s) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto &[id, c] : records) out.push_back(control_json(TenantKey::from_canonical(id), c, now_s));
  return out;
}

}  // namespace

// A tenant as fw_admit takes it; control characters are refused (an operator's typo, or an attack on
// whatever prints it), never written anywhere.
TenantKey Guard::admin_tenant(std::string_view tenant) const {
  if (tenant.empty()) throw BadRequest("tenant: must not be empty");
  for (unsigned char c : tenant)
    if (c < 0x20 || c == 0x7f) throw BadRequest("tenant: contains a control character");
  return TenantKey(tenant);
}

// The op that names a tenant's limiters and the rules of its tier (every route's), from first_rule on, at
// most kMaxRules of them; next_rule is where the next op starts (policy_.rules.size() when done).
AdmitOp Guard::admin_op(const TenantKey &t, int tier, size_t first_rule, size_t &next_rule) const {
  AdmitOp op;
  op.tenant = t;
  if (policy_.request_rate) {
    const BucketLimits *b = tier >= 0 ? &policy_.tiers[static_cast<size_t>(tier)].bucket : policy_.bucket_for(t);
    op.rate = true;
    op.rate_m = b->rate_m;
    op.burst_m = b->burst_m;
  }
  if (policy_.concurrency) {
    op.conc = true;
    op.conc_limit = policy_.concurrency->limit;
    op.conc_ttl_us = static_cast<int64_t>(policy_.concurrency->ttl_s * 1e6);
  }
  size_t i = first_rule;
  for (; i < policy_.rules.size() && op.rules.n < kMaxRules; i++) {
    const Rule &rule = policy_.rules[i];
    if (tier != -2 && !policy_.applies_to_tier(rule, tier)) continue;  // -2: every rule (a reset)
    op.rules.push(rule_op(rule, i, true));
  }
  next_rule = i;
  return op;
}

void Guard::admin_set_override(std::string_view tenant, double rate, double burst) {
  TenantKey t = admin_tenant(tenant);
  BucketLimits b;
  try {
    b = bucket_limits(rate, burst);
  } catch (const PolicyError &e) {
    throw BadRequest(e.what());
  }
  ControlChange ch;
  ch.set_override = true;
  ch.rate_m = b.rate_m;
  ch.burst_m = b.burst_m;
  store_->control(t, ch);
}

void Guard::admin_remove_override(std::string_view tenant) {
  ControlChange ch;
  ch.set_override = true;
  store_->control(admin_tenant(tenant), ch);
}

void Guard::admin_set_tier(std::string_view tenant, std::string_view tier) {
  TenantKey t = admin_tenant(tenant);
  if (!tier.empty() && policy_.tier_index(tier) < 0) {
    std::string known;
    for (const PlanTier &x : policy_.tiers) known += (known.empty() ? "" : ", ") + x.name;
    std::string shown;
    for (unsigned char c : tier.substr(0, 40)) shown += c < 0x20 || c >= 0x7f ? '?' : static_cast<char>(c);
    throw BadRequest("tier: the policy has no tier named \"" + shown + "\" (" +
                     (known.empty() ? std::string("it has no tiers") : "it has: " + known) + ")");
  }
  ControlChange ch;
  ch.set_tier = true;
  ch.tier.assign(tier);
  store_->control(t, ch);
  learn_tier(t, tier);  // this client's next admit assumes it at once
}

void Guard::admin_block(std::string_view tenant, double seconds) {
  TenantKey t = admin_tenant(tenant);
  if (!std::isfinite(seconds) || seconds < 0 || seconds > 10.0 * 365 * 86400)
    throw BadRequest("seconds: must be between 0 (until unblocked) and ten years");
  ControlChange ch;
  ch.set_block = true;
  ch.blocked = true;
  ch.blocked_until_s =
      seconds == 0 ? 0 : floor_div(clock_.wall_us(), 1'000'000) + static_cast<int64_t>(std::ceil(seconds));
  store_->control(t, ch);
}

void Guard::admin_unblock(std::string_view tenant) {
  ControlChange ch;
  ch.set_block = true;
  store_->control(admin_tenant(tenant), ch);
}

std::string Guard::admin_show(std::string_view tenant) {
  TenantKey t = admin_tenant(tenant);
  size_t next = 0;
  TenantState st = store_->inspect(admin_op(t, -1, 0, next));
  int tier = policy_.tier_index(st.control.tier);
  AdmitOp op = admin_op(t, tier, 0, next);
  if (!op.rate && st.control.rate_m > 0) {  // a policy with no request_rate: the override's bucket still shows
    op.rate = true;
    op.rate_m = st.control.rate_m;
    op.burst_m = st.control.burst_m;
  }
  if (tier >= 0 || op.rate) st = store_->inspect(op);
  nlohmann::json j = control_json(t, st.control, st.now_s);
  if (!st.control.tier.empty() && tier < 0) j["tier_unknown"] = true;  // named by the store, not by this policy
  if (op.rate) {
    int64_t burst_m = st.control.rate_m > 0 ? st.control.burst_m : op.burst_m;
    int64_t rate_m = st.control.rate_m > 0 ? st.control.rate_m : op.rate_m;
    j["request_rate"] = {{"limit", burst_m / 1'000'000},
                         {"remaining", st.tokens_m / 1'000'000},
                         {"rate", static_cast<double>(rate_m) / 1e6},
                         {"full_in_s", seconds_until(rate_m, st.tokens_m, burst_m)}};
  }
  if (op.conc) j["concurrency"] = {{"limit", op.conc_limit}, {"in_flight", st.in_flight}};
  nlohmann::json limits = nlohmann::json::array(), quotas = nlohmann::json::array();
  for (size_t k = 0; k < op.rules.n && k < st.rule_left.size(); k++) {
    const RuleOp &r = op.rules.at[k];
    const Rule &rule = policy_.rules[r.index];
    if (r.quota) {
      quotas.push_back({{"name", rule.name},
                        {"limit", rule.quota_limit},
                        {"remaining", st.rule_left[k]},
                        {"period", quota_period_name(rule.period)},
                        {"reset", utc_time(st.now_s + st.rule_reset_s[k])},
                        {"reset_in_s", st.rule_reset_s[k]}});
    } else {
      limits.push_back({{"name", rule.name},
                        {"limit", rule.bucket.burst},
                        {"remaining", st.rule_left[k] / 1'000'000},
                        {"rate", rule.bucket.rate},
                        {"routes", rule.routes}});
    }
  }
  j["limits"] = limits;
  j["quotas"] = quotas;
  j["store_time"] = utc_time(st.now_s);
  return j.dump();
}

void Guard::admin_reset(std::string_view tenant) {
  TenantKey t = admin_tenant(tenant);
  size_t next = 0;
  do {
    AdmitOp op = admin_op(t, -2, next, next);
    store_->reset(op);
  } while (next < policy_.rules.size());
}

void Guard::admin_set_mode(Limiter l, int mode) {
  if (l == Limiter::none || static_cast<int>(l) >= kLimiterCount) throw BadRequest("limiter: unknown");
  if (mode < -1 || mode > static_cast<int>(Mode::off)) throw BadRequest("mode: must be a mode, or -1 for none");
  store_->set_fleet_mode(l, static_cast<int8_t>(mode));
}

std::string Guard::admin_status() {
  int64_t fleet_ttl_us = static_cast<int64_t>((policy_.fleet ? policy_.fleet->ttl_s : FleetPolicy{}.ttl_s) * 1e6);
  StoreStatus st = store_->status(fleet_ttl_us);
  nlohmann::json j;
  j["store"] = redact_url(policy_.store);
  j["prefix"] = policy_.prefix;
  j["server"] = st.server;
  j["topology"] = st.topology;
  j["round_trip_ms"] = st.round_trip_us < 0 ? nlohmann::json(nullptr) : nlohmann::json(st.round_trip_us / 1000.0);
  StoreStats stats = store_->stats();
  j["breaker"] = stats.breaker == BreakerState::closed ? "closed"
                 : stats.breaker == BreakerState::open ? "open"
                                                       : "half_open";
  nlohmann::json modes;
  for (int l = 1; l < kLimiterCount; l++) {
    int8_t m = st.modes[static_cast<size_t>(l)];
    modes[limiter_name(static_cast<Limiter>(l))] =
        m < 0 ? nlohmann::json(nullptr) : nlohmann::json(mode_name(static_cast<Mode>(m)));
  }
  j["modes"] = modes;  // null: no fleet-wide mode, each process's policy (and fw_set_mode) decides
  j["modes_fleet_wide"] = st.fleet_wide_modes;
  j["fleet"] = {{"in_flight", st.fleet_in_flight},
                {"reporting_clients", st.reporting_clients},
                {"capacity", policy_.fleet ? nlohmann::json(policy_.fleet->capacity) : nlohmann::json(nullptr)}};
  j["controlled"] = st.controlled;
  nlohmann::json overrides = nlohmann::json::array(), blocks = nlohmann::json::array();
  for (const nlohmann::json &e : controlled_json(store_->controlled(1000), floor_div(clock_.wall_us(), 1'000'000))) {
    if (!e["tier"].is_null() || !e["override"].is_null()) overrides.push_back(e);
    if (e["blocked"].get<bool>()) blocks.push_back(e);
  }
  j["overrides"] = overrides;
  j["blocks"] = blocks;
  return j.dump();
}

std::string Guard::admin_list(size_t limit) {
  if (limit == 0) throw BadRequest("limit: must be at least 1");
  return controlled_json(store_->controlled(limit), floor_div(clock_.wall_us(), 1'000'000)).dump();
}

}  // namespace floodwall
