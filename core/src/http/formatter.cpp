#include "http/formatter.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "stores/quota_window.hpp"

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

}  // namespace

// An instant as RFC 3339 in UTC, "2027-01-01T00:00:00Z".
std::string utc_time(int64_t s) {
  if (s < 0 || s >= 253402300800) return "";  // beyond year 9999: a decision rebuilt with any number
  int64_t days = floor_div(s, 86400), secs = s - days * 86400;
  CivilMonth cm = civil_month(days);
  int64_t day = days - days_from_civil(cm.year, cm.month, 1) + 1;
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04lld-%02lld-%02lldT%02lld:%02lld:%02lldZ", static_cast<long long>(cm.year),
                static_cast<long long>(cm.month), static_cast<long long>(day), static_cast<long long>(secs / 3600),
                static_cast<long long>(secs / 60 % 60), static_cast<long long>(secs % 60));
  return buf;
}

namespace {

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

const Rule *rule_at(const Policy *p, int i) {
  return p && i >= 0 && static_cast<size_t>(i) < p->rules.size() ? &p->rules[static_cast<size_t>(i)] : nullptr;
}

int64_t rule_window_s(const Rule &r) {
  if (!r.quota)
    return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(static_cast<double>(r.bucket.burst) / r.bucket.rate)));
  switch (r.period) {
    case QuotaPeriod::hour: return 3600;
    case QuotaPeriod::day: return 86400;
    case QuotaPeriod::month: return 2592000;  // nominal (30 days); the body and RateLimit's t say when it ends
  }
  return 86400;
}

}  // namespace

// A blocked tenant's 403: floodwall's JSON, or an RFC 9457 problem document.
std::string blocked_body(const Decision &d, const Policy &p) {
  bool timed = d.blocked_until_s > 0 && !utc_time(d.blocked_until_s).empty();
  std::string message =
      "This client is blocked from this API" +
      (timed ? " until " + utc_time(d.blocked_until_s) + ". Retry after " + std::to_string(retry_after(d)) + "s."
             : std::string("."));
  if (!p.docs_url.empty()) message += " See " + p.docs_url;
  std::string out;
  if (p.body_format == BodyFormat::problem_json) {
    out = "{\"type\":\"about:blank\",\"title\":\"Forbidden\",\"status\":403,\"detail\":";
    append_json_string(out, message);
    out += ",\"limit_type\":\"blocked\"";
  } else {
    out = "{\"error\":{\"type\":\"forbidden\",\"limit_type\":\"blocked\",\"message\":";
    append_json_string(out, message);
  }
  if (timed)
    out += ",\"until\":\"" + utc_time(d.blocked_until_s) + "\",\"retry_after\":" + std::to_string(retry_after(d));
  out += p.body_format == BodyFormat::problem_json ? "}" : "}}";
  return out;
}

