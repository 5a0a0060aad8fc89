// The one formatter: exact header text and bodies, the same bytes for every language.
#include "http/formatter.hpp"

#include <gtest/gtest.h>

#include "harness.hpp"

using floodwall::Decision;
using floodwall::FailReason;
using floodwall::Limiter;
using floodwall::Ticket;
using floodwall::testing::Sim;

namespace {
const char *kRoutes = R"({"request_rate": {"rate": 100, "burst": 500}, "concurrency": {"limit": 20}})";
}

// RateLimit-Policy lists every policy; RateLimit reports the one closest to exhaustion: 19 of 20 slots
// left is closer than 499 of 500 tokens.
TEST(Formatter, AllowedResponseCarriesTheDraftsFieldsAndTheLegacyOnes) {
  Sim s(kRoutes);
  Decision d = s.admit("t");
  EXPECT_EQ(floodwall::format_headers(d),
            "RateLimit-Policy: \"request_rate\";q=500;w=5, \"concurrency\";q=20;qu=\"concurrent-requests\"\r\n"
            "RateLimit: \"concurrency\";r=19\r\n"
            "RateLimit-Limit: 500\r\n"
            "RateLimit-Remaining: 499\r\n"
            "RateLimit-Reset: 1\r\n");
  EXPECT_EQ(floodwall::format_body(d, s.guard->policy()), "");
}

// The policy's "headers": the IETF fields alone, or none at all (a rejection keeps its Retry-After).
TEST(Formatter, ThePolicyChoosesTheIetfFieldsAloneOrNoLimitHeaders) {
  Sim ietf(R"({"request_rate": {"rate": 100, "burst": 500}, "concurrency": {"limit": 20}, "headers": "ietf"})");
  EXPECT_EQ(floodwall::format_headers(ietf.admit("t"), &ietf.guard->policy()),
            "RateLimit-Policy: \"request_rate\";q=500;w=5, \"concurrency\";q=20;qu=\"concurrent-requests\"\r\n"
            "RateLimit: \"concurrency\";r=19\r\n");
  for (int i = 0; i < 20; i++) ietf.admit("u");  // the slots are held: the 21st is refused
  EXPECT_EQ(floodwall::format_headers(ietf.admit("u"), &ietf.guard->policy()),
            "RateLimit-Policy: \"request_rate\";q=500;w=5, \"concurrency\";q=20;qu=\"concurrent-requests\"\r\n"
            "RateLimit: \"concurrency\";r=0\r\n"
            "Retry-After: 1\r\n");

  Sim none(R"({"request_rate": {"rate": 100, "burst": 500}, "headers": "none"})");
  EXPECT_EQ(floodwall::format_headers(none.admit("t"), &none.guard->policy()), "");
  for (int i = 0; i < 499; i++) none.admit("t");
  Decision rejected = none.admit("t");
  ASSERT_FALSE(rejected.allowed);
  EXPECT_EQ(floodwall::format_headers(rejected, &none.guard->policy()), "Retry-After: 1\r\n");
  EXPECT_NE(floodwall::format_body(rejected, none.guard->policy()), "") << "the body is the same";

  Sim all(R"({"request_rate": {"rate": 100, "burst": 500}, "headers": "all"})");
  EXPECT_EQ(floodwall::format_headers(all.admit("t"), &all.guard->policy()),
            "RateLimit-Policy: \"request_rate\";q=500;w=5\r\n"
            "RateLimit: \"request_rate\";r=499;t=1\r\n"
            "RateLimit-Limit: 500\r\n"
            "RateLimit-Remaining: 499\r\n"
            "RateLimit-Reset: 1\r\n");
}

