// The C structs and enums of floodwall.h to and from the core's types (util/decision.hpp,
// policy/request_tenant.hpp, http/backoff.hpp): the one place where the two meet. The enums carry the same
// values and a header array is laid out alike (checked below), so those cross as casts; a decision is
// copied field by field, into and out of a caller's struct of whichever version it declares.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>

#include "floodwall.h"
#include "http/formatter.hpp"
#include "policy/policy.hpp"
#include "policy/request_tenant.hpp"
#include "util/decision.hpp"
#include "util/errors.hpp"

// The C enums and the core's are one vocabulary: a value crosses the ABI by a cast.
static_assert(FW_LIMITER_NONE == static_cast<int>(floodwall::Limiter::none));
static_assert(FW_LIMITER_REQUEST_RATE == static_cast<int>(floodwall::Limiter::request_rate));
static_assert(FW_LIMITER_CONCURRENCY == static_cast<int>(floodwall::Limiter::concurrency));
static_assert(FW_LIMITER_FLEET == static_cast<int>(floodwall::Limiter::fleet));
static_assert(FW_LIMITER_UTILIZATION == static_cast<int>(floodwall::Limiter::utilization));
static_assert(FW_LIMITER_ADAPTIVE == static_cast<int>(floodwall::Limiter::adaptive));
static_assert(FW_LIMITER_COUNT == floodwall::kLimiterCount);
static_assert(FW_MODE_ENFORCE == static_cast<int>(floodwall::Mode::enforce));
static_assert(FW_MODE_DARK == static_cast<int>(floodwall::Mode::dark));
static_assert(FW_MODE_OFF == static_cast<int>(floodwall::Mode::off));
static_assert(FW_FAIL_NONE == static_cast<int>(floodwall::FailReason::none));
static_assert(FW_FAIL_TIMEOUT == static_cast<int>(floodwall::FailReason::timeout));
static_assert(FW_FAIL_CONNECTION == static_cast<int>(floodwall::FailReason::connection));
static_assert(FW_FAIL_BREAKER == static_cast<int>(floodwall::FailReason::breaker));
static_assert(FW_FAIL_CONFIG == static_cast<int>(floodwall::FailReason::config));
static_assert(FW_FAIL_ERROR == static_cast<int>(floodwall::FailReason::error));
static_assert(FW_FAIL_OVERLOAD == static_cast<int>(floodwall::FailReason::overload));
static_assert(FW_FAIL_CLUSTER == static_cast<int>(floodwall::FailReason::cluster));
static_assert(FW_FAIL_CLUSTER + 1 == floodwall::kFailReasonCount);
static_assert(FW_RESPONSE_MAX_HEADERS == floodwall::kMaxResponseHeaders);
static_assert(FW_RESPONSE_MAX_HEADERS >= 6, "RateLimit-Policy, RateLimit, -Limit, -Remaining, -Reset, Retry-After");

// A caller's fw_header array is read in place as the core's RequestHeader array.
static_assert(sizeof(fw_header) == sizeof(floodwall::RequestHeader));
static_assert(offsetof(fw_header, name) == offsetof(floodwall::RequestHeader, name));
static_assert(offsetof(fw_header, name_len) == offsetof(floodwall::RequestHeader, name_len));
static_assert(offsetof(fw_header, value) == offsetof(floodwall::RequestHeader, value));
static_assert(offsetof(fw_header, value_len) == offsetof(floodwall::RequestHeader, value_len));
static_assert(std::is_same_v<fw_ticket, floodwall::Ticket>);

