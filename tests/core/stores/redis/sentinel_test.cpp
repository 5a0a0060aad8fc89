// redis+sentinel:// against a real Sentinel deployment the test starts (sentinel_redis.hpp: a master, a
// replica and three sentinels, quorum 2, down-after-milliseconds 1000). The client must find the master
// through any sentinel that answers, follow it through SENTINEL FAILOVER and through a SIGKILLed master,
// decide by the fallback meanwhile (counted, never failed open), and stay exact across processes before and
// after. A wrong master name is config, said once; no sentinel reachable is said once.
#include <floodwall.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "admits.hpp"
#include "capture_stderr.hpp"
#include "redis_server.hpp"
#include "sentinel_redis.hpp"

using floodwall::testing::admit;
using floodwall::testing::Admitter;
using floodwall::testing::answered_within;
using floodwall::testing::by_store;
using floodwall::testing::CaptureStderr;
using floodwall::testing::client;
using floodwall::testing::command_at;
using floodwall::testing::count;
using floodwall::testing::free_port;
using floodwall::testing::rate_key;
using floodwall::testing::reason_within;
using floodwall::testing::redis_seconds_at;
using floodwall::testing::SentinelTopology;

namespace {

using Clock = std::chrono::steady_clock;

std::string policy(const std::string &url, const std::string &limits = R"("rate": 100000, "burst": 100000)",
                   const std::string &redis = "") {
  return R"({"store": ")" + url + R"(", "redis": {"deadline_ms": 500)" + redis + R"(}, "request_rate": {)" + limits +
         "}}";
}

// Four processes of two threads on one tenant for `ms`; returns {allowed, answered by Redis, decisions}.
std::array<int64_t, 3> fleet(const std::string &pol, const std::string &tenant, int ms) {
  void *mem = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) std::abort();
  auto *shared = new (mem) std::atomic<int64_t>[3] {};
  auto start = Clock::now();
  std::vector<pid_t> kids;
  for (int p = 0; p < 4; p++) {
    pid_t pid = fork();
    if (pid == 0) {
      fw_client *c = nullptr;
      if (fw_client_new(&c, pol.c_str()) != FW_OK) _exit(2);
      std::vector<std::thread> ts;
      for (int i = 0; i < 2; i++)
        ts.emplace_back([&] {
          while (Clock::now() - start < std::chrono::milliseconds(ms)) {
            fw_decision d = admit(c, tenant);
            shared[0] += d.allowed;
            shared[1] += by_store(d);
            shared[2] += 1;
          }
        });
      for (auto &t : ts) t.join();
      fw_client_free(c);
      _exit(0);
    }
    kids.push_back(pid);
  }
  floodwall::testing::expect_children_exit_ok(kids);
  std::array<int64_t, 3> out{shared[0].load(), shared[1].load(), shared[2].load()};
  munmap(mem, 4096);
  return out;
}

// 4 processes on one tenant within burst + rate x time on the master's clock, every decision by Redis.
void expect_exact(const SentinelTopology &topo, const std::string &tenant) {
  const double rate = 200;
  const int burst = 40;
  std::string pol = policy(topo.sentinel_url(), R"("rate": 200, "burst": 40)", R"(, "deadline_ms": 2000)");
  double t0 = redis_seconds_at(topo.master_port());
  std::array<int64_t, 3> got = fleet(pol, tenant, 1200);
  double elapsed = redis_seconds_at(topo.master_port()) - t0;
  EXPECT_EQ(got[1], got[2]) << tenant << ": every decision answered by the master";
  EXPECT_LE(got[0], static_cast<int64_t>(burst + rate * elapsed) + 1) << tenant << ": " << elapsed << " s";
  EXPECT_GT(got[0], burst) << tenant << ": the bucket refilled and was used";
}

}  // namespace

TEST(Sentinel, TheMasterIsFoundThroughAnySentinelThatAnswers) {
  SentinelTopology topo;
  // The first sentinel named is down: the others answer.
  std::string url = "redis+sentinel://127.0.0.1:" + std::to_string(free_port()) + "," +
                    topo.sentinel_url().substr(std::string("redis+sentinel://").size());
  fw_client *c = client(policy(url));
  ASSERT_NE(c, nullptr);
  for (int i = 0; i < 50; i++) EXPECT_TRUE(by_store(admit(c, "found"))) << i;
  fw_client_free(c);
  EXPECT_EQ(command_at(topo.master_port(), {"EXISTS", rate_key("found")}), "1") << "the bucket is on the master";
}

TEST(Sentinel, AnUnknownMasterNameIsAConfigErrorSaidOnce) {
  SentinelTopology topo;
  CaptureStderr err;
  std::string url = topo.sentinel_url();
  url = url.substr(0, url.rfind('/')) + "/nosuchmaster";
  fw_client *c = client(policy(url));
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(reason_within(c, "warm-up", FW_FAIL_CONFIG, 5)) << "once the sentinels were asked";
  int config = 0;
  for (int i = 0; i < 20; i++) {
    fw_decision d = admit(c, "unknown");
    EXPECT_TRUE(d.degraded) << "the fallback decides";
    EXPECT_FALSE(d.failed_open);
    config += d.fail_reason == FW_FAIL_CONFIG;
  }
  EXPECT_EQ(config, 20) << "a wrong name is the deployment's, not an outage";
  fw_client_free(c);
  std::string text = err.text();
  EXPECT_EQ(count(text, "know no master named \"nosuchmaster\""), 1u) << text;
}

