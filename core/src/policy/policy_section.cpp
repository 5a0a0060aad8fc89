#include "policy/policy_section.hpp"

#include <cmath>

#include "util/token_bucket.hpp"

namespace floodwall::policy_parse {

std::string format_seconds(double s) {
  std::ostringstream o;
  o << s;
  return o.str();
}

std::string show(const json &v) {
  std::string s = v.dump(-1, ' ', true, json::error_handler_t::replace);
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return s;
}

BucketLimits bucket(const Section &s) {
  BucketLimits b;
  // A rate above a million tokens per second is not a limit any more; the bound keeps the
  // micro-token arithmetic inside the integers a double holds exactly.
  b.rate = s.number("rate", std::nullopt, 0, true, 1e6);
  b.burst = s.integer("burst", std::nullopt, 1, 1'000'000'000);
  b.rate_m = static_cast<int64_t>(std::llround(b.rate * 1e6));
  if (b.rate_m < 1) throw PolicyError(s.field("rate"), "must be at least 0.000001");
  b.burst_m = b.burst * 1'000'000;
  // The bucket's state is the instant it is full again, in ns; a refill from empty must stay below
  // 2^53 ns so that Lua's doubles hold every debt exactly (token_bucket.hpp).
  // Compared as a double first: a refill beyond int64 (a burst of 1e9 at 0.000001/s) would overflow the
  // conversion in bucket_cost_ns and pass the check (found by fuzz/policy_fuzz).
  if (static_cast<double>(b.burst_m) * 1e9 / static_cast<double>(b.rate_m) > static_cast<double>(kMaxRefillNs) ||
      bucket_cost_ns(b.rate_m, b.burst_m) > kMaxRefillNs)
    throw PolicyError(s.field("burst"), "takes more than 90 days to refill at this rate (burst / rate)");
  return b;
}

bool valid_name(const std::string &n) {
  return !n.empty() && n.size() <= 32 && std::all_of(n.begin(), n.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '_' || c == '-' || c == '.';
  });
}

}  // namespace floodwall::policy_parse
