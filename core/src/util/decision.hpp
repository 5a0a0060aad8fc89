// What goes into the Guard and what comes out of it: a request, its decision, and the ticket that holds
// what an admitted request took until it is released. The C ABI's fw_request and fw_decision are mapped
// to and from these in capi/src (the C header's comments are the reference for each field).
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <string_view>

#include "util/vocabulary.hpp"

namespace floodwall {

struct Request {
  std::string_view tenant;
  std::string_view route;   // the matched route's pattern (policy/route.hpp); "": not known
  std::string_view path;    // the request's path, for the rules when no route is given; "": not known
  std::string_view method;  // "GET" when empty
  uint64_t cost = 1;        // 0 counts as 1
  bool critical = false;
  bool sandbox = false;
};

// What an admitted request holds (a concurrency slot, a fleet slot, its place in the in-flight count)
// until Guard::release; 0 holds nothing.
using Ticket = uint64_t;

struct Decision {
  bool allowed = false;
  int status = 0;  // 200, 429 (request rate, concurrency) or 503 (fleet, utilization, store unavailable)
  Limiter limiter = Limiter::none;            // the enforcing limiter that rejected
  Limiter dark_limiter = Limiter::none;       // the first dark-mode limiter that would have rejected
  bool failed_open = false;                   // allowed with no limiter at all (redis.fallback "open")
  bool degraded = false;                      // the local fallback table decided (redis.fallback "local")
  FailReason fail_reason = FailReason::none;  // why the store did not decide
  // The tenant's request-rate bucket (0 when no request_rate section is configured).
  int64_t limit = 0;          // capacity (burst), tokens
  int64_t remaining = 0;      // whole tokens left after this decision
  int64_t reset_s = 0;        // whole seconds until the bucket is full again
  int64_t retry_after_s = 0;  // on a rejection: whole seconds, at least 1; else 0
  double rate = 0;            // tokens per second
  // The tenant's concurrency cap for this route (0 when the route is not counted).
  int64_t concurrency_limit = 0;
  int64_t concurrency_remaining = 0;
  Ticket ticket = 0;  // release on every path
  uint64_t cost = 0;  // the tokens the request asked for (0 counted as 1)
  // The limits and quotas of the policy (request_rate.limits, quotas), by their index in Policy::rules.
  uint64_t rules = 0;             // bit i: rule i applied to this request (RateLimit-Policy lists it)
  int rule = -1;                  // the rule that rejected (limiter request_rate), -1 when none did
  int dark_rule = -1;             // the first dark rule that would have rejected (dark_limiter request_rate)
  int shown_rule = -1;            // the rule RateLimit reports (closest to exhaustion, or the one that rejected)
  int64_t rule_limit = 0;         // shown_rule's capacity: a limit's burst, a quota's limit
  int64_t rule_remaining = 0;     // what it has left after this decision (whole tokens, units)
  int64_t rule_reset_s = 0;       // seconds until it is full again (a limit) or its window ends (a quota)
  int64_t rule_window_end_s = 0;  // a quota: when its window ends, seconds since the epoch (the store's clock)
  // The tenant is blocked (the admin API): status 403, nothing consumed.
  bool blocked = false;
  int64_t blocked_until_s = 0;  // when the block ends, seconds since the epoch; 0: until unblocked
  // An acquire (Guard::acquire) that was allowed: how long after the decision the caller's turn came (us;
  // 0: at once), and that turn on the store's clock (us; 0 for an admit).
  int64_t wait_us = 0;
  int64_t turn_us = 0;
  // Guard::reserve: wait_us is still the caller's to wait (it must not go before); false once waited out
  // (Guard::acquire). A reservation released before its turn gives its tokens back (Guard::release).
  bool waiting = false;
};

// How an asynchronous admit ends: called exactly once, with the decision, or with the exception that kept
// one from being made (then `d` is an empty decision). It must not block; it may release and admit.
using AdmitDone = std::function<void(const Decision &d, std::exception_ptr error)>;

}  // namespace floodwall
