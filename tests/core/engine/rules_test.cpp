// Limits and quotas (request_rate.limits, quotas): several rules per tenant and route, checked with the
// tenant's own bucket in one atomic step on every store; nothing consumed unless every enforcing one
// passes; the decision names the rule that rejected; headers and bodies list and report them.
#include <floodwall.h>
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <floodwall.hpp>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "each_store.hpp"
#include "engine/guard.hpp"
#include "harness.hpp"
#include "http/formatter.hpp"
#include "policy/policy.hpp"
#include "redis_server.hpp"
#include "stores/memory_store.hpp"
#include "stores/quota_window.hpp"
#include "stores/shm_store.hpp"
#include "util/clock.hpp"

namespace floodwall::scripts {
extern const std::string_view tenant_admit;
}

using floodwall::Admission;
using floodwall::Client;
using floodwall::testing::policy_error;
using floodwall::testing::RedisServer;

namespace {

// ------------------------------------------------------------------------------------------- policy

TEST(RulesPolicy, ErrorsNameTheJsonPath) {
  auto field = [](const std::string &json) {
    std::string e = policy_error(json);
    return e.substr(0, e.find(':'));
  };
  EXPECT_EQ(
      field(R"({"request_rate": {"rate": 1, "burst": 1, "limits": [{"name": "a", "routes": ["/a"], "rate": 1}]}})"),
      "request_rate.limits[0].burst");
  EXPECT_EQ(field(R"({"request_rate": {"rate": 1, "burst": 1, "limits": [{"name": "a", "rate": 1, "burst": 2}]}})"),
            "request_rate.limits[0].routes")
      << "a limit without routes is refused";
  EXPECT_EQ(
      field(
          R"({"request_rate": {"rate": 1, "burst": 1, "limits": [{"name": "a", "routes": [], "rate": 1, "burst": 2}]}})"),
      "request_rate.limits[0].routes");
  EXPECT_EQ(
      field(R"({"quotas": [{"name": "a", "limit": 5, "period": "day"}, {"name": "b", "limit": 5, "period": "week"}]})"),
      "quotas[1].period");
  EXPECT_EQ(field(R"({"quotas": [{"name": "a", "limit": 0, "period": "day"}]})"), "quotas[0].limit");
  EXPECT_EQ(field(R"({"quotas": [{"name": "a", "limit": 5}]})"), "quotas[0].period");
  EXPECT_EQ(field(R"({"quotas": [{"name": "a\nb", "limit": 5, "period": "day"}]})"), "quotas[0].name")
      << "a control character is never written into a key";
  EXPECT_EQ(field(R"({"quotas": [{"name": "a b", "limit": 5, "period": "day"}]})"), "quotas[0].name");
  EXPECT_EQ(field(R"({"quotas": [{"name": "request_rate", "limit": 5, "period": "day"}]})"), "quotas[0].name");
  EXPECT_EQ(
      field(
          R"({"request_rate": {"rate": 1, "burst": 1, "limits": [{"name": "x", "routes": ["/a"], "rate": 1, "burst": 2}]},
                     "quotas": [{"name": "x", "limit": 5, "period": "day"}]})"),
      "quotas[0].name")
      << "names are unique among limits and quotas";
  EXPECT_EQ(field(R"({"quotas": [{"name": "a", "limit": 5, "period": "day", "timezone": "Europe/Paris"}]})"),
            "quotas[0].timezone");
  EXPECT_EQ(field(R"({"quotas": [{"name": "a", "limit": 5, "period": "day", "methods": ["G T"]}]})"),
            "quotas[0].methods[0]");
  EXPECT_EQ(field(R"({"quotas": [{"name": "a", "limit": 5, "period": "day", "mode": "loud"}]})"), "quotas[0].mode");
  EXPECT_EQ(field(R"({"quotas": {"name": "a"}})"), "quotas");
  std::string many = R"({"quotas": [)";
  for (int i = 0; i < 17; i++)
    many += std::string(i ? "," : "") + R"({"name": "q)" + std::to_string(i) + R"(", "limit": 5, "period": "day"})";
  EXPECT_EQ(field(many + "]}"), "quotas[16]");

  floodwall::Policy p = floodwall::parse_policy(
      R"({"request_rate": {"rate": 10, "burst": 20, "limits": [{"name": "search", "routes": ["/search*"], "methods": ["get"], "rate": 1, "burst": 5, "mode": "dark"}]},
          "quotas": [{"name": "monthly", "limit": 10000, "period": "month", "timezone": "UTC-05:30"}]})");
  ASSERT_EQ(p.rules.size(), 2u);
  EXPECT_EQ(p.rules[0].methods, std::vector<std::string>{"GET"});
  EXPECT_EQ(p.rules[0].mode, floodwall::Mode::dark);
  EXPECT_TRUE(p.rules[1].quota);
  EXPECT_EQ(p.rules[1].utc_offset_s, -(5 * 3600 + 30 * 60));
  EXPECT_TRUE(p.rules[0].applies("/search/items", "GET"));
  EXPECT_FALSE(p.rules[0].applies("/search/items", "POST"));
  EXPECT_FALSE(p.rules[0].applies("/v1/search", "GET"));
  EXPECT_TRUE(p.rules[1].applies("/anything", "DELETE")) << "a quota without routes applies to every route";
}

