// The one formatter: exact header text and bodies, the same bytes for every language.
#include "formatter.hpp"

#include <gtest/gtest.h>

#include "harness.hpp"

using floodwall::testing::Sim;

namespace {
const char *kRoutes = R"({"request_rate": {"rate": 100, "burst": 500}, "concurrency": {"limit": 20}})";
}

TEST(Formatter, AllowedResponseCarriesDraft11AndLegacyHeaders) {
  Sim s(kRoutes);
  fw_decision d = s.admit("t");
  EXPECT_EQ(floodwall::format_headers(d),
            "RateLimit-Policy: \"request_rate\";q=500;w=5, \"concurrency\";q=20;qu=\"concurrent-requests\"\r\n"
            "RateLimit: \"request_rate\";r=499;t=1, \"concurrency\";r=19\r\n"
            "RateLimit-Limit: 500\r\n"
            "RateLimit-Remaining: 499\r\n"
            "RateLimit-Reset: 1\r\n");
  EXPECT_EQ(floodwall::format_body(d, s.guard->policy()), "");
}

TEST(Formatter, RequestRateRejectionSaysWhichLimitWhatItIsAndWhenToComeBack) {
  Sim s(R"({"request_rate": {"rate": 100, "burst": 500}})");
  for (int i = 0; i < 500; i++) s.admit("t");
  fw_decision d = s.admit("t", 300);
  EXPECT_EQ(floodwall::format_headers(d),
            "RateLimit-Policy: \"request_rate\";q=500;w=5\r\n"
            "RateLimit: \"request_rate\";r=0;t=5\r\n"
            "RateLimit-Limit: 500\r\n"
            "RateLimit-Remaining: 0\r\n"
            "RateLimit-Reset: 5\r\n"
            "Retry-After: 3\r\n");
  EXPECT_EQ(
      floodwall::format_body(d, s.guard->policy()),
      R"({"error":{"type":"rate_limit_error","limit_type":"request_rate","message":"Request rate limit exceeded: )"
      R"(100 requests/second sustained (bursts to 500). Retry after 3s.","limit":500,"rate":100,"retry_after":3}})");
}

TEST(Formatter, ConcurrencyRejection) {
  Sim s(R"({"concurrency": {"limit": 1}})");
  s.admit("t");
  fw_decision d = s.admit("t");
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
  fw_decision d = s.admit("b");
  ASSERT_EQ(d.status, 503);
  EXPECT_EQ(floodwall::format_headers(d), "Retry-After: 1\r\n");
  EXPECT_EQ(floodwall::format_body(d, s.guard->policy()),
            R"({"error":{"type":"service_unavailable","limit_type":"fleet","message":"Service degraded: non-critical )"
            R"(traffic is being shed to keep capacity for critical requests. Retry with backoff after 1s. See )"
            R"(https://docs.example/limits","retry_after":1}})");
  fw_decision u = FW_DECISION_INIT;
  u.status = 503;
  u.limiter = FW_LIMITER_UTILIZATION;
  u.retry_after_s = 8;
  u.limit = 500;
  u.rate = 100;
  EXPECT_EQ(floodwall::format_headers(u), "RateLimit-Policy: \"request_rate\";q=500;w=5\r\nRetry-After: 8\r\n");
  EXPECT_NE(floodwall::format_body(u, s.guard->policy()).find("\"limit_type\":\"utilization\""), std::string::npos);
}

TEST(Formatter, FailedOpenAdvertisesOnlyThePolicy) {
  fw_decision d = FW_DECISION_INIT;
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
