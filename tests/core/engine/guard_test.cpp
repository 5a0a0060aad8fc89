// engine/guard: the concurrency limiter, the fleet shedder, the Guard's ordering, modes and no partial consumption.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "harness.hpp"
#include "in_flight.hpp"
#include "metrics/metrics.hpp"

using floodwall::Decision;
using floodwall::FailReason;
using floodwall::Limiter;
using floodwall::Ticket;
using floodwall::testing::Sim;

TEST(Concurrency, TwentyInFlightAndThe21stIsRejectedAtOnce) {
  Sim s(R"({"concurrency": {"limit": 20, "ttl_s": 60}})");
  std::vector<Ticket> held;
  for (int i = 0; i < 20; i++) {
    Decision d = s.admit("solver", 1, "/v1/routes", "POST");
    ASSERT_TRUE(d.allowed);
    EXPECT_EQ(d.concurrency_remaining, 19 - i);
    held.push_back(d.ticket);
  }
  Decision d = s.admit("solver", 1, "/v1/routes", "POST");
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.status, 429);
  EXPECT_EQ(d.limiter, Limiter::concurrency);
  EXPECT_EQ(d.retry_after_s, 1);
  EXPECT_EQ(d.ticket, 0u) << "a rejected request holds no slot";
  s.guard->release(held.back());
  EXPECT_TRUE(s.admit("solver", 1, "/v1/routes", "POST").allowed);
}

TEST(Concurrency, ACrashedWorkersSlotHealsAfterTtl) {
  Sim s(R"({"concurrency": {"limit": 1, "ttl_s": 60}})");
  ASSERT_TRUE(s.admit("t").allowed);  // never released: the worker died
  s.clock.advance_s(59);
  EXPECT_FALSE(s.admit("t").allowed);
  s.clock.advance_s(1.001);
  EXPECT_TRUE(s.admit("t").allowed);
}

TEST(Concurrency, OnlyRoutesThatOptInAreCounted) {
  Sim s(R"({"concurrency": {"limit": 1, "routes": ["/v1/routes"]}})");
  ASSERT_TRUE(s.admit("t", 1, "/v1/routes", "POST").allowed);
  EXPECT_FALSE(s.admit("t", 1, "/v1/routes", "POST").allowed);
  Decision read = s.admit("t", 1, "/v1/routes/:id", "GET");
  EXPECT_TRUE(read.allowed);
  EXPECT_EQ(read.concurrency_limit, 0) << "an uncounted route advertises no concurrency policy";
}

TEST(Concurrency, ExactWithEightThreadsOnOneTenant) {
  Sim s(R"({"concurrency": {"limit": 7}})");
  std::atomic<int> admitted{0};
  floodwall::testing::InFlight in_flight;
  std::vector<std::thread> ts;
  for (int t = 0; t < 8; t++)
    ts.emplace_back([&] {
      for (int i = 0; i < 2000; i++) {
        Decision d = s.admit("shared");
        if (!d.allowed) continue;
        admitted++;
        in_flight.hold(std::chrono::microseconds(0));
        s.guard->release(d.ticket);
      }
    });
  for (auto &t : ts) t.join();
  EXPECT_LE(in_flight.most.load(), 7);
  EXPECT_GT(admitted.load(), 0);
  std::vector<Ticket> held;
  for (int i = 0; i < 7; i++) {
    Decision d = s.admit("shared");
    EXPECT_TRUE(d.allowed) << "every slot was given back";
    held.push_back(d.ticket);
  }
  EXPECT_FALSE(s.admit("shared").allowed);
}