TEST(RulesPolicy, Globs) {
  using floodwall::glob_match;
  EXPECT_TRUE(glob_match("/v1/*", "/v1/charges/ch_1"));
  EXPECT_TRUE(glob_match("/v1/*/refunds", "/v1/charges/refunds"));
  EXPECT_FALSE(glob_match("/v1/*/refunds", "/v1/charges/refund"));
  EXPECT_TRUE(glob_match("/v?/x", "/v2/x"));
  EXPECT_FALSE(glob_match("/v?/x", "/v22/x"));
  EXPECT_TRUE(glob_match("*", ""));
  EXPECT_TRUE(glob_match("a*b*c", "aXbYbZc"));
  EXPECT_FALSE(glob_match("a*b*c", "aXbYbZ"));
  EXPECT_TRUE(glob_match("/exact", "/exact"));
  EXPECT_FALSE(glob_match("/exact", "/exact/"));
}

// ------------------------------------------------------------------------------------- calendar windows

TEST(QuotaWindow, HoursDaysMonthsAndOffsets) {
  using floodwall::quota_window;
  using floodwall::QuotaPeriod;
  const int64_t new_year_2027 = 1798761600;  // 2027-01-01T00:00:00Z
  auto w = quota_window(QuotaPeriod::month, 0, new_year_2027 - 1);
  EXPECT_EQ(w.start_s, new_year_2027 - 31 * 86400);
  EXPECT_EQ(w.end_s, new_year_2027);
  w = quota_window(QuotaPeriod::month, 0, new_year_2027);
  EXPECT_EQ(w.start_s, new_year_2027);
  EXPECT_EQ(w.end_s, new_year_2027 + 31 * 86400);
  w = quota_window(QuotaPeriod::month, 0, 1709164800);          // 2024-02-29T00:00:00Z: a leap February
  EXPECT_EQ(w.start_s, 1706745600);                             // 2024-02-01
  EXPECT_EQ(w.end_s, 1709251200);                               // 2024-03-01
  w = quota_window(QuotaPeriod::day, 9 * 3600, new_year_2027);  // 09:00 on Jan 1st in Tokyo
  EXPECT_EQ(w.start_s, new_year_2027 - 9 * 3600);
  EXPECT_EQ(w.end_s, new_year_2027 + 15 * 3600);
  w = quota_window(QuotaPeriod::hour, 30 * 60, new_year_2027);  // an offset of half an hour
  EXPECT_EQ(w.start_s, new_year_2027 - 30 * 60);
  EXPECT_EQ(w.end_s, new_year_2027 + 30 * 60);
  w = quota_window(QuotaPeriod::month, -5 * 3600, new_year_2027);  // still Dec 31st in New York
  EXPECT_EQ(w.end_s, new_year_2027 + 5 * 3600);
}