TEST(Sentinel, NoSentinelReachableIsSaidOnceAndTheFallbackDecides) {
  CaptureStderr err;
  std::string url = "redis+sentinel://127.0.0.1:" + std::to_string(free_port()) +
                    ",127.0.0.1:" + std::to_string(free_port()) + "/fwmaster";
  auto t0 = Clock::now();
  fw_client *c = client(policy(url));
  ASSERT_NE(c, nullptr);
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(2)) << "the client is made within the connect time-out";
  for (int i = 0; i < 20; i++) {
    fw_decision d = admit(c, "nobody");
    EXPECT_TRUE(d.degraded);
    EXPECT_FALSE(d.failed_open);
    EXPECT_NE(d.fail_reason, FW_FAIL_NONE);
    EXPECT_NE(d.fail_reason, FW_FAIL_CONFIG) << "unreachable is an outage, not a wrong deployment";
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(600));  // asked again in the background meanwhile
  fw_client_free(c);
  std::string text = err.text();
  EXPECT_EQ(count(text, "no sentinel answered"), 1u) << text;
}

TEST(Sentinel, APasswordOnTheDataNodesAndNoneOnTheSentinels) {
  SentinelTopology::Options data_password;
  data_password.password = "s3cret";
  SentinelTopology topo("fwmaster", data_password);
  std::string url = topo.sentinel_url();
  url = "redis+sentinel://:s3cret@" + url.substr(std::string("redis+sentinel://").size());
  fw_client *c = client(policy(url));
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(answered_within(c, "authed", 5)) << "the sentinels are asked without the password they do not have";
  fw_client_free(c);
}

// SENTINEL FAILOVER: the client follows the new master within seconds; meanwhile every decision is the
// store's or the fallback's, never failed open; the bucket is on the new master afterwards.
TEST(Sentinel, AFailoverIsFollowedWithinSecondsNeverFailingOpen) {
  SentinelTopology topo;
  fw_client *c = client(policy(topo.sentinel_url()));
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(answered_within(c, "through", 5));
  int old_master = topo.master_port();
  Admitter a(c);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  topo.failover();
  int new_master = topo.wait_master_changed(old_master, 20);
  auto changed = Clock::now();
  ASSERT_NE(new_master, old_master);
  // Store answers resume on the new master.
  bool resumed = false;
  while (Clock::now() - changed < std::chrono::seconds(5) && !resumed) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    resumed = a.last_store_ns.load() > changed.time_since_epoch().count();
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  a.join();
  std::printf("SENTINEL FAILOVER: %lld decisions, %lld by the store, %lld by the fallback, %lld failed open\n",
              static_cast<long long>(a.total), static_cast<long long>(a.store), static_cast<long long>(a.fallback),
              static_cast<long long>(a.failed_open));
  EXPECT_TRUE(resumed) << "store answers within 5 s of the sentinels naming the new master";
  EXPECT_EQ(a.failed_open.load(), 0);
  EXPECT_EQ(a.store + a.fallback, a.total);
  // The old master still says master for seconds (the sentinels demote it ~10 s later) and takes writes:
  // a tenant admitted now must land on the new one only.
  EXPECT_TRUE(by_store(admit(c, "moved")));
  fw_client_free(c);
  EXPECT_EQ(command_at(new_master, {"EXISTS", rate_key("moved")}), "1") << "the client writes to the new master";
  EXPECT_EQ(command_at(old_master, {"EXISTS", rate_key("moved")}), "0") << "and not to the old one";
}

// A SIGKILLed master: the fallback decides (counted, never failed open) until the sentinels promote the
// replica (down-after-milliseconds 1000), then the store answers again; four processes stay exact on
// the master before and on the new one after.
TEST(Sentinel, AKilledMasterIsFollowedAndFourProcessesStayExactBeforeAndAfter) {
  SentinelTopology topo;
  expect_exact(topo, "before");
  fw_client *c = client(policy(topo.sentinel_url()));
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(answered_within(c, "through", 5));
  int old_master = topo.master_port();
  Admitter a(c);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto killed = Clock::now();
  topo.kill_master();
  int new_master = topo.wait_master_changed(old_master, 30);
  ASSERT_NE(new_master, old_master);
  bool resumed = false;
  auto deadline = Clock::now() + std::chrono::seconds(5);
  while (Clock::now() < deadline && !resumed) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    resumed = a.last_store_ns.load() > killed.time_since_epoch().count();
  }
  double outage_s =
      std::chrono::duration<double>(Clock::time_point(Clock::duration(a.last_store_ns.load())) - killed).count();
  a.join();
  std::printf(
      "SIGKILL of the master: store answers again %.2f s later; %lld decisions, %lld by the fallback, %lld "
      "failed open\n",
      outage_s, static_cast<long long>(a.total), static_cast<long long>(a.fallback),
      static_cast<long long>(a.failed_open));
  EXPECT_TRUE(resumed) << "store answers within 5 s of the sentinels naming the new master";
  EXPECT_GT(a.fallback.load(), 0) << "the outage was decided by the fallback";
  EXPECT_EQ(a.failed_open.load(), 0);
  fw_client_free(c);
  expect_exact(topo, "after");
}