TEST(TokenBucketThreads, EightThreadsAdmitExactlyBurstPlusRefill) {
  Sim s(R"({"request_rate": {"rate": 100, "burst": 500}})");
  std::atomic<int> allowed{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 8; t++)
    ts.emplace_back([&] {
      for (int i = 0; i < 1000; i++) {
        allowed += s.admit("shared").allowed;
        if (i % 100 == 0) s.clock.advance_us(10'000);  // 8 x 10 x 10 ms = 0.8 s simulated: 80 tokens
      }
    });
  for (auto &t : ts) t.join();
  EXPECT_EQ(allowed.load(), 500 + 80);
}

TEST(Fleet, NonCriticalTrafficIsHeldUnderItsShareAndCriticalPasses) {
  Sim s(R"({"fleet": {"capacity": 8}})");
  std::vector<Ticket> analytics;
  int rejected = 0;
  for (int i = 0; i < 20; i++) {
    Decision d = s.admit("tenant-" + std::to_string(i), 1, "/v1/analytics", "GET");
    if (d.allowed)
      analytics.push_back(d.ticket);
    else {
      rejected++;
      EXPECT_EQ(d.status, 503);
      EXPECT_EQ(d.limiter, Limiter::fleet);
    }
  }
  EXPECT_EQ(analytics.size(), 8u);
  EXPECT_EQ(rejected, 12);
  for (int i = 0; i < 50; i++) {
    Decision d = s.admit("dispatcher", 1, "/v1/routes", "POST", /*critical=*/true);
    EXPECT_TRUE(d.allowed) << "critical traffic is never counted against the fleet";
    s.guard->release(d.ticket);
  }
  s.guard->release(analytics[0]);
  EXPECT_TRUE(s.admit("x", 1, "/v1/analytics", "GET").allowed);
}

TEST(Guard, NoPartialConsumptionWhenTheConcurrencyLimiterRejects) {
  Sim s(R"({"request_rate": {"rate": 1, "burst": 10}, "concurrency": {"limit": 1}})");
  Decision first = s.admit("t");
  ASSERT_TRUE(first.allowed);
  EXPECT_EQ(first.remaining, 9);
  for (int i = 0; i < 5; i++) {
    Decision d = s.admit("t");
    EXPECT_EQ(d.limiter, Limiter::concurrency);
    EXPECT_EQ(d.remaining, 9) << "the rejected request spent no token";
  }
  s.guard->release(first.ticket);
  EXPECT_EQ(s.admit("t").remaining, 8);
}

TEST(Guard, NoPartialConsumptionWhenTheFleetRejects) {
  Sim s(R"({"request_rate": {"rate": 1, "burst": 10}, "concurrency": {"limit": 5}, "fleet": {"capacity": 1}})");
  Decision held = s.admit("a", 1, "", "GET");
  ASSERT_TRUE(held.allowed);
  Decision d = s.admit("b", 1, "", "GET");
  EXPECT_EQ(d.limiter, Limiter::fleet);
  EXPECT_EQ(d.remaining, 10) << "b's bucket was not touched";
  EXPECT_EQ(d.concurrency_remaining, 5) << "b holds no tenant slot";
  s.guard->release(held.ticket);
  Decision again = s.admit("b", 1, "", "GET");
  EXPECT_TRUE(again.allowed);
  EXPECT_EQ(again.remaining, 9);
}

TEST(Guard, NoPartialConsumptionWhenTheBucketRejects) {
  Sim s(R"({"request_rate": {"rate": 0.001, "burst": 1}, "concurrency": {"limit": 1}, "fleet": {"capacity": 1}})");
  Decision a = s.admit("t");
  ASSERT_TRUE(a.allowed);
  s.guard->release(a.ticket);
  Decision d = s.admit("t");
  EXPECT_EQ(d.limiter, Limiter::request_rate);
  EXPECT_TRUE(s.admit("other").allowed) << "the rejected request took no fleet slot";
}

TEST(Modes, DarkDecidesFullyCountsAndBlocksNothing) {
  Sim s(R"({"request_rate": {"rate": 0.001, "burst": 2, "mode": "dark"}})");
  int allowed = 0, would_block = 0;
  for (int i = 0; i < 5; i++) {
    Decision d = s.admit("batch");
    allowed += d.allowed;
    would_block += d.dark_limiter == Limiter::request_rate;
    EXPECT_EQ(d.limiter, Limiter::none);
    EXPECT_EQ(d.status, 200);
  }
  EXPECT_EQ(allowed, 5);
  EXPECT_EQ(would_block, 3);
  std::string m = s.guard->metrics_json();
  EXPECT_NE(m.find("\"request_rate\":{\"allowed\":2,\"rejected\":0,\"dark_rejected\":3"), std::string::npos) << m;
}

TEST(Modes, ChangeAtRunTimeWithoutARestart) {
  Sim s(R"({"request_rate": {"rate": 0.001, "burst": 1}})");
  ASSERT_TRUE(s.admit("t").allowed);
  EXPECT_FALSE(s.admit("t").allowed);
  s.guard->set_mode(floodwall::Limiter::request_rate, floodwall::Mode::off);
  Decision d = s.admit("t");
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.dark_limiter, Limiter::none) << "off is not evaluated at all";
  s.guard->set_mode(floodwall::Limiter::request_rate, floodwall::Mode::dark);
  d = s.admit("t");
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.dark_limiter, Limiter::request_rate);
  s.guard->set_mode(floodwall::Limiter::request_rate, floodwall::Mode::enforce);
  EXPECT_FALSE(s.admit("t").allowed);
}