// --------------------------------------------------------------------------------- one store or another

using floodwall::testing::StoreKind;
using Rules = floodwall::testing::EachStore;

const char *kOverlapping = R"("request_rate": {"rate": 0.001, "burst": 10, "limits": [
    {"name": "search", "routes": ["/search*"], "rate": 0.001, "burst": 4},
    {"name": "writes", "routes": ["/*"], "methods": ["POST"], "rate": 0.001, "burst": 2}]})";

TEST_P(Rules, OverlappingLimitsAllApplyAndNothingIsConsumedByARejection) {
  Client fw(policy(kOverlapping));
  // POST /search: the tenant's bucket, "search" and "writes" all apply; "writes" (burst 2) refuses the 3rd.
  for (int i = 0; i < 2; i++) {
    Admission a = fw.admit("acct", "/search", "POST");
    ASSERT_TRUE(a.allowed()) << i;
    EXPECT_EQ(a.decision().rules, 3u);
  }
  Admission no = fw.admit("acct", "/search", "POST");
  ASSERT_FALSE(no.allowed());
  EXPECT_EQ(no.status(), 429);
  EXPECT_EQ(no.limiter(), FW_LIMITER_REQUEST_RATE);
  EXPECT_EQ(no.decision().rule, 1) << "the limit that rejected: writes";
  EXPECT_EQ(no.decision().remaining, 8) << "the tenant's bucket is reported as it is";
  EXPECT_GE(no.decision().retry_after_s, 1);
  // Nothing was consumed by the rejection: the tenant has 8 left, "search" 2.
  Admission get = fw.admit("acct", "/search", "GET");
  ASSERT_TRUE(get.allowed());
  EXPECT_EQ(get.decision().remaining, 7);
  EXPECT_EQ(get.decision().shown_rule, 0) << "search (1 of 4 left) is closer to exhaustion than the tenant's 7 of 10";
  EXPECT_EQ(get.decision().rule_remaining, 1);
  EXPECT_EQ(get.decision().rule_limit, 4);
  ASSERT_TRUE(fw.admit("acct", "/search", "GET").allowed());
  Admission search_out = fw.admit("acct", "/search", "GET");
  EXPECT_FALSE(search_out.allowed());
  EXPECT_EQ(search_out.decision().rule, 0);
  // A route that no glob matches: the tenant's bucket only.
  Admission other = fw.admit("acct", "/other", "GET");
  ASSERT_TRUE(other.allowed());
  EXPECT_EQ(other.decision().rules, 0u);
  EXPECT_EQ(other.decision().remaining, 5);
  EXPECT_EQ(other.decision().shown_rule, -1);
  // Another tenant has rules of its own.
  EXPECT_TRUE(fw.admit("other-acct", "/search", "POST").allowed());
}

TEST_P(Rules, HeadersListEveryPolicyAndReportTheClosest) {
  Client fw(policy(kOverlapping));
  Admission a = fw.admit("acct", "/search", "POST");
  ASSERT_TRUE(a.allowed());
  EXPECT_EQ(a.headers(),
            "RateLimit-Policy: \"request_rate\";q=10;w=10000, \"search\";q=4;w=4000, \"writes\";q=2;w=2000\r\n"
            "RateLimit: \"writes\";r=1;t=1000\r\n"
            "RateLimit-Limit: 2\r\nRateLimit-Remaining: 1\r\nRateLimit-Reset: 1000\r\n");
  ASSERT_TRUE(fw.admit("acct", "/search", "POST").allowed());
  Admission no = fw.admit("acct", "/search", "POST");
  ASSERT_FALSE(no.allowed());
  std::string h = no.headers();
  EXPECT_NE(h.find("RateLimit: \"writes\";r=0;t="), std::string::npos) << h;
  auto body = nlohmann::json::parse(no.body());
  EXPECT_EQ(body["error"]["limit_type"], "request_rate");
  EXPECT_EQ(body["error"]["policy"], "writes");
  EXPECT_EQ(body["error"]["limit"], 2);
  EXPECT_NE(body["error"]["message"].get<std::string>().find("\"writes\""), std::string::npos);
}