TEST(Sentinel, SentinelPasswordEnvIsCheckedWhenThePolicyIsRead) {
  auto error_of = [](const std::string &pol) {
    fw_client *c = nullptr;
    if (fw_client_new(&c, pol.c_str()) == FW_OK) {
      fw_client_free(c);
      return std::string("(accepted)");
    }
    return std::string(fw_error_last()->message);
  };
  std::string on_redis = error_of(R"({"store": "redis://127.0.0.1:1/0", "redis": {"sentinel_password_env": "X"}})");
  EXPECT_EQ(on_redis.rfind("redis.sentinel_password_env:", 0), 0u) << on_redis;
  EXPECT_NE(on_redis.find("redis+sentinel://"), std::string::npos) << on_redis;
  unsetenv("FW_TEST_NO_SUCH_VARIABLE");
  std::string unset = error_of(R"({"store": "redis+sentinel://127.0.0.1:1/m", "redis": {"sentinel_password_env": )"
                               R"("FW_TEST_NO_SUCH_VARIABLE"}})");
  EXPECT_EQ(unset.rfind("redis.sentinel_password_env:", 0), 0u) << unset;
  EXPECT_NE(unset.find("FW_TEST_NO_SUCH_VARIABLE"), std::string::npos) << unset;
  std::string empty =
      error_of(R"({"store": "redis+sentinel://127.0.0.1:1/m", "redis": {"sentinel_password_env": ""}})");
  EXPECT_EQ(empty.rfind("redis.sentinel_password_env:", 0), 0u) << empty;
}

// Sentinels with a password of their own: redis.sentinel_password_env names it, and the data nodes keep
// the URL's. Without it the sentinels refuse the URL's password: config, said once, not an outage.
TEST(Sentinel, SentinelsWithTheirOwnPassword) {
  SentinelTopology::Options passwords;
  passwords.password = "datapw";
  passwords.sentinel_password = "sentpw";
  SentinelTopology topo("fwmaster", passwords);
  std::string url = "redis+sentinel://:datapw@" + topo.sentinel_url().substr(std::string("redis+sentinel://").size());
  setenv("FW_TEST_SENTINEL_PASSWORD", "sentpw", 1);
  fw_client *c = client(
      policy(url, R"("rate": 100000, "burst": 100000)", R"(, "sentinel_password_env": "FW_TEST_SENTINEL_PASSWORD")"));
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(answered_within(c, "own-password", 5)) << "the sentinels' password for them, the URL's for the master";
  fw_client_free(c);

  CaptureStderr err;
  c = client(policy(url));
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(reason_within(c, "warm-up", FW_FAIL_CONFIG, 5)) << "once the sentinels were asked";
  int config = 0;
  for (int i = 0; i < 10; i++) {
    fw_decision d = admit(c, "refused");
    EXPECT_TRUE(d.degraded);
    config += d.fail_reason == FW_FAIL_CONFIG;
  }
  fw_client_free(c);
  EXPECT_EQ(config, 10) << "a refused password is the deployment's";
  std::string text = err.text();
  EXPECT_EQ(count(text, "refused the password"), 1u) << text;
  EXPECT_EQ(text.find("datapw"), std::string::npos) << "never the password";
}

// A preforking server: a client made before fork() finds the master itself in the child (its own watch
// thread, connections and I/O thread), on the parent's bucket; the parent's client is untouched and its
// free in the child hangs on nothing the parent's threads held.
TEST(Sentinel, AForkedChildFindsTheMasterItself) {
  SentinelTopology topo;
  fw_client *c = client(policy(topo.sentinel_url(), R"("rate": 0.001, "burst": 10)"));
  ASSERT_NE(c, nullptr);
  for (int i = 0; i < 4; i++) ASSERT_TRUE(by_store(admit(c, "forked")));
  pid_t pid = fork();
  if (pid == 0) {
    int ok = 0;
    for (int i = 0; i < 8; i++) {
      fw_decision d = admit(c, "forked");
      if (!by_store(d)) _exit(10 + i);
      ok += d.allowed;
    }
    fw_client_free(c);
    _exit(ok == 6 ? 0 : 2);
  }
  int status = -1;
  for (int i = 0; i < 1000 && waitpid(pid, &status, WNOHANG) == 0; i++)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (waitpid(pid, &status, WNOHANG) == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    FAIL() << "the child hung";
  }
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  EXPECT_TRUE(by_store(admit(c, "forked2"))) << "the parent's client is untouched";
  fw_client_free(c);
}
