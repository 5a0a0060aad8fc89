// The response formatter on any decision: every field from the input, negative, huge, NaN or infinite
// (a binding hands the C ABI decisions it rebuilt itself), the enums within their C ranges, and both body
// formats with a docs_url from the input. No header value may hold CR, LF or any other control byte, and
// every rejection body must be JSON that parses.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>

#include "check.hpp"
#include "http/formatter.hpp"
#include "mapping.hpp"
#include "policy/policy.hpp"

namespace {

// Any bit pattern: NaN, infinities, denormals and negative zero included.
double any_double(FuzzedDataProvider &in) {
  uint64_t bits = in.ConsumeIntegral<uint64_t>();
  double d;
  std::memcpy(&d, &bits, sizeof d);
  return d;
}

void check_value(const std::string &v) {
  for (unsigned char c : v) FW_FUZZ_CHECK(c >= 0x20 && c < 0x7f);  // no CR, LF, NUL or other control byte
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  FuzzedDataProvider in(data, size);
  // A caller's C struct of any version, read as the C ABI reads it (capi/src/mapping.hpp).
  fw_decision c = FW_DECISION_INIT;
  c.version = in.ConsumeIntegralInRange<unsigned>(1, FW_DECISION_VERSION);
  c.allowed = in.ConsumeIntegral<int>();
  c.status = in.ConsumeIntegral<int>();
  // An unscoped C enum holds the values of its bits (0-7 here); beyond that the C++ side may not even load it.
  c.limiter = static_cast<fw_limiter>(in.ConsumeIntegralInRange<int>(0, 7));
  c.dark_limiter = static_cast<fw_limiter>(in.ConsumeIntegralInRange<int>(0, 7));
  c.failed_open = in.ConsumeIntegral<int>();
  c.fail_reason = static_cast<fw_fail_reason>(in.ConsumeIntegralInRange<int>(0, 7));
  c.limit = in.ConsumeIntegral<int64_t>();
  c.remaining = in.ConsumeIntegral<int64_t>();
  c.reset_s = in.ConsumeIntegral<int64_t>();
  c.retry_after_s = in.ConsumeIntegral<int64_t>();
  c.rate = any_double(in);
  c.concurrency_limit = in.ConsumeIntegral<int64_t>();
  c.concurrency_remaining = in.ConsumeIntegral<int64_t>();
  c.ticket = in.ConsumeIntegral<uint64_t>();
  c.degraded = in.ConsumeIntegral<int>();
  c.cost = in.ConsumeIntegral<uint64_t>();
  // Version 4: the limits and quotas (indexes in and far beyond the policy's) and a block.
  c.rules = in.ConsumeIntegral<uint64_t>();
  c.rule = in.ConsumeIntegralInRange<int>(-3, 70);
  c.dark_rule = in.ConsumeIntegralInRange<int>(-3, 70);
  c.shown_rule = in.ConsumeIntegralInRange<int>(-3, 70);
  c.rule_limit = in.ConsumeIntegral<int64_t>();
  c.rule_remaining = in.ConsumeIntegral<int64_t>();
  c.rule_reset_s = in.ConsumeIntegral<int64_t>();
  c.rule_window_end_s = in.ConsumeIntegral<int64_t>();
  c.blocked = in.ConsumeIntegral<int>();
  c.blocked_until_s = in.ConsumeIntegral<int64_t>();
  const floodwall::Decision d = fw_capi::read_decision(&c);
  // A policy with two limits and a quota, so that rule indexes name something.
  static const floodwall::Policy rules = floodwall::parse_policy(
      R"({"request_rate": {"rate": 0.5, "burst": 3, "limits": [{"name": "search", "routes": ["/s*"], "rate": 1e-6,
          "burst": 1}, {"name": "w", "routes": ["*"], "rate": 1000000, "burst": 1000000000}]},
          "quotas": [{"name": "monthly", "limit": 1000000000000, "period": "month", "timezone": "UTC-12:00"}]})");
  floodwall::Policy p = rules;
  p.body_format = in.ConsumeBool() ? floodwall::BodyFormat::problem_json : floodwall::BodyFormat::json;
  p.headers = static_cast<floodwall::HeaderSet>(in.ConsumeIntegralInRange<int>(0, 2));
  p.docs_url = in.ConsumeRemainingBytesAsString();  // parse_policy bounds it to 512 bytes; any bytes here

  floodwall::HeaderFields h = floodwall::response_headers(d, &p);
  FW_FUZZ_CHECK(h.count <= FW_RESPONSE_MAX_HEADERS);
  std::string joined;
  bool retry_after = false;
  for (size_t i = 0; i < h.count; i++) {
    FW_FUZZ_CHECK(h.items[i].name != nullptr);
    check_value(h.items[i].name);
    check_value(h.items[i].value);
    FW_FUZZ_CHECK(!h.items[i].value.empty());
    if (std::strcmp(h.items[i].name, "Retry-After") == 0) {
      retry_after = true;
      FW_FUZZ_CHECK(h.items[i].value != "0" && h.items[i].value[0] != '-');  // at least 1
    }
    joined += h.items[i].name;
    joined += ": ";
    joined += h.items[i].value;
    joined += "\r\n";
  }
  FW_FUZZ_CHECK(retry_after == (!d.allowed && !(d.blocked && d.blocked_until_s <= 0)));  // a block for good: none
  FW_FUZZ_CHECK(floodwall::format_headers(d, &p) == joined);

  for (auto format : {floodwall::BodyFormat::json, floodwall::BodyFormat::problem_json}) {
    p.body_format = format;
    std::string body = floodwall::format_body(d, p);
    std::string type = floodwall::body_content_type(d, p);
    if (d.allowed) {
      FW_FUZZ_CHECK(body.empty() && type.empty());
      continue;
    }
    FW_FUZZ_CHECK(!type.empty());
    for (unsigned char c : body) FW_FUZZ_CHECK(c >= 0x20 && c < 0x7f);  // ASCII JSON, every other byte escaped
    nlohmann::json doc;
    try {
      doc = nlohmann::json::parse(body);
    } catch (const nlohmann::json::exception &e) {
      std::fprintf(stderr, "body is not JSON (%s): %s\n", e.what(), body.c_str());
      std::abort();
    }
    const nlohmann::json &top = format == floodwall::BodyFormat::json ? doc.at("error") : doc;
    if (d.blocked) {  // a 403: a retry_after only for a block that ends
      FW_FUZZ_CHECK(top.at("limit_type") == "blocked");
      if (!top.contains("retry_after")) continue;
    }
    FW_FUZZ_CHECK(top.at("retry_after").is_number_integer() && top.at("retry_after").get<int64_t>() >= 1);
  }
  return 0;
}
