// What an admit carries for the policy's limits and quotas (Policy::rules) and what the store answers for
// each, and a request's slot id: the parts of AdmitOp and AdmitResult (store.hpp) with arrays of their own.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "policy/policy.hpp"

namespace floodwall {

// A request's slot id in the concurrency and fleet sets: 128 random bits.
struct SlotId {
  uint64_t hi = 0, lo = 0;
  friend bool operator==(const SlotId &a, const SlotId &b) { return a.hi == b.hi && a.lo == b.lo; }
};

// One limit or quota of the policy (Policy::rules) that applies to a request.
struct RuleOp {
  uint64_t id;             // Rule::id: the rule's state in the in-process and shm stores
  const std::string *key;  // Rule::key_suffix (the policy outlives every op): the rule's Redis key
  uint16_t index;          // into Policy::rules
  bool quota;
  bool enforce;  // false: dark (decided and reported, never rejecting)
  // A limit's bucket (micro-tokens per second, micro-tokens) or a quota's limit (units) and QuotaPeriod, in
  // two integers (an op is copied with each admit): read them through the accessors below.
  int64_t rate_or_limit, burst_or_period;
  int32_t utc_offset_s;  // a quota

  int64_t rate_m() const { return rate_or_limit; }  // a limit
  int64_t burst_m() const { return burst_or_period; }
  int64_t quota_limit() const { return rate_or_limit; }  // a quota
  QuotaPeriod period() const { return static_cast<QuotaPeriod>(burst_or_period); }
};

// The op of Policy::rules[index] (enforce: the rule's mode and the request-rate limiter's both enforce).
inline RuleOp rule_op(const Rule &rule, size_t index, bool enforce) {
  RuleOp op;
  op.id = rule.id;
  op.key = &rule.key_suffix;
  op.index = static_cast<uint16_t>(index);
  op.quota = rule.quota;
  op.enforce = enforce;
  op.rate_or_limit = rule.quota ? rule.quota_limit : rule.bucket.rate_m;
  op.burst_or_period = rule.quota ? static_cast<int64_t>(rule.period) : rule.bucket.burst_m;
  op.utc_offset_s = rule.utc_offset_s;
  return op;
}

// The rules of one admit: a fixed array (no allocation on the hot path), of which only the first n are
// copied with the op.
struct RuleOps {
  uint8_t n = 0;
  uint32_t enforced = 0;  // bit j: at[j] enforces
  RuleOp at[kMaxRules];
  RuleOps() {}  // NOLINT: `at` is written before it is read, up to n
  RuleOps(const RuleOps &o) : n(o.n), enforced(o.enforced) { std::copy_n(o.at, n, at); }
  RuleOps &operator=(const RuleOps &o) {
    n = o.n;
    enforced = o.enforced;
    std::copy_n(o.at, n, at);
    return *this;
  }
  void push(const RuleOp &r) {
    if (r.enforce) enforced |= 1u << n;
    at[n++] = r;
  }
};

// What the store answered for each rule of an admit (in the order of AdmitOp::rules).
struct RuleResults {
  uint8_t n = 0;
  uint32_t failed = 0;              // bit j: rule j had not enough left for the request
  int64_t left[kMaxRules];          // after this request: a limit's micro-tokens, a quota's units
  int64_t reset_s[kMaxRules];       // a quota: seconds until its window ends (a limit: 0)
  int64_t window_end_s[kMaxRules];  // a quota: when its window ends, seconds since the epoch on the store's clock
  RuleResults() {}                  // NOLINT: written before read, up to n
  RuleResults(const RuleResults &o) : n(o.n), failed(o.failed) { copy(o); }
  RuleResults &operator=(const RuleResults &o) {
    n = o.n;
    failed = o.failed;
    copy(o);
    return *this;
  }

 private:
  void copy(const RuleResults &o) {
    std::copy_n(o.left, n, left);
    std::copy_n(o.reset_s, n, reset_s);
    std::copy_n(o.window_end_s, n, window_end_s);
  }
};

}  // namespace floodwall