namespace fw_capi {

// fw_decision grows by appending: a version 1 struct ends where `degraded` begins, version 2 where `cost`
// begins, version 3 where the rules begin, version 4 where `waited_s` begins; version 5 is the whole struct.
constexpr size_t kDecisionV1Size = offsetof(fw_decision, degraded);
constexpr size_t kDecisionV2Size = offsetof(fw_decision, cost);
constexpr size_t kDecisionV3Size = offsetof(fw_decision, rules);
static_assert(kDecisionV1Size == 96, "the version 1 fw_decision layout is frozen");
static_assert(kDecisionV2Size == 104, "the version 2 fw_decision layout is frozen (sizeof, with its padding)");
static_assert(kDecisionV3Size == 112, "the version 3 fw_decision layout is frozen");
constexpr size_t kDecisionV4Size = offsetof(fw_decision, waited_s);
static_assert(kDecisionV4Size == 184, "the version 4 fw_decision layout is frozen");
constexpr size_t kDecisionV5Size = offsetof(fw_decision, wait_s);
static_assert(kDecisionV5Size == 192, "the version 5 fw_decision layout is frozen");

[[noreturn, gnu::cold, gnu::noinline]] inline void bad_decision_version(unsigned v) {
  throw floodwall::BadRequest("decision.version: unsupported (" + std::to_string(v) + "; this library knows 1 to " +
                              std::to_string(FW_DECISION_VERSION) + ")");
}

// The check inlined into every decision, its message built out of line.
inline unsigned decision_version(const fw_decision *d) {
  unsigned v = d->version;
  if (v < 1 || v > FW_DECISION_VERSION) bad_decision_version(v);
  return v;
}

// The bytes a caller's struct of that version has.
inline size_t decision_size(unsigned version) {
  return version == 1   ? kDecisionV1Size
         : version == 2 ? kDecisionV2Size
         : version == 3 ? kDecisionV3Size
         : version == 4 ? kDecisionV4Size
         : version == 5 ? kDecisionV5Size
                        : sizeof(fw_decision);
}

// The core's decision in the C struct, every field but `version`.
inline void to_c(const floodwall::Decision &d, fw_decision &c) {
  c.allowed = d.allowed ? 1 : 0;
  c.status = d.status;
  c.limiter = static_cast<fw_limiter>(d.limiter);
  c.dark_limiter = static_cast<fw_limiter>(d.dark_limiter);
  c.failed_open = d.failed_open ? 1 : 0;
  c.fail_reason = static_cast<fw_fail_reason>(d.fail_reason);
  c.limit = d.limit;
  c.remaining = d.remaining;
  c.reset_s = d.reset_s;
  c.retry_after_s = d.retry_after_s;
  c.rate = d.rate;
  c.concurrency_limit = d.concurrency_limit;
  c.concurrency_remaining = d.concurrency_remaining;
  c.ticket = d.ticket;
  c.degraded = d.degraded ? 1 : 0;
  c.cost = d.cost;
  c.rules = d.rules;
  c.rule = d.rule;
  c.dark_rule = d.dark_rule;
  c.shown_rule = d.shown_rule;
  c.rule_limit = d.rule_limit;
  c.rule_remaining = d.rule_remaining;
  c.rule_reset_s = d.rule_reset_s;
  c.rule_window_end_s = d.rule_window_end_s;
  c.blocked = d.blocked ? 1 : 0;
  c.blocked_until_s = d.blocked_until_s;
  // A reservation's wait is the caller's still (fw_reserve); fw_acquire has waited it out.
  double wait = d.wait_us == 0 ? 0.0 : static_cast<double>(d.wait_us) / 1e6;  // no division for most
  c.waited_s = d.waiting ? 0.0 : wait;
  c.wait_s = d.waiting ? wait : 0.0;
}

// Into a caller's struct of `version` (checked by decision_version): the fields that version has, no byte
// beyond them written.
inline void write_decision(const floodwall::Decision &d, unsigned version, fw_decision *out) {
  if (version == FW_DECISION_VERSION) return to_c(d, *out);
  fw_decision full;
  to_c(d, full);
  full.version = version;
  std::memcpy(out, &full, decision_size(version));
}

// A caller's decision (of any version it may have) as the core's; later fields at their defaults. The C
// enums are read as the values they hold, unknown ones included: the formatter treats those as none.
inline floodwall::Decision read_decision(const fw_decision *c) {
  unsigned v = decision_version(c);
  fw_decision full = FW_DECISION_INIT;
  std::memcpy(&full, c, decision_size(v));
  floodwall::Decision d;
  d.allowed = full.allowed != 0;
  d.status = full.status;
  d.limiter = static_cast<floodwall::Limiter>(full.limiter);
  d.dark_limiter = static_cast<floodwall::Limiter>(full.dark_limiter);
  d.failed_open = full.failed_open != 0;
  d.fail_reason = static_cast<floodwall::FailReason>(full.fail_reason);
  d.limit = full.limit;
  d.remaining = full.remaining;
  d.reset_s = full.reset_s;
  d.retry_after_s = full.retry_after_s;
  d.rate = full.rate;
  d.concurrency_limit = full.concurrency_limit;
  d.concurrency_remaining = full.concurrency_remaining;
  d.ticket = full.ticket;
  d.degraded = full.degraded != 0;
  d.cost = full.cost;
  d.rules = full.rules;
  d.rule = full.rule;
  d.dark_rule = full.dark_rule;
  d.shown_rule = full.shown_rule;
  d.rule_limit = full.rule_limit;
  d.rule_remaining = full.rule_remaining;
  d.rule_reset_s = full.rule_reset_s;
  d.rule_window_end_s = full.rule_window_end_s;
  d.blocked = full.blocked != 0;
  d.blocked_until_s = full.blocked_until_s;
  d.wait_us = std::isfinite(full.waited_s) && full.waited_s > 0 ? static_cast<int64_t>(full.waited_s * 1e6) : 0;
  if (std::isfinite(full.wait_s) && full.wait_s > 0) {
    d.wait_us = static_cast<int64_t>(full.wait_s * 1e6);
    d.waiting = true;
  }
  return d;
}

// fw_request grows by appending too: a version 1 struct ends where `headers` begins.
constexpr size_t kRequestV1Size = offsetof(fw_request, headers);
static_assert(kRequestV1Size == 56, "the version 1 fw_request layout is frozen");

// Out of line and cold: the message is built only for a request that is refused, and keeping it out of
// to_request lets that be inlined into every admit.
[[noreturn, gnu::noinline, gnu::cold]] inline void bad_request(const fw_request *req) {
  if (!req) throw floodwall::BadRequest("request: must not be NULL");
  if (req->version < 1 || req->version > FW_REQUEST_VERSION)
    throw floodwall::BadRequest("request.version: unsupported (" + std::to_string(req->version) + ")");
  throw floodwall::BadRequest("tenant: NULL with a non-zero length");
}

inline constexpr std::string_view kAnonymous = "anonymous";

// What the app said of the request's credential (version 3); an older request said nothing.
inline floodwall::CredentialCheck credential_check(const fw_request *req) {
  if (req->version < 3) return floodwall::CredentialCheck::unchecked;
  switch (req->credential) {
    case FW_CREDENTIAL_UNCHECKED: return floodwall::CredentialCheck::unchecked;
    case FW_CREDENTIAL_VERIFIED: return floodwall::CredentialCheck::verified;
    case FW_CREDENTIAL_REJECTED: return floodwall::CredentialCheck::rejected;
  }
  throw floodwall::BadRequest("credential: must be FW_CREDENTIAL_UNCHECKED, _VERIFIED or _REJECTED (got " +
                              std::to_string(req->credential) + ")");
}

// The request's headers and peer, checked: for the tenant's derivation and the credential's look-up.
struct RequestSource {
  const floodwall::RequestHeader *headers;
  size_t count;
  std::string_view peer;
};

inline RequestSource request_source(const fw_request *req) {
  if (!req || req->version < 2) throw floodwall::BadRequest("request.version: must be 2 or more to carry headers");
  if (req->version > FW_REQUEST_VERSION)
    throw floodwall::BadRequest("request.version: unsupported (" + std::to_string(req->version) + ")");
  if ((!req->headers && req->header_count) || (!req->peer && req->peer_len))
    throw floodwall::BadRequest(!req->peer && req->peer_len ? "peer: NULL with a non-zero length"
                                                            : "headers: NULL with a non-zero count");
  return {reinterpret_cast<const floodwall::RequestHeader *>(req->headers),
          req->headers ? req->header_count : 0,
          {req->peer ? req->peer : "", req->peer ? req->peer_len : 0}};
}

// The request as the core takes it. A version 2 request without a tenant has one derived from its
// headers, peer and (version 3) credential check into `derived`, which must outlive the returned Request.
inline floodwall::Request to_request(const fw_request *req, const floodwall::Policy &policy, std::string &derived) {
  if (!req || req->version < 1 || req->version > FW_REQUEST_VERSION || (!req->tenant && req->tenant_len))
    bad_request(req);
  floodwall::Request r;
  if (req->version >= 2 && !req->tenant) {
    RequestSource src = request_source(req);
    derived = floodwall::derive_tenant(policy.tenant, src.headers, src.count, src.peer, credential_check(req));
    r.tenant = derived;
  } else if (req->version >= 2 && req->tenant_len == 0) {
    r.tenant = kAnonymous;  // an empty key is one anonymous tenant, limited like any other
  } else {
    r.tenant = {req->tenant ? req->tenant : "", req->tenant_len};
  }
  r.route = req->route ? std::string_view(req->route) : std::string_view();
  if (req->version >= 4) {
    if (!req->path && req->path_len) throw floodwall::BadRequest("path: NULL with a non-zero length");
    r.path = {req->path ? req->path : "", req->path ? req->path_len : 0};
  }
  r.method = req->method ? std::string_view(req->method) : std::string_view();
  r.cost = req->cost;
  r.critical = req->critical != 0;
  r.sandbox = req->sandbox != 0;
  return r;
}

}  // namespace fw_capi
