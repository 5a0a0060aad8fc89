// The adaptive concurrency limit through the C ABI: its fw_limiter and name, its 503 with the one
// formatter's headers and body, the shedding order, dark mode and the kill switch, its metrics, and a
// limit in front of other limiters (a request another limiter refuses gives its slot back). The limit's
// arithmetic and a simulated box are in tests/core/engine/adaptive_test.cpp.
#include <floodwall.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <floodwall.hpp>
#include <string>
#include <thread>
#include <vector>

#include "../core/redis_server.hpp"

namespace {

// At most two requests in flight at once, whatever the latency says (and while the first probe runs).
const char *kTwo = R"({"adaptive": {"enabled": true, "min_limit": 2, "max_limit": 2, "initial_limit": 2,
                                    "critical_reserve": 0}})";

}  // namespace

TEST(CApiAdaptive, TheLimiterIsNamedInTheVocabulary) {
  EXPECT_EQ(FW_LIMITER_ADAPTIVE, 5);
  EXPECT_EQ(FW_LIMITER_COUNT, 6);
  EXPECT_STREQ(fw_limiter_name(FW_LIMITER_ADAPTIVE), "adaptive");
  fw_limiter l = FW_LIMITER_NONE;
  EXPECT_EQ(fw_limiter_from_name(&l, "adaptive"), FW_OK);
  EXPECT_EQ(l, FW_LIMITER_ADAPTIVE);
  EXPECT_STREQ(fw_limiter_name(static_cast<fw_limiter>(6)), "unknown");
  floodwall::Client fw("{}");
  fw_mode m = FW_MODE_ENFORCE;
  EXPECT_EQ(fw_get_mode(fw.get(), FW_LIMITER_ADAPTIVE, &m), FW_OK);
  EXPECT_EQ(m, FW_MODE_OFF) << "not configured: off";
  fw_client *c = nullptr;
  EXPECT_EQ(fw_client_new(&c, R"({"adaptive": {"min_limit": 9, "max_limit": 3}})"), FW_EPOLICY);
  EXPECT_NE(std::string(fw_error_last()->message).find("adaptive.min_limit"), std::string::npos);
  EXPECT_EQ(fw_client_new(&c, R"({"adaptive": {"algorithm": "reno"}})"), FW_EPOLICY);
  EXPECT_NE(std::string(fw_error_last()->message).find("adaptive.algorithm"), std::string::npos);
}

TEST(CApiAdaptive, BeyondTheLimitA503NamesItAndAReleaseFreesASlot) {
  floodwall::Client fw(kTwo);
  auto a = fw.admit("t1");
  auto b = fw.admit("t2");
  ASSERT_TRUE(a.allowed());
  ASSERT_TRUE(b.allowed());
  EXPECT_NE(a.decision().ticket, 0u) << "the slot is held by the ticket";
  auto shed = fw.admit("t3");
  EXPECT_FALSE(shed.allowed());
  EXPECT_EQ(shed.status(), 503);
  EXPECT_EQ(shed.limiter(), FW_LIMITER_ADAPTIVE);
  EXPECT_EQ(shed.decision().retry_after_s, 1);
  EXPECT_EQ(shed.decision().ticket, 0u);
  std::string headers = shed.headers(), body = shed.body();
  EXPECT_NE(headers.find("Retry-After: 1\r\n"), std::string::npos) << headers;
  EXPECT_EQ(headers.find("RateLimit:"), std::string::npos) << "no bucket's state for a local shed: " << headers;
  EXPECT_NE(body.find(R"("type":"service_unavailable")"), std::string::npos) << body;
  EXPECT_NE(body.find(R"("limit_type":"adaptive")"), std::string::npos) << body;
  EXPECT_NE(body.find("concurrency limit its latency allows"), std::string::npos) << body;
  a.release();
  auto c = fw.admit("t3");
  EXPECT_TRUE(c.allowed()) << "a released slot is free at once";
  std::string prom = fw.prometheus();
  EXPECT_NE(prom.find("floodwall_adaptive_limit{route=\"*\"} 2\n"), std::string::npos) << prom;
  EXPECT_NE(prom.find("floodwall_adaptive_in_flight{route=\"*\"} 2\n"), std::string::npos) << prom;
  EXPECT_NE(prom.find("floodwall_decisions_total{limiter=\"adaptive\",outcome=\"rejected\",route=\"default\"} 1\n"),
            std::string::npos)
      << prom;
  EXPECT_NE(prom.find("floodwall_mode{limiter=\"adaptive\",mode=\"enforce\"} 1\n"), std::string::npos) << prom;
}