TEST_P(Rules, ADarkRuleIsReportedAndNeverRejects) {
  Client fw(policy(R"("request_rate": {"rate": 0.001, "burst": 10, "limits": [
      {"name": "new-rule", "routes": ["/x"], "rate": 0.001, "burst": 1, "mode": "dark"}]})"));
  ASSERT_TRUE(fw.admit("t", "/x").allowed());
  Admission a = fw.admit("t", "/x");
  EXPECT_TRUE(a.allowed());
  EXPECT_EQ(a.decision().dark_limiter, FW_LIMITER_REQUEST_RATE);
  EXPECT_EQ(a.decision().dark_rule, 0);
  EXPECT_EQ(a.decision().remaining, 8) << "the tenant's bucket spent both";
  // What a dark launch is for: the rule's would-be rejections, counted by name.
  auto m = nlohmann::json::parse(fw.metrics_json());
  EXPECT_EQ(m["rules"]["new-rule"]["allowed"], 1);
  EXPECT_EQ(m["rules"]["new-rule"]["dark_rejected"], 1);
  EXPECT_EQ(m["rules"]["new-rule"]["rejected"], 0);
  EXPECT_NE(fw.prometheus().find("floodwall_rule_decisions_total{rule=\"new-rule\",outcome=\"dark_rejected\"} 1"),
            std::string::npos)
      << fw.prometheus();
}