TEST(Modes, ADarkLimiterDoesNotHideAnEnforcedOne) {
  Sim s(R"({"request_rate": {"rate": 0.001, "burst": 1, "mode": "dark"}, "concurrency": {"limit": 1}})");
  Decision a = s.admit("t");
  ASSERT_TRUE(a.allowed);
  Decision b = s.admit("t");
  EXPECT_FALSE(b.allowed);
  EXPECT_EQ(b.limiter, Limiter::concurrency);
  EXPECT_EQ(b.dark_limiter, Limiter::request_rate);
}

TEST(BadInput, EmptyTenantAndCostAboveTheBurstNameTheirField) {
  Sim s(R"({"request_rate": {"rate": 1, "burst": 5, "overrides": {"big": {"rate": 1, "burst": 50}}}})");
  EXPECT_THROW(s.admit(""), floodwall::BadRequest);
  try {
    s.admit("t", 6);
    FAIL();
  } catch (const floodwall::BadRequest &e) {
    EXPECT_NE(std::string(e.what()).find("cost"), std::string::npos);
  }
  EXPECT_TRUE(s.admit("big", 6).allowed) << "the limit is the tenant's own burst";
  EXPECT_EQ(s.admit("t", 0).remaining, 4) << "cost 0 counts as 1";
}

TEST(Metrics, TopTenantsByRejectionRateWithoutRawBytes) {
  Sim s(R"({"request_rate": {"rate": 0.001, "burst": 1}})");
  std::string hostile("evil\"\n\x01", 7);
  for (int i = 0; i < 4; i++) s.admit(hostile);
  for (int i = 0; i < 2; i++) s.admit("polite");
  std::string json = s.guard->metrics_json();
  EXPECT_NE(json.find(R"({"tenant":"evil\\x22\\x0a\\x01","requests":3,"rejections":3,"rejection_rate":1})"),
            std::string::npos)
      << json;
  std::string prom = s.guard->metrics_prometheus();
  EXPECT_NE(prom.find("floodwall_tenant_rejection_ratio{tenant=\"evil\\\\x22\\\\x0a\\\\x01\"} 1"), std::string::npos)
      << prom;
  EXPECT_EQ(prom.find('\x01'), std::string::npos);
}

TEST(Metrics, CountsByLimiterOutcomeAndRouteFamily) {
  Sim s(R"({"request_rate": {"rate": 0.001, "burst": 1}})");
  s.admit("t", 1, "/v1/routes");
  s.admit("t", 1, "/v1/routes");
  s.admit("u", 1, "/v1/analytics");
  std::string prom = s.guard->metrics_prometheus();
  EXPECT_NE(prom.find(R"(floodwall_decisions_total{limiter="request_rate",outcome="allowed",route="/v1/routes"} 1)"),
            std::string::npos);
  EXPECT_NE(prom.find(R"(floodwall_decisions_total{limiter="request_rate",outcome="rejected",route="/v1/routes"} 1)"),
            std::string::npos);
  EXPECT_NE(prom.find(R"(floodwall_decisions_total{limiter="request_rate",outcome="allowed",route="/v1/analytics"} 1)"),
            std::string::npos);
  EXPECT_NE(prom.find("# TYPE floodwall_decisions_total counter"), std::string::npos);
}