TEST(CApiAdaptive, NonCriticalWorkIsShedBeforeCritical) {
  floodwall::Client fw(R"({"adaptive": {"min_limit": 10, "max_limit": 10, "initial_limit": 10}})");
  std::vector<floodwall::Admission> held;
  // Probing first, every tier up to min_limit (10): hold ten, let them go, and the probe still runs.
  for (int i = 0; i < 10; i++) held.push_back(fw.admit("t", nullptr, "POST", 1, true));
  EXPECT_FALSE(fw.admit("t", nullptr, "GET", 1, true).allowed()) << "ten in flight while probing: full";
  held.clear();
  // Twenty samples end the probe; then the shares of 10 apply: sandbox 7, GET 8, POST 9, critical 10.
  for (int i = 0; i < 20; i++) fw.admit("t").release();
  for (int i = 0; i < 7; i++) held.push_back(fw.admit("t", nullptr, "GET", 1, false, true));
  EXPECT_EQ(fw.admit("t", nullptr, "GET", 1, false, true).limiter(), FW_LIMITER_ADAPTIVE) << "sandbox: 7 of 10";
  held.push_back(fw.admit("t", nullptr, "GET"));
  EXPECT_FALSE(fw.admit("t", nullptr, "GET").allowed()) << "GET: 8";
  held.push_back(fw.admit("t", nullptr, "POST"));
  EXPECT_FALSE(fw.admit("t", nullptr, "POST").allowed()) << "POST: 9";
  held.push_back(fw.admit("t", nullptr, "POST", 1, true));
  EXPECT_TRUE(held.back().allowed()) << "critical: the whole limit";
  EXPECT_FALSE(fw.admit("t", nullptr, "POST", 1, true).allowed());
}

TEST(CApiAdaptive, DarkModeAdmitsAndSaysSoAndOffIsTheKillSwitch) {
  floodwall::Client fw(kTwo);
  auto a = fw.admit("t");
  auto b = fw.admit("t");
  fw.set_mode(FW_LIMITER_ADAPTIVE, FW_MODE_DARK);
  auto c = fw.admit("t");
  EXPECT_TRUE(c.allowed());
  EXPECT_EQ(c.decision().dark_limiter, FW_LIMITER_ADAPTIVE) << "it would have been shed";
  fw.set_mode(FW_LIMITER_ADAPTIVE, FW_MODE_OFF);
  auto d = fw.admit("t");
  EXPECT_TRUE(d.allowed());
  EXPECT_EQ(d.decision().dark_limiter, FW_LIMITER_NONE);
  EXPECT_NE(fw.metrics_json().find(R"("adaptive":{"allowed":2,"rejected":0,"dark_rejected":1,"failed_open":0})"),
            std::string::npos)
      << fw.metrics_json();
  fw.set_mode(FW_LIMITER_ADAPTIVE, FW_MODE_ENFORCE);
  EXPECT_FALSE(fw.admit("t").allowed()) << "a, b and c hold the two slots and one more";
}

// A request the adaptive limit admits but the tenant's bucket refuses gives its slot back, unmeasured.
TEST(CApiAdaptive, ARequestAnotherLimiterRefusesHoldsNoSlot) {
  floodwall::Client fw(R"({"request_rate": {"rate": 0.001, "burst": 1},
                           "adaptive": {"min_limit": 1, "max_limit": 1, "initial_limit": 1}})");
  auto a = fw.admit("other");
  ASSERT_TRUE(a.allowed());
  a.release();
  auto first = fw.admit("t");
  ASSERT_TRUE(first.allowed());
  first.release();
  for (int i = 0; i < 5; i++) {
    auto refused = fw.admit("t");
    EXPECT_EQ(refused.status(), 429);
    EXPECT_EQ(refused.limiter(), FW_LIMITER_REQUEST_RATE);
  }
  EXPECT_TRUE(fw.admit("someone-else").allowed()) << "the one slot is free: the 429s gave theirs back";
}