HeaderFields response_headers(const Decision &d, const Policy *p) {
  HeaderFields h;
  if (d.blocked) {  // no limit of the policy refused it: Retry-After only, when the block ends
    if (!d.allowed && d.blocked_until_s > 0) add(h, "Retry-After", std::to_string(retry_after(d)));
    return h;
  }
  HeaderSet set = p ? p->headers : HeaderSet::all;
  if (set == HeaderSet::none) {
    if (!d.allowed) add(h, "Retry-After", std::to_string(retry_after(d)));
    return h;
  }
  bool rate = d.limit > 0 && d.rate > 0;
  bool conc = d.concurrency_limit > 0;
  std::string policy;
  if (rate) policy = "\"request_rate\";q=" + std::to_string(d.limit) + ";w=" + std::to_string(window_s(d));
  for (int i = 0; p && i < 64 && (d.rules >> i) != 0; i++) {
    const Rule *r = (d.rules >> i) & 1 ? rule_at(p, i) : nullptr;
    if (!r) continue;
    if (!policy.empty()) policy += ", ";
    policy += "\"" + r->name + "\";q=" + std::to_string(r->quota ? r->quota_limit : r->bucket.burst) +
              ";w=" + std::to_string(rule_window_s(*r));
  }
  if (conc) {
    if (!policy.empty()) policy += ", ";
    policy += "\"concurrency\";q=" + std::to_string(d.concurrency_limit) + ";qu=\"concurrent-requests\"";
  }
  if (!policy.empty()) add(h, "RateLimit-Policy", std::move(policy));
  // A failed-open decision, a refusal because the store is unavailable, or one the local shedder made
  // before asking the store, knows the policy but not the bucket's state: it advertises only the policy.
  // A degraded decision advertises the local table's state, which is what decided it.
  bool unavailable = !d.allowed && d.limiter == Limiter::none;  // (or blocked: no limit's state either)
  bool state = !d.failed_open && !unavailable && d.limiter != Limiter::utilization && d.limiter != Limiter::adaptive;
  // A limit or quota closer to exhaustion than the tenant's bucket (or the one that rejected) stands in
  // for the bucket in RateLimit and the older drafts' fields.
  const Rule *shown = rule_at(p, d.shown_rule);
  bool ruled = shown && (d.limiter != Limiter::request_rate || d.rule == d.shown_rule);
  int64_t t = d.allowed ? (ruled ? d.rule_reset_s : d.reset_s) : retry_after(d);  // the effective window
  if (state && (rate || conc || ruled)) {
    // The service limit closest to exhaustion; on a rejection, the limiter that rejected.
    int64_t limit = ruled ? d.rule_limit : d.limit, remaining = ruled ? d.rule_remaining : d.remaining;
    bool counted = rate || ruled;
    bool show_conc;
    if (d.limiter == Limiter::concurrency)
      show_conc = true;
    else if (d.limiter == Limiter::request_rate || !conc)
      show_conc = false;
    else
      show_conc = !counted || static_cast<double>(d.concurrency_remaining) / static_cast<double>(d.concurrency_limit) <
                                  static_cast<double>(remaining) / static_cast<double>(limit);
    std::string name = ruled ? shown->name : "request_rate";
    if (show_conc)
      add(h, "RateLimit", "\"concurrency\";r=" + std::to_string(d.concurrency_remaining));
    else
      add(h, "RateLimit", "\"" + name + "\";r=" + std::to_string(remaining) + ";t=" + std::to_string(t));
    if (counted && set == HeaderSet::all) {
      add(h, "RateLimit-Limit", std::to_string(limit));
      add(h, "RateLimit-Remaining", std::to_string(remaining));
      add(h, "RateLimit-Reset", std::to_string(t));
    }
  }
  // A block for good has no time to come back at.
  if (!d.allowed && !(d.blocked && d.blocked_until_s <= 0)) add(h, "Retry-After", std::to_string(retry_after(d)));
  return h;
}

