#include "http/formatter.hpp"

#include <algorithm>
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

int64_t window_s(const Decision &d) {
  double w = std::ceil(static_cast<double>(d.limit) / d.rate);
  // A decision a binding rebuilt may carry any rate: limit / a tiny rate is beyond int64, and converting
  // that is undefined (found by fuzz/formatter_fuzz). 2^63 is exact as a double.
  if (!(w < 9223372036854775808.0)) return INT64_MAX;
  return std::max<int64_t>(1, static_cast<int64_t>(w));
}

// A number for a JSON body: JSON has no NaN or Infinity, which a decision a binding rebuilt may carry
// (to_chars writes "nan", and the body would not parse; found by fuzz/formatter_fuzz).
std::string json_number(double v) {
  return std::isfinite(v) ? format_number(v) : "null";
}

int64_t retry_after(const Decision &d) {
  return std::max<int64_t>(1, d.retry_after_s);
}

void add(HeaderFields &h, const char *name, std::string value) {
  h.items[h.count].name = name;
  h.items[h.count].value = std::move(value);
  h.count++;
}

// The problem types of the RateLimit draft (section "Problem Types"), registered with IANA there.
constexpr const char *kQuotaExceeded = "https://iana.org/assignments/http-problem-types#quota-exceeded";
constexpr const char *kReducedCapacity = "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity";

}  // namespace

HeaderFields response_headers(const Decision &d) {
  HeaderFields h;
  bool rate = d.limit > 0 && d.rate > 0;
  bool conc = d.concurrency_limit > 0;
  std::string policy;
  if (rate) policy = "\"request_rate\";q=" + std::to_string(d.limit) + ";w=" + std::to_string(window_s(d));
  if (conc) {
    if (!policy.empty()) policy += ", ";
    policy += "\"concurrency\";q=" + std::to_string(d.concurrency_limit) + ";qu=\"concurrent-requests\"";
  }
  if (!policy.empty()) add(h, "RateLimit-Policy", std::move(policy));
  // A failed-open decision, a refusal because the store is unavailable, or one the local shedder made
  // before asking the store, knows the policy but not the bucket's state: it advertises only the policy.
  // A degraded decision advertises the local table's state, which is what decided it.
  bool unavailable = !d.allowed && d.limiter == Limiter::none;
  bool state = !d.failed_open && !unavailable && d.limiter != Limiter::utilization;
  int64_t t = d.allowed ? d.reset_s : retry_after(d);  // the effective window
  if (state && (rate || conc)) {
    // The service limit closest to exhaustion; on a rejection, the limiter that rejected.
    bool show_conc;
    if (d.limiter == Limiter::concurrency)
      show_conc = true;
    else if (d.limiter == Limiter::request_rate || !conc)
      show_conc = false;
    else
      show_conc = !rate || static_cast<double>(d.concurrency_remaining) / static_cast<double>(d.concurrency_limit) <
                               static_cast<double>(d.remaining) / static_cast<double>(d.limit);
    if (show_conc)
      add(h, "RateLimit", "\"concurrency\";r=" + std::to_string(d.concurrency_remaining));
    else
      add(h, "RateLimit", "\"request_rate\";r=" + std::to_string(d.remaining) + ";t=" + std::to_string(t));
    if (rate) {
      add(h, "RateLimit-Limit", std::to_string(d.limit));
      add(h, "RateLimit-Remaining", std::to_string(d.remaining));
      add(h, "RateLimit-Reset", std::to_string(t));
    }
  }
  if (!d.allowed) add(h, "Retry-After", std::to_string(retry_after(d)));
  return h;
}

std::string format_headers(const Decision &d) {
  std::string out;
  HeaderFields h = response_headers(d);
  for (size_t i = 0; i < h.count; i++) {
    out += h.items[i].name;
    out += ": ";
    out += h.items[i].value;
    out += "\r\n";
  }
  return out;
}

const char *body_content_type(const Decision &d, const Policy &p) {
  if (d.allowed) return "";
  return p.body_format == BodyFormat::problem_json ? "application/problem+json" : "application/json";
}

std::string format_body(const Decision &d, const Policy &p) {
  if (d.allowed) return {};
  int64_t retry = retry_after(d);
  uint64_t cost = d.cost > 1 ? d.cost : 1;  // 0 (a version 1 or 2 caller's struct) counts as 1
  std::string type, limit_type = limiter_name(d.limiter), message;
  std::string extra;
  const char *problem = kReducedCapacity;
  const char *title = "Request cannot be satisfied due to temporary server capacity constraints";
  switch (d.limiter) {
    case Limiter::request_rate:
      type = "rate_limit_error";
      problem = kQuotaExceeded;
      title = "Request cannot be satisfied as assigned quota has been exceeded";
      if (cost > 1) {
        // A weighted request is told what it costs against what the bucket gives, in one unit: tokens.
        message = "Request rate limit exceeded: this request costs " + std::to_string(cost) + " tokens; the limit is " +
                  format_number(d.rate) + " tokens/second sustained (bursts to " + std::to_string(d.limit) +
                  "). Retry after " + std::to_string(retry) + "s.";
      } else {
        message = "Request rate limit exceeded: " + format_number(d.rate) + " requests/second sustained (bursts to " +
                  std::to_string(d.limit) + "). Retry after " + std::to_string(retry) + "s.";
      }
      extra = ",\"limit\":" + std::to_string(d.limit) + ",\"rate\":" + json_number(d.rate);
      if (cost > 1) extra += ",\"cost\":" + std::to_string(cost);
      break;
    case Limiter::concurrency:
      type = "rate_limit_error";
      problem = kQuotaExceeded;
      title = "Request cannot be satisfied as assigned quota has been exceeded";
      message = "Concurrent request limit exceeded: " + std::to_string(d.concurrency_limit) +
                " requests in flight allowed. Retry after " + std::to_string(retry) + "s.";
      extra = ",\"limit\":" + std::to_string(d.concurrency_limit);
      break;
    case Limiter::fleet:
      type = "service_unavailable";
      message =
          "Service degraded: non-critical traffic is being shed to keep capacity for critical requests. "
          "Retry with backoff after " +
          std::to_string(retry) + "s.";
      break;
    case Limiter::none:  // the store did not answer and redis.fallback is "closed"
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
  std::string out;
  if (p.body_format == BodyFormat::problem_json) {
    // RFC 9457: type, title, status, detail; the draft's "violated-policies" names the policies of
    // RateLimit-Policy that rejected (none when the store was unavailable); the rest are extensions.
    out = "{\"type\":";
    append_json_string(out, problem);
    out += ",\"title\":";
    append_json_string(out, title);
    out += ",\"status\":" + std::to_string(d.status) + ",\"detail\":";
    append_json_string(out, message);
    out += ",\"violated-policies\":[";
    if (d.limiter != Limiter::none) append_json_string(out, limit_type);
    out += "],\"limit_type\":";
    append_json_string(out, limit_type);
    out += extra;
    out += ",\"retry_after\":" + std::to_string(retry) + "}";
    return out;
  }
  out = "{\"error\":{\"type\":";
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
