// How a caller of a floodwall-protected API comes back after a 429 or a 503, and what a Retry-After field
// says: one implementation behind fw_backoff_delay and fw_parse_retry_after, so every language waits alike.
#pragma once

#include <optional>
#include <string_view>

namespace floodwall {

// The backoff's parameters; the defaults are every language's (fw_backoff's FW_BACKOFF_INIT).
struct Backoff {
  double base_s = 0.1;    // the first retry waits up to base_s
  double cap_s = 20.0;    // no jitter above cap_s
  unsigned attempts = 5;  // calls in all, the first one included
};

// Capped exponential backoff with full jitter, never earlier than the server asked:
//   (retry_after_s >= 0 ? retry_after_s : 0) + random01 * min(cap_s, base_s * 2^min(attempt, 64))
// `attempt` is 0 for the first retry; a negative retry_after_s means the server sent none. The exponent
// stops at 64, where any base already exceeds any sane cap, so a huge attempt number costs nothing.
// Throws BadRequest naming the field ("backoff.base_s: must be a finite number > 0", "random: must be in
// [0, 1)", ...).
double backoff_delay(const Backoff &b, unsigned attempt, double retry_after_s, double random01);

// A Retry-After field value (RFC 9110 10.2.3), in seconds from now_unix_s, never negative:
// - delay-seconds: digits only ("1.5", "-1", "+1" are not), spaces and tabs around allowed; values above
//   1e12 (31,000 years) are 1e12.
// - HTTP-date: IMF-fixdate "Sun, 06 Nov 1994 08:49:37 GMT", RFC 850 "Sunday, 06-Nov-94 08:49:37 GMT" or
//   asctime "Sun Nov  6 08:49:37 1994". Day and month names in any case; the day name is checked to be one,
//   not to be that date's (servers get it wrong, the date is what counts). An RFC 850 year is in the
//   century that puts it at most 50 years after now_unix_s's year (RFC 9110 5.6.7).
// nullopt when the value is neither, and for a date when now_unix_s is not a finite number.
// Pure arithmetic (days from the civil date), no timegm or TZ: thread-safe and locale-free.
std::optional<double> parse_retry_after(std::string_view value, double now_unix_s);

}  // namespace floodwall
