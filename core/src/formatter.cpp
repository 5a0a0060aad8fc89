#include "formatter.hpp"

#include <charconv>
#include <cmath>

namespace floodwall {

std::string format_number(double v) {
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

void append_json_string(std::string &out, std::string_view s) {
  static const char digits[] = "0123456789abcdef";
  out.push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c >= 0x7f) {  // ASCII only: a byte that is not valid UTF-8 cannot slip through
          out += "\\u00";
          out.push_back(digits[c >> 4]);
          out.push_back(digits[c & 15]);
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  out.push_back('"');
}

namespace {

void line(std::string &out, const char *name, const std::string &value) {
  out += name;
  out += ": ";
  out += value;
  out += "\r\n";
}

int64_t window_s(const fw_decision &d) {
  return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(static_cast<double>(d.limit) / d.rate)));
}

}  // namespace

std::string format_headers(const fw_decision &d) {
  std::string out;
  bool rate = d.limit > 0 && d.rate > 0;
  bool conc = d.concurrency_limit > 0;
  std::string policy, current;
  if (rate) {
    policy = "\"request_rate\";q=" + std::to_string(d.limit) + ";w=" + std::to_string(window_s(d));
    current = "\"request_rate\";r=" + std::to_string(d.remaining) + ";t=" + std::to_string(d.reset_s);
  }
  if (conc) {
    if (!policy.empty()) policy += ", ";
    policy += "\"concurrency\";q=" + std::to_string(d.concurrency_limit) + ";qu=\"concurrent-requests\"";
    if (!current.empty()) current += ", ";
    current += "\"concurrency\";r=" + std::to_string(d.concurrency_remaining);
  }
  if (!policy.empty()) line(out, "RateLimit-Policy", policy);
  // A failed-open decision, a refusal because the store is unavailable, or one the local shedder made
  // before asking the store, knows the policy but not the bucket's state: it advertises only the policy.
  // A degraded decision advertises the local table's state, which is what decided it.
  bool unavailable = !d.allowed && d.limiter == FW_LIMITER_NONE;
  if (!d.failed_open && !unavailable && d.limiter != FW_LIMITER_UTILIZATION) {
    if (!current.empty()) line(out, "RateLimit", current);
    if (rate) {
      line(out, "RateLimit-Limit", std::to_string(d.limit));
      line(out, "RateLimit-Remaining", std::to_string(d.remaining));
      line(out, "RateLimit-Reset", std::to_string(d.reset_s));
    }
  }
  if (!d.allowed) line(out, "Retry-After", std::to_string(std::max<int64_t>(1, d.retry_after_s)));
  return out;
}

std::string format_body(const fw_decision &d, const Policy &p) {
  if (d.allowed) return {};
  int64_t retry = std::max<int64_t>(1, d.retry_after_s);
  std::string type, limit_type = limiter_name(static_cast<Limiter>(d.limiter)), message;
  std::string extra;
  switch (d.limiter) {
    case FW_LIMITER_REQUEST_RATE:
      type = "rate_limit_error";
      message = "Request rate limit exceeded: " + format_number(d.rate) + " requests/second sustained (bursts to " +
                std::to_string(d.limit) + "). Retry after " + std::to_string(retry) + "s.";
      extra = ",\"limit\":" + std::to_string(d.limit) + ",\"rate\":" + format_number(d.rate);
      break;
    case FW_LIMITER_CONCURRENCY:
      type = "rate_limit_error";
      message = "Concurrent request limit exceeded: " + std::to_string(d.concurrency_limit) +
                " requests in flight allowed. Retry after " + std::to_string(retry) + "s.";
      extra = ",\"limit\":" + std::to_string(d.concurrency_limit);
      break;
    case FW_LIMITER_FLEET:
      type = "service_unavailable";
      message =
          "Service degraded: non-critical traffic is being shed to keep capacity for critical requests. "
          "Retry with backoff after " +
          std::to_string(retry) + "s.";
      break;
    case FW_LIMITER_NONE:  // the store did not answer and redis.fallback is "closed"
      type = "service_unavailable";
      limit_type = "unavailable";
      message =
          "Service unavailable: the rate limiter cannot reach its store, and this service refuses requests it "
          "cannot limit. Retry with backoff after " +
          std::to_string(retry) + "s.";
      break;
    default:
      type = "service_unavailable";
      limit_type = "utilization";
      message = "Service degraded: this server is overloaded and shedding load. Retry with backoff after " +
                std::to_string(retry) + "s.";
      break;
  }
  if (!p.docs_url.empty()) message += " See " + p.docs_url;
  std::string out = "{\"error\":{\"type\":";
  append_json_string(out, type);
  out += ",\"limit_type\":";
  append_json_string(out, limit_type);
  out += ",\"message\":";
  append_json_string(out, message);
  out += extra;
  out += ",\"retry_after\":" + std::to_string(retry) + "}}";
  return out;
}

}  // namespace floodwall