TEST(Metrics, RouteFamiliesFromManyThreadsGetOneIndexEach) {
  // Known routes are looked up without a lock while other threads add new ones.
  floodwall::Metrics m;
  constexpr int kThreads = 4, kRoutes = 100;
  std::vector<std::vector<int>> seen(kThreads, std::vector<int>(kRoutes));
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; t++)
    ts.emplace_back([&, t] {
      for (int round = 0; round < 50; round++)
        for (int r = 0; r < kRoutes; r++) {
          int i = m.route_index("/r" + std::to_string((r + t * 7) % kRoutes));
          int &first = seen[static_cast<size_t>(t)][static_cast<size_t>((r + t * 7) % kRoutes)];
          if (round == 0) first = i;
          EXPECT_EQ(i, first) << "a route's index never changes";
        }
    });
  for (auto &th : ts) th.join();
  EXPECT_EQ(m.route_index(""), 0);
  std::vector<int> named;
  for (int r = 0; r < kRoutes; r++) {
    int i = seen[0][static_cast<size_t>(r)];
    for (int t = 1; t < kThreads; t++) EXPECT_EQ(seen[static_cast<size_t>(t)][static_cast<size_t>(r)], i);
    if (i != static_cast<int>(floodwall::Metrics::kMaxRoutes)) named.push_back(i);
  }
  std::sort(named.begin(), named.end());
  EXPECT_EQ(named.size(), floodwall::Metrics::kMaxRoutes - 1) << "63 named families, the rest counted as other";
  EXPECT_EQ(std::adjacent_find(named.begin(), named.end()), named.end()) << "no two routes share an index";
}

TEST(Metrics, ExactCountsFromThreadsThatComeGoAndCountForManyClients) {
  // Each thread counts into its own slab per Metrics, caching four; with six Metrics every round evicts
  // and re-adopts slabs, threads exit in waves (giving theirs back to the next wave), a Metrics dies
  // while exited threads' slabs outlive it, and a reader sums all along. Not one count may be lost.
  constexpr int kMetrics = 6, kWaves = 5, kThreads = 6, kRounds = 5000;
  std::vector<std::unique_ptr<floodwall::Metrics>> ms;
  for (int i = 0; i < kMetrics; i++) ms.push_back(std::make_unique<floodwall::Metrics>());
  auto allowed = [](const floodwall::Metrics &m, const char *route) {
    auto j = nlohmann::json::parse(m.json(floodwall::StoreStats{}, floodwall::Gauges{}));
    return j["routes"][route]["request_rate"]["allowed"].get<uint64_t>();
  };
  std::atomic<bool> done{false};
  std::thread reader([&] {
    while (!done.load()) (void)allowed(*ms[1], "default");
  });
  uint64_t per_wave = 0;
  for (int wave = 0; wave < kWaves; wave++) {
    if (wave == 3) ms[0] = std::make_unique<floodwall::Metrics>();  // the old one's slabs are cached by no one now
    std::vector<std::thread> ts;
    for (int t = 0; t < kThreads; t++)
      ts.emplace_back([&, t] {
        for (int r = 0; r < kRounds; r++)
          for (int i = 0; i < kMetrics; i++) {
            auto &m = *ms[static_cast<size_t>((i + t) % kMetrics)];
            m.count(0, floodwall::Limiter::request_rate, floodwall::Outcome::allowed);
            if (r % 4 == 0)
              m.count(m.route_index("/v1/named"), floodwall::Limiter::request_rate, floodwall::Outcome::allowed);
          }
      });
    for (auto &th : ts) th.join();
    per_wave += kThreads * kRounds;
  }
  done = true;
  reader.join();
  for (int i = 1; i < kMetrics; i++) {
    EXPECT_EQ(allowed(*ms[static_cast<size_t>(i)], "default"), per_wave) << "metrics " << i;
    EXPECT_EQ(allowed(*ms[static_cast<size_t>(i)], "/v1/named"), per_wave / 4) << "metrics " << i;
  }
  EXPECT_EQ(allowed(*ms[0], "default"), 2u * kThreads * kRounds) << "the two waves after it was replaced";
}