// On a rejection the effective window t is the Retry-After value: the draft forbids a Retry-After earlier
// than the end of the window RateLimit states (t=5 with Retry-After 1 was the bug).
TEST(Formatter, RequestRateRejectionSaysWhichLimitWhatItIsAndWhenToComeBack) {
  Sim s(R"({"request_rate": {"rate": 100, "burst": 500}})");
  for (int i = 0; i < 500; i++) s.admit("t");
  Decision d = s.admit("t");
  EXPECT_EQ(floodwall::format_headers(d),
            "RateLimit-Policy: \"request_rate\";q=500;w=5\r\n"
            "RateLimit: \"request_rate\";r=0;t=1\r\n"
            "RateLimit-Limit: 500\r\n"
            "RateLimit-Remaining: 0\r\n"
            "RateLimit-Reset: 1\r\n"
            "Retry-After: 1\r\n");
  EXPECT_EQ(
      floodwall::format_body(d, s.guard->policy()),
      R"({"error":{"type":"rate_limit_error","limit_type":"request_rate","message":"Request rate limit exceeded: )"
      R"(100 requests/second sustained (bursts to 500). Retry after 1s.","limit":500,"rate":100,"retry_after":1}})");
}

// A request that costs 300 tokens is told so, in the unit the limit is counted in.
TEST(Formatter, AWeightedRejectionNamesItsCostAndTheLimit) {
  Sim s(R"({"request_rate": {"rate": 100, "burst": 500}})");
  for (int i = 0; i < 500; i++) s.admit("t");
  Decision d = s.admit("t", 300);
  EXPECT_EQ(d.cost, 300u);
  EXPECT_EQ(floodwall::format_headers(d),
            "RateLimit-Policy: \"request_rate\";q=500;w=5\r\n"
            "RateLimit: \"request_rate\";r=0;t=3\r\n"
            "RateLimit-Limit: 500\r\n"
            "RateLimit-Remaining: 0\r\n"
            "RateLimit-Reset: 3\r\n"
            "Retry-After: 3\r\n");
  EXPECT_EQ(floodwall::format_body(d, s.guard->policy()),
            R"({"error":{"type":"rate_limit_error","limit_type":"request_rate","message":"Request rate limit )"
            R"(exceeded: this request costs 300 tokens; the limit is 100 tokens/second sustained (bursts to 500). )"
            R"(Retry after 3s.","limit":500,"rate":100,"cost":300,"retry_after":3}})");
}

TEST(Formatter, ProblemJsonBodiesUseTheDraftsProblemTypes) {
  Sim s(R"({"request_rate": {"rate": 100, "burst": 2}, "body_format": "problem+json"})");
  s.admit("t");
  s.admit("t");
  Decision d = s.admit("t");
  EXPECT_STREQ(floodwall::body_content_type(d, s.guard->policy()), "application/problem+json");
  EXPECT_EQ(floodwall::format_body(d, s.guard->policy()),
            R"({"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Request cannot be )"
            R"(satisfied as assigned quota has been exceeded","status":429,"detail":"Request rate limit exceeded: 100 )"
            R"(requests/second sustained (bursts to 2). Retry after 1s.","violated-policies":["request_rate"],)"
            R"("limit_type":"request_rate","limit":2,"rate":100,"retry_after":1})");
  Sim f(R"({"fleet": {"capacity": 1}, "body_format": "problem+json"})");
  f.admit("a");
  Decision shed = f.admit("b");
  ASSERT_EQ(shed.status, 503);
  std::string body = floodwall::format_body(shed, f.guard->policy());
  EXPECT_EQ(body.rfind(R"({"type":"https://iana.org/assignments/http-problem-types#temporary-reduced-capacity",)", 0),
            0u)
      << body;
  EXPECT_NE(body.find(R"("status":503)"), std::string::npos);
  EXPECT_NE(body.find(R"("violated-policies":["fleet"])"), std::string::npos);
  EXPECT_STREQ(floodwall::body_content_type(s.admit("other"), s.guard->policy()), "") << "allowed: no body";
  Sim plain(kRoutes);
  EXPECT_STREQ(floodwall::body_content_type(shed, plain.guard->policy()), "application/json");
}

TEST(Formatter, BodyFormatIsValidated) {
  EXPECT_THROW(
      {
        try {
          floodwall::parse_policy(R"({"body_format": "xml"})");
        } catch (const floodwall::PolicyError &e) {
          EXPECT_EQ(e.field(), "body_format");
          throw;
        }
      },
      floodwall::PolicyError);
}