TEST_P(Rules, AQuotaCountsUnitsAndRejectsUntilItsWindowEnds) {
  Client fw(policy(R"("quotas": [{"name": "daily", "limit": 5, "period": "day", "routes": ["/api/*"]}])"));
  ASSERT_TRUE(fw.admit("t", "/api/a", "GET", 3).allowed());
  Admission two = fw.admit("t", "/api/b", "GET", 2);
  ASSERT_TRUE(two.allowed());
  EXPECT_EQ(two.decision().rule_remaining, 0);
  Admission no = fw.admit("t", "/api/a");
  ASSERT_FALSE(no.allowed());
  EXPECT_EQ(no.status(), 429);
  EXPECT_EQ(no.decision().rule, 0);
  int64_t now = time(nullptr);
  int64_t end = (now / 86400 + 1) * 86400;
  EXPECT_EQ(no.decision().rule_window_end_s, end);
  EXPECT_NEAR(static_cast<double>(no.decision().retry_after_s), static_cast<double>(end - now), 2);
  auto body = nlohmann::json::parse(no.body());
  EXPECT_EQ(body["error"]["limit_type"], "quota");
  EXPECT_EQ(body["error"]["policy"], "daily");
  EXPECT_EQ(body["error"]["period"], "day");
  EXPECT_EQ(body["error"]["reset"].get<std::string>().substr(10), "T00:00:00Z");
  EXPECT_TRUE(fw.admit("t", "/public").allowed()) << "a route the quota does not name";
  EXPECT_TRUE(fw.admit("u", "/api/a").allowed()) << "another tenant's quota";
  try {
    fw.admit("t", "/api/a", "GET", 6);
    ADD_FAILURE() << "a cost above the quota is refused";
  } catch (const floodwall::Error &e) {
    EXPECT_NE(std::string(e.what()).find("cost"), std::string::npos) << e.what();
  }
}

TEST_P(Rules, TheRequestRateLimitersModeAppliesToItsRules) {
  Client fw(policy(
      R"("request_rate": {"rate": 0.001, "burst": 10, "limits": [{"name": "x", "routes": ["*"], "rate": 0.001, "burst": 1}]})"));
  fw.set_mode(FW_LIMITER_REQUEST_RATE, FW_MODE_DARK);
  ASSERT_TRUE(fw.admit("t").allowed());
  Admission a = fw.admit("t");
  EXPECT_TRUE(a.allowed());
  EXPECT_EQ(a.decision().dark_rule, 0);
  fw.set_mode(FW_LIMITER_REQUEST_RATE, FW_MODE_ENFORCE);
  EXPECT_FALSE(fw.admit("t").allowed());
}

TEST_P(Rules, ExactUnderEightThreadsOnOneTenant) {
  Client fw(policy(
      R"("request_rate": {"rate": 0.001, "burst": 1000, "limits": [{"name": "hot", "routes": ["/hot"], "rate": 0.001, "burst": 50}]},
                      "quotas": [{"name": "q", "limit": 70, "period": "month"}], "concurrency": {"limit": 4})"));
  std::atomic<int> hot{0}, quota{0}, in_flight{0}, worst{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 8; t++) {
    ts.emplace_back([&] {
      for (int i = 0; i < 100; i++) {
        Admission a = fw.admit("one", i % 2 ? "/hot" : "/cold");
        if (!a.allowed()) continue;
        int now = ++in_flight;
        int w = worst.load();
        while (now > w && !worst.compare_exchange_weak(w, now)) {
        }
        (i % 2 ? hot : quota)++;
        --in_flight;
      }
    });
  }
  for (auto &t : ts) t.join();
  EXPECT_EQ(hot.load() + quota.load(), 70) << "the quota covers every route: exactly 70 admitted";
  EXPECT_LE(hot.load(), 50);
  EXPECT_LE(worst.load(), 4);
}

INSTANTIATE_TEST_SUITE_P(Stores, Rules, ::testing::Values(StoreKind::memory, StoreKind::shm, StoreKind::redis),
                         floodwall::testing::store_kind_name);

// ------------------------------------------------------------------------- several processes on Redis

TEST(RulesRedis, FourProcessesOfFourThreadsOnOneTenantAreExact) {
  RedisServer redis;
  std::string policy = R"({"store": ")" + redis.url() + R"(", "redis": {"deadline_ms": 2000},
      "request_rate": {"rate": 0.001, "burst": 5000, "limits": [{"name": "search", "routes": ["/s*"], "rate": 0.001, "burst": 120}]},
      "quotas": [{"name": "monthly", "limit": 200, "period": "month"}]})";
  auto *counts =
      static_cast<std::atomic<int> *>(mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(counts, MAP_FAILED);
  new (&counts[0]) std::atomic<int>(0);
  new (&counts[1]) std::atomic<int>(0);
  new (&counts[2]) std::atomic<int>(0);
  std::vector<pid_t> kids;
  for (int p = 0; p < 4; p++) {
    pid_t pid = fork();
    if (pid == 0) {
      try {
        Client fw(policy);
        std::vector<std::thread> ts;
        for (int t = 0; t < 4; t++)
          ts.emplace_back([&] {
            for (int i = 0; i < 40; i++) {
              Admission a = fw.admit("tenant", i % 2 ? "/search" : "/other");
              if (a.decision().degraded || a.decision().failed_open) counts[2]++;
              if (a.allowed()) counts[i % 2]++;
            }
          });
        for (auto &t : ts) t.join();
      } catch (const std::exception &e) {
        fprintf(stderr, "child: %s\n", e.what());
        _exit(1);
      }
      _exit(0);
    }
    kids.push_back(pid);
  }
  floodwall::testing::expect_children_exit_ok(kids);
  EXPECT_EQ(counts[2].load(), 0) << "every decision the store's";
  EXPECT_EQ(counts[0].load() + counts[1].load(), 200) << "640 requests against a quota of 200";
  EXPECT_LE(counts[1].load(), 120);
  munmap(counts, 4096);
}

// The fleet shedder beside a rule, on Redis: the script once took the rule's key (KEYS[4]) for the fleet's
// reports key, which only a policy that leases sends, and Redis refused every admit after the first
// (WRONGTYPE, decided by the fallback as a config failure).
TEST(RulesRedis, AFleetCapacityAndARuleAreDecidedTogetherByRedis) {
  RedisServer redis;
  for (bool with_ctl : {false, true}) {
    SCOPED_TRACE(with_ctl ? "with a control record" : "without one");
    Client fw(R"({"store": ")" + redis.url() + R"(", "prefix": "fleet-rule-)" + std::to_string(with_ctl) +
              R"(", "redis": {"deadline_ms": 2000}, "fleet": {"capacity": 3},
        "request_rate": {"rate": 1000, "burst": 1000, "limits": [
          {"name": "orders", "routes": ["/orders/*"], "rate": 0.001, "burst": 2}]}})");
    if (with_ctl) {
      ASSERT_EQ(fw_admin_set_override(fw.get(), "acct", 4, 1000, 1000), FW_OK) << fw_error_last()->message;
    }
    std::vector<Admission> held;
    for (int i = 0; i < 2; i++) {
      held.push_back(fw.admit("acct", "/orders/:id"));
      EXPECT_TRUE(held.back().allowed()) << i;
      EXPECT_FALSE(held.back().decision().degraded) << i << ": " << held.back().decision().fail_reason;
    }
    Admission third = fw.admit("acct", "/orders/:id");
    EXPECT_FALSE(third.allowed()) << "the rule's burst is 2";
    EXPECT_FALSE(third.decision().degraded);
    EXPECT_EQ(third.decision().rule, 0);
    held.push_back(fw.admit("acct", "/profile"));
    EXPECT_TRUE(held.back().allowed());
    Admission over = fw.admit("acct", "/profile");
    EXPECT_FALSE(over.allowed()) << "three in flight fleet-wide";
    EXPECT_EQ(over.limiter(), FW_LIMITER_FLEET);
    EXPECT_FALSE(over.decision().degraded);
  }
}

// ------------------------------------------------------------------- a quota's boundary, in simulated time

TEST(QuotaBoundary, MemoryStoreOnATestClockCrossesNewYear) {
  const int64_t new_year_2027 = 1798761600;
  floodwall::ManualClock clock((new_year_2027 - 30) * 1'000'000);
  floodwall::SeededRng rng(7);
  floodwall::Policy p = floodwall::parse_policy(R"({"quotas": [{"name": "monthly", "limit": 2, "period": "month"},
      {"name": "tokyo", "limit": 3, "period": "day", "timezone": "UTC+09:00"}]})");
  floodwall::Guard g(p, std::make_unique<floodwall::MemoryStore>(clock, 1000), clock, rng);
  floodwall::Request r;
  r.tenant = "t";
  ASSERT_TRUE(g.admit(r).allowed);
  ASSERT_TRUE(g.admit(r).allowed);
  floodwall::Decision no = g.admit(r);
  ASSERT_FALSE(no.allowed);
  EXPECT_EQ(no.rule, 0);
  EXPECT_EQ(no.retry_after_s, 30);
  EXPECT_EQ(no.rule_window_end_s, new_year_2027);
  EXPECT_NE(floodwall::format_body(no, g.policy()).find("\"reset\":\"2027-01-01T00:00:00Z\""), std::string::npos);
  clock.advance_s(29);
  EXPECT_FALSE(g.admit(r).allowed);
  clock.advance_s(1);
  EXPECT_TRUE(g.admit(r).allowed) << "a new month; Tokyo's day (15:00 to 15:00 UTC) gives its 3rd";
  floodwall::Decision tokyo = g.admit(r);
  EXPECT_FALSE(tokyo.allowed);
  EXPECT_EQ(tokyo.rule, 1);
  EXPECT_EQ(tokyo.retry_after_s, 15 * 3600);
  EXPECT_EQ(tokyo.rule_window_end_s, new_year_2027 + 15 * 3600);
  clock.advance_s(15 * 3600);
  EXPECT_TRUE(g.admit(r).allowed) << "Tokyo's next day";
}

// tenant_admit.lua's windows against quota_window.hpp's, at instants of the script's own time argument
// (redis.clock "client" sends it; Redis' TIME cannot be set): the month ends of leap and common years,
// December into January, fixed offsets, the last second of a window and the first of the next.
TEST(QuotaBoundary, TheScriptsWindowsAreTheCoresAtFixedInstants) {
  RedisServer redis;
  redisContext *c = redis.connect();
  ASSERT_NE(c, nullptr);
  std::string body(floodwall::scripts::tenant_admit);
  auto eval = [&](int64_t now_s, int period, int offset, int64_t limit) -> std::pair<int64_t, int64_t> {
    std::string flags = "---Q@" + std::to_string(now_s * 1'000'000 + 999'999);
    std::vector<std::string> argv = {"EVAL",
                                     body,
                                     "5",
                                     "p:{t}:rate",
                                     "p:{t}:conc",
                                     "p:{t}:conc",
                                     "p:{t}:quota:q",
                                     "p:{t}:ctl",
                                     flags,
                                     "0",
                                     "0",
                                     "1000000",
                                     "0",
                                     "0",
                                     "0",
                                     "0",
                                     "",
                                     std::to_string(limit),
                                     std::to_string(period),
                                     std::to_string(offset),
                                     ""};
    std::vector<const char *> ptrs;
    std::vector<size_t> lens;
    for (const auto &a : argv) {
      ptrs.push_back(a.data());
      lens.push_back(a.size());
    }
    auto *r = static_cast<redisReply *>(redisCommandArgv(c, static_cast<int>(argv.size()), ptrs.data(), lens.data()));
    EXPECT_TRUE(r && r->type == REDIS_REPLY_ARRAY && r->elements == 10) << (r && r->str ? r->str : "no reply");
    std::pair<int64_t, int64_t> out{-1, -1};
    if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 10) out = {r->element[8]->integer, r->element[9]->integer};
    if (r) freeReplyObject(r);
    return out;  // seconds until the window ends, and its end
  };
  std::vector<int64_t> instants;
  const int64_t month_ends[] = {1709251200, 1706745600, 1798761600, 951868800, 4107542400, 0, 86400 * 59};
  for (int64_t e : month_ends)
    for (int64_t d : {-86401, -3601, -1, 0, 1, 3599})
      if (e + d >= 0) instants.push_back(e + d);
  std::mt19937_64 rng(11);
  for (int i = 0; i < 300; i++) instants.push_back(static_cast<int64_t>(rng() % 4102444800));  // 1970 to 2100
  const int offsets[] = {0, 9 * 3600, -5 * 3600 - 1800, 14 * 3600, -12 * 3600};
  int checked = 0;
  for (int64_t t : instants) {
    for (int period = 0; period < 3; period++) {
      int offset = offsets[(t + period) % 5];
      floodwall::QuotaWindow w = floodwall::quota_window(static_cast<floodwall::QuotaPeriod>(period), offset, t);
      auto [reset, end] = eval(t, period, offset, 1'000'000'000);
      ASSERT_EQ(end, w.end_s) << "t=" << t << " period=" << period << " offset=" << offset;
      ASSERT_EQ(reset, w.end_s - t);
      ASSERT_LE(w.start_s, t);
      ASSERT_LT(t, w.end_s);
      checked++;
    }
  }
  EXPECT_GE(checked, 900);
  // The count: a new window is a new count, an old window's count is kept until it ends.
  redis.command({"DEL", "p:{t}:quota:q"});
  int64_t last = 1798761600 - 1;  // 2026-12-31T23:59:59Z, a monthly quota of 2
  EXPECT_EQ(eval(last, 2, 0, 2).first, 1);
  EXPECT_EQ(eval(last, 2, 0, 2).first, 1);
  std::string v = redis.command({"GET", "p:{t}:quota:q"});
  EXPECT_NE(v.find(":2"), std::string::npos) << v;
  redisFree(c);
}

}  // namespace