// With routes, each family has a limit of its own and the others are not limited by it.
TEST(CApiAdaptive, RouteFamiliesHaveLimitsOfTheirOwn) {
  floodwall::Client fw(R"({"adaptive": {"routes": ["/search", "/upload"], "min_limit": 1, "max_limit": 1,
                                        "initial_limit": 1}})");
  auto s = fw.admit("t", "/search");
  auto u = fw.admit("t", "/upload");
  EXPECT_TRUE(s.allowed());
  EXPECT_TRUE(u.allowed());
  EXPECT_EQ(fw.admit("t", "/search").limiter(), FW_LIMITER_ADAPTIVE);
  EXPECT_EQ(fw.admit("t", "/upload").limiter(), FW_LIMITER_ADAPTIVE);
  std::vector<floodwall::Admission> other;
  for (int i = 0; i < 10; i++) other.push_back(fw.admit("t", "/health"));
  for (auto &o : other) EXPECT_TRUE(o.allowed()) << "a route family it does not name";
  std::string prom = fw.prometheus();
  EXPECT_NE(prom.find("floodwall_adaptive_in_flight{route=\"/search\"} 1\n"), std::string::npos) << prom;
  EXPECT_NE(prom.find("floodwall_adaptive_in_flight{route=\"/upload\"} 1\n"), std::string::npos) << prom;
}

// The limit is per process, on shm:// too (README): a forked worker with its own client on the same segment
// admits up to its own limit while the parent holds all of its own.
TEST(CApiAdaptive, TheLimitIsPerProcessEvenOnShm) {
  std::string name = "fw-adaptive-" + std::to_string(getpid());
  std::string policy = R"({"store": "shm://)" + name + R"(", "adaptive": {"min_limit": 2, "max_limit": 2,
                          "initial_limit": 2, "critical_reserve": 0}})";
  {
    floodwall::Client parent(policy);
    auto a = parent.admit("t");
    auto b = parent.admit("t");
    ASSERT_TRUE(a.allowed() && b.allowed());
    ASSERT_EQ(parent.admit("t").limiter(), FW_LIMITER_ADAPTIVE);
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int code = 0;
      {
        floodwall::Client child(policy);
        auto c = child.admit("t");
        auto d = child.admit("t");
        if (!c.allowed() || !d.allowed()) code = 1;                       // its own two slots
        if (child.admit("t").limiter() != FW_LIMITER_ADAPTIVE) code = 2;  // and no more
      }
      _exit(code);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "1: the child was shed below its own limit; 2: it was not shed beyond it";
  }
  std::remove(("/dev/shm/floodwall." + name).c_str());
}

// The kill switch as for the other limiters: a fleet-wide mode in the store's flags (fw_admin_set_mode, what
// `floodwall mode adaptive off` calls) reaches every client at its next poll, and -1 gives each its own again.
TEST(CApiAdaptive, TheFleetWideKillSwitchReachesAnotherClient) {
  floodwall::testing::RedisServer redis;
  std::string policy = R"({"store": "redis://127.0.0.1:)" + std::to_string(redis.port()) + R"(/0",
      "redis": {"flags_poll_ms": 50, "deadline_ms": 2000},
      "adaptive": {"min_limit": 1, "max_limit": 1, "initial_limit": 1}})";
  floodwall::Client ops(policy), app(policy);
  auto held = app.admit("t");
  ASSERT_TRUE(held.allowed());
  ASSERT_EQ(app.admit("t").limiter(), FW_LIMITER_ADAPTIVE);
  ASSERT_EQ(fw_admin_set_mode(ops.get(), FW_LIMITER_ADAPTIVE, FW_MODE_OFF), FW_OK);
  auto eventually = [&](bool want_allowed) {
    for (int i = 0; i < 200; i++) {
      if (app.admit("t").allowed() == want_allowed) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  };
  EXPECT_TRUE(eventually(true)) << "off fleet-wide: admitted beyond the limit";
  fw_mode m = FW_MODE_ENFORCE;
  EXPECT_EQ(fw_get_mode(app.get(), FW_LIMITER_ADAPTIVE, &m), FW_OK);
  EXPECT_EQ(m, FW_MODE_OFF);
  ASSERT_EQ(fw_admin_set_mode(ops.get(), FW_LIMITER_ADAPTIVE, -1), FW_OK);
  EXPECT_TRUE(eventually(false)) << "each client's own mode (enforce) again";
}
