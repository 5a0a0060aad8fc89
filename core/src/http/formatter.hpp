// The one formatter of response headers and bodies, so that Python, Node and Ruby services answer
// byte for byte alike. Every value is built from numbers and the policy: no caller byte reaches it.
//
// Headers follow the IETF httpapi RateLimit fields draft (draft-ietf-httpapi-ratelimit-headers, the
// revision of May 2026): RateLimit-Policy lists every policy that applies ("request_rate";q=burst;w=...,
// "concurrency";q=N;qu="concurrent-requests"); RateLimit reports one service limit, the one closest to
// exhaustion (on a rejection, the one that rejected), with r the available quota and t the effective
// window. On a rejection t is the Retry-After value, so Retry-After never points earlier than the end
// of the effective window (the draft's rule); otherwise t is the seconds until the bucket is full again.
// RateLimit-Limit, -Remaining and -Reset stay for the clients that read the older drafts.
#pragma once

#include <array>
#include <string>

#include "policy/policy.hpp"
#include "util/decision.hpp"

namespace floodwall {

struct HeaderField {
  const char *name = nullptr;  // static, canonical case
  std::string value;
};

// The limit headers of a decision, in a fixed order; at most kMaxResponseHeaders of them (the C ABI's
// FW_RESPONSE_MAX_HEADERS).
constexpr size_t kMaxResponseHeaders = 8;
struct HeaderFields {
  std::array<HeaderField, kMaxResponseHeaders> items;
  size_t count = 0;
};
// With the policy, its limits and quotas (Decision::rules) are listed and reported too.
HeaderFields response_headers(const Decision &d, const Policy *p = nullptr);

// The same as "Name: value\r\n" lines.
std::string format_headers(const Decision &d, const Policy *p = nullptr);
// The body of a rejection in the policy's body_format; empty for an allowed decision.
std::string format_body(const Decision &d, const Policy &p);
// Its media type: "application/json" or "application/problem+json"; "" for an allowed decision.
const char *body_content_type(const Decision &d, const Policy &p);
// Shortest text that reads back as the same double ("100", "0.5").
std::string format_number(double v);
void append_json_string(std::string &out, std::string_view s);
// An instant (seconds since the epoch) as RFC 3339 in UTC, "2027-01-01T00:00:00Z"; "" outside years 1970-9999.
std::string utc_time(int64_t s);

}  // namespace floodwall
