#include "stores/redis/scripts.hpp"

#include <hiredis/hiredis.h>

#include "util/digests.hpp"

namespace floodwall {

namespace scripts {
extern const std::string_view tenant_admit;
extern const std::string_view release;
extern const std::string_view read_flags;
extern const std::string_view tenant_lease;
extern const std::string_view fleet_report;
}  // namespace scripts

Scripts::Scripts()
    : admit{scripts::tenant_admit, sha1_hex(scripts::tenant_admit)},
      release{scripts::release, sha1_hex(scripts::release)},
      flags{scripts::read_flags, sha1_hex(scripts::read_flags)},
      lease{scripts::tenant_lease, sha1_hex(scripts::tenant_lease)},
      report{scripts::fleet_report, sha1_hex(scripts::fleet_report)} {}

// An admit's reply. A request-rate-only admit: one integer, the micro-tokens left (>= 0) or -1 - the
// micro-tokens the bucket had when it had too few; it committed unless an enforced bucket said no. With
// a slot: {committed, rate_ok, tokens, conc_ok, tenant in-flight, fleet_ok}. False for a reply of
// another shape. With n rules, the 6-element array and four integers per rule; with a runtime override of
// the bucket, its rate and burst after them; or the control record's answer, {'blocked', until} or
// {'tier', name}. An acquire's reply is always the array, with two integers more at its end: the
// request's turn (ns from Redis' now; 0: go now) and Redis' TIME (us).
bool parse_admit_reply(const redisReply *r, bool slot, size_t rules, bool rate_enforce, AdmitResult &res,
                       bool acquire) {
  long long v[6] = {0, 1, 0, 1, 0, 1};
  if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
      (r->element[0]->type == REDIS_REPLY_STRING || r->element[0]->type == REDIS_REPLY_STATUS)) {
    // The tenant's control record answered: a block, or another tier. Nothing was written.
    std::string_view what(r->element[0]->str, r->element[0]->len);
    const redisReply *arg = r->element[1];
    res = AdmitResult{};
    res.decided = true;
    res.committed = false;
    res.rate_evaluated = res.conc_evaluated = res.fleet_evaluated = false;
    if (what == "blocked" && arg->type == REDIS_REPLY_INTEGER) {
      res.blocked = true;
      res.blocked_until_s = arg->integer;
      return true;
    }
    if (what == "tier" && arg->type == REDIS_REPLY_STRING) {
      res.other_tier = true;
      res.tier.assign(arg->str, arg->len);
      return true;
    }
    return false;
  }
  size_t full = 6 + 4 * rules, turn = acquire ? 2 : 0;
  if (r->type == REDIS_REPLY_ARRAY && rules <= kMaxRules &&
      (r->elements == full + turn || r->elements == full + 2 + turn) &&
      (slot || rules > 0 || acquire || r->elements == full + 2)) {
    for (size_t i = 0; i < r->elements; i++)
      if (r->element[i]->type != REDIS_REPLY_INTEGER) return false;
    for (size_t i = 0; i < 6; i++) v[i] = r->element[i]->integer;
    res.rules.n = static_cast<uint8_t>(rules);
    res.rules.failed = 0;
    for (size_t j = 0; j < rules; j++) {
      redisReply **e = r->element + 6 + 4 * j;
      if (e[0]->integer != 1) res.rules.failed |= 1u << j;
      res.rules.left[j] = e[1]->integer;
      res.rules.reset_s[j] = e[2]->integer;
      res.rules.window_end_s[j] = e[3]->integer;
    }
    if (r->elements == full + 2 + turn) {  // a runtime override of the bucket applied
      res.rate_m = r->element[full]->integer;
      res.burst_m = r->element[full + 1]->integer;
    }
    if (acquire) {
      res.wait_ns = r->element[r->elements - 2]->integer;
      res.store_now_us = r->element[r->elements - 1]->integer;
    }
  } else if (!slot && rules == 0 && r->type == REDIS_REPLY_INTEGER) {
    bool rate_ok = r->integer >= 0;
    v[0] = rate_ok || !rate_enforce;
    v[1] = rate_ok;
    v[2] = rate_ok ? r->integer : -1 - r->integer;
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
  if (r->type != REDIS_REPLY_ARRAY || r->elements != 6) return false;
  long long v[6];
  for (size_t i = 0; i < 6; i++) {
    if (r->element[i]->type != REDIS_REPLY_INTEGER) return false;
    v[i] = r->element[i]->integer;
  }
  res.decided = true;
  res.granted_m = v[0];
  res.controlled = v[5] == 1;
  res.tokens_m = v[1];
  res.slots = v[2];
  res.conc_count = v[3];
  res.store_now_us = v[4];
  return true;
}

}  // namespace floodwall