// When the request rate rejects, RateLimit reports its bucket even when the concurrency limit is closer to
// exhaustion; and when concurrency rejects, its slots.
TEST(Formatter, RateLimitReportsTheLimitThatRejected) {
  Sim s(R"({"request_rate": {"rate": 100, "burst": 3}, "concurrency": {"limit": 2}})");
  Decision a = s.admit("t");
  EXPECT_EQ(floodwall::response_headers(a).items[1].value, "\"concurrency\";r=1") << "1 of 2 slots < 2 of 3 tokens";
  Decision b = s.admit("t");
  Decision c = s.admit("t");
  ASSERT_EQ(c.limiter, Limiter::concurrency);
  EXPECT_EQ(floodwall::response_headers(c).items[1].value, "\"concurrency\";r=0");
  s.guard->release(a.ticket);
  s.guard->release(b.ticket);
  Decision d = s.admit("t");
  Decision e = s.admit("t");
  ASSERT_EQ(e.limiter, Limiter::request_rate);
  EXPECT_EQ(floodwall::response_headers(e).items[1].value, "\"request_rate\";r=0;t=1");
  s.guard->release(d.ticket);
}

TEST(Formatter, ConcurrencyRejection) {
  Sim s(R"({"concurrency": {"limit": 1}})");
  s.admit("t");
  Decision d = s.admit("t");
  EXPECT_EQ(floodwall::format_headers(d),
            "RateLimit-Policy: \"concurrency\";q=1;qu=\"concurrent-requests\"\r\n"
            "RateLimit: \"concurrency\";r=0\r\n"
            "Retry-After: 1\r\n");
  EXPECT_EQ(floodwall::format_body(d, s.guard->policy()),
            R"({"error":{"type":"rate_limit_error","limit_type":"concurrency","message":"Concurrent request limit )"
            R"(exceeded: 1 requests in flight allowed. Retry after 1s.","limit":1,"retry_after":1}})");
}

TEST(Formatter, FleetAndUtilizationAre503sThatSayWeAreDegraded) {
  Sim s(R"({"fleet": {"capacity": 1}, "docs_url": "https://docs.example/limits"})");
  s.admit("a");
  Decision d = s.admit("b");
  ASSERT_EQ(d.status, 503);
  EXPECT_EQ(floodwall::format_headers(d), "Retry-After: 1\r\n");
  EXPECT_EQ(floodwall::format_body(d, s.guard->policy()),
            R"({"error":{"type":"service_unavailable","limit_type":"fleet","message":"Service degraded: non-critical )"
            R"(traffic is being shed to keep capacity for critical requests. Retry with backoff after 1s. See )"
            R"(https://docs.example/limits","retry_after":1}})");
  Decision u;
  u.status = 503;
  u.limiter = Limiter::utilization;
  u.retry_after_s = 8;
  u.limit = 500;
  u.rate = 100;
  EXPECT_EQ(floodwall::format_headers(u), "RateLimit-Policy: \"request_rate\";q=500;w=5\r\nRetry-After: 8\r\n");
  EXPECT_NE(floodwall::format_body(u, s.guard->policy()).find("\"limit_type\":\"utilization\""), std::string::npos);
}

TEST(Formatter, FailedOpenAdvertisesOnlyThePolicy) {
  Decision d;
  d.allowed = 1;
  d.status = 200;
  d.failed_open = 1;
  d.limit = 500;
  d.rate = 100;
  EXPECT_EQ(floodwall::format_headers(d), "RateLimit-Policy: \"request_rate\";q=500;w=5\r\n");
}

TEST(Formatter, JsonStringsEscapeEveryByteThatIsNotPrintableAscii) {
  std::string out;
  floodwall::append_json_string(out, std::string("a\"\\\n\x01\xff", 6));
  EXPECT_EQ(out, R"("a\"\\\n\u0001\u00ff")");
  EXPECT_EQ(floodwall::format_number(100), "100");
  EXPECT_EQ(floodwall::format_number(0.5), "0.5");
}