std::string format_headers(const Decision &d, const Policy *p) {
  std::string out;
  HeaderFields h = response_headers(d, p);
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

namespace {

// What a refusal's body says, in both of its forms: the Stripe-like {"error": ...} (type, limit_type,
// message) and RFC 9457's problem+json (problem, title, detail = message, violated-policies); `extra` is
// the fields both carry after limit_type.
struct Refusal {
  std::string type = "service_unavailable";
  std::string limit_type;
  std::string message;
  std::string extra;
  const char *problem = kReducedCapacity;
  const char *title = "Request cannot be satisfied due to temporary server capacity constraints";
  std::string policy_name;  // the draft's violated policy: the limiter, or the limit or quota
};

void over_quota(Refusal &r) {
  r.type = "rate_limit_error";
  r.problem = kQuotaExceeded;
  r.title = "Request cannot be satisfied as assigned quota has been exceeded";
}

std::string retry_text(int64_t retry) {
  return "Retry after " + std::to_string(retry) + "s.";
}

// The tenant's bucket. A weighted request is told what it costs against what the bucket gives, in one
// unit: tokens.
void request_rate_refusal(Refusal &r, const Decision &d, uint64_t cost, int64_t retry) {
  over_quota(r);
  if (cost > 1) {
    r.message = "Request rate limit exceeded: this request costs " + std::to_string(cost) + " tokens; the limit is " +
                format_number(d.rate) + " tokens/second sustained (bursts to " + std::to_string(d.limit) + "). " +
                retry_text(retry);
  } else {
    r.message = "Request rate limit exceeded: " + format_number(d.rate) + " requests/second sustained (bursts to " +
                std::to_string(d.limit) + "). " + retry_text(retry);
  }
  r.extra = ",\"limit\":" + std::to_string(d.limit) + ",\"rate\":" + json_number(d.rate);
  if (cost > 1) r.extra += ",\"cost\":" + std::to_string(cost);
}

void concurrency_refusal(Refusal &r, const Decision &d, int64_t retry) {
  over_quota(r);
  r.message = "Concurrent request limit exceeded: " + std::to_string(d.concurrency_limit) +
              " requests in flight allowed. " + retry_text(retry);
  r.extra = ",\"limit\":" + std::to_string(d.concurrency_limit);
}

// A limit or a quota of the policy's rules.
void rule_refusal(Refusal &r, const Decision &d, const Rule &rule, uint64_t cost, int64_t retry) {
  over_quota(r);
  r.policy_name = rule.name;
  std::string costs = cost > 1 ? "this request costs " + std::to_string(cost) + "; " : "";
  if (rule.quota) {
    const std::string renewed = utc_time(d.rule_window_end_s);
    r.limit_type = "quota";
    r.message = "Quota \"" + rule.name + "\" exceeded: " + costs + std::to_string(rule.quota_limit) +
                (cost > 1 ? " units per " : " requests per ") + quota_period_name(rule.period) +
                (!renewed.empty() ? ", renewed at " + renewed : std::string()) + ". " + retry_text(retry);
    r.extra = ",\"policy\":\"" + rule.name + "\",\"limit\":" + std::to_string(rule.quota_limit) + ",\"period\":\"" +
              quota_period_name(rule.period) + "\"";
    if (!renewed.empty()) r.extra += ",\"reset\":\"" + renewed + "\"";
  } else {
    r.message = "Request rate limit \"" + rule.name + "\" exceeded: " + costs + format_number(rule.bucket.rate) +
                (cost > 1 ? " tokens/second" : " requests/second") + " sustained (bursts to " +
                std::to_string(rule.bucket.burst) + "). " + retry_text(retry);
    r.extra = ",\"policy\":\"" + rule.name + "\",\"limit\":" + std::to_string(rule.bucket.burst) +
              ",\"rate\":" + json_number(rule.bucket.rate);
  }
  if (cost > 1) r.extra += ",\"cost\":" + std::to_string(cost);
}

// The 503s: a shedder, the adaptive limit, or a store that did not answer with redis.fallback "closed".
void service_refusal(Refusal &r, Limiter limiter, int64_t retry) {
  const std::string backoff = "Retry with backoff after " + std::to_string(retry) + "s.";
  switch (limiter) {
    case Limiter::fleet:
      r.message =
          "Service degraded: non-critical traffic is being shed to keep capacity for critical requests. " + backoff;
      break;
    case Limiter::none:
      r.limit_type = "unavailable";
      r.message =
          "Service unavailable: the rate limiter cannot reach its store, and this service refuses requests it "
          "cannot limit. " +
          backoff;
      break;
    case Limiter::adaptive:
      r.limit_type = "adaptive";
      r.message =
          "Service degraded: this server is at the concurrency limit its latency allows and is shedding load. " +
          backoff;
      break;
    default:
      r.limit_type = "utilization";
      r.message = "Service degraded: this server is overloaded and shedding load. " + backoff;
      break;
  }
}

// RFC 9457: type, title, status, detail; the draft's "violated-policies" names the policies of
// RateLimit-Policy that rejected (none when the store was unavailable); the rest are extensions.
std::string problem_json(const Refusal &r, const Decision &d, int64_t retry) {
  std::string out = "{\"type\":";
  append_json_string(out, r.problem);
  out += ",\"title\":";
  append_json_string(out, r.title);
  out += ",\"status\":" + std::to_string(d.status) + ",\"detail\":";
  append_json_string(out, r.message);
  out += ",\"violated-policies\":[";
  if (d.limiter != Limiter::none) append_json_string(out, r.policy_name);
  out += "],\"limit_type\":";
  append_json_string(out, r.limit_type);
  out += r.extra;
  out += ",\"retry_after\":" + std::to_string(retry) + "}";
  return out;
}

std::string error_json(const Refusal &r, int64_t retry) {
  std::string out = "{\"error\":{\"type\":";
  append_json_string(out, r.type);
  out += ",\"limit_type\":";
  append_json_string(out, r.limit_type);
  out += ",\"message\":";
  append_json_string(out, r.message);
  out += r.extra;
  out += ",\"retry_after\":" + std::to_string(retry) + "}}";
  return out;
}

}  // namespace

std::string format_body(const Decision &d, const Policy &p) {
  if (d.allowed) return {};
  if (d.blocked) return blocked_body(d, p);
  const int64_t retry = retry_after(d);
  const uint64_t cost = d.cost > 1 ? d.cost : 1;  // 0 (a version 1 or 2 caller's struct) counts as 1
  Refusal r;
  r.limit_type = r.policy_name = limiter_name(d.limiter);
  const Rule *rule = d.limiter == Limiter::request_rate ? rule_at(&p, d.rule) : nullptr;
  if (rule)
    rule_refusal(r, d, *rule, cost, retry);
  else if (d.limiter == Limiter::request_rate)
    request_rate_refusal(r, d, cost, retry);
  else if (d.limiter == Limiter::concurrency)
    concurrency_refusal(r, d, retry);
  else
    service_refusal(r, d.limiter, retry);
  if (!p.docs_url.empty()) r.message += " See " + p.docs_url;
  return p.body_format == BodyFormat::problem_json ? problem_json(r, d, retry) : error_json(r, retry);
}

}  // namespace floodwall
