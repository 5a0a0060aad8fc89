// Acquire (docs/concepts/acquire.md): a request that the bucket would refuse now waits for its turn instead,
// reserved in the same atomic step as an admit. In simulated time on the memory store (the arithmetic, the
// cap, bad input, the limiters that never wait), then for real on memory:// (threads), shm:// and Redis
// (forked processes of several threads on one tenant): the goes in any window fit burst + rate x window,
// nothing within max_wait is refused, the turns are handed out one refill apart in the order the store saw
// the requests, nobody goes before its turn, and on Redis each acquire is one script call.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "cluster_redis.hpp"
#include "each_store.hpp"
#include "engine/guard.hpp"
#include "harness.hpp"
#include "policy/policy.hpp"
#include "redis_server.hpp"
#include "sentinel_redis.hpp"
#include "stores/store_factory.hpp"
#include "util/clock.hpp"

using floodwall::Decision;
using floodwall::Limiter;
using floodwall::Request;
using floodwall::testing::EachStore;
using floodwall::testing::Sim;
using floodwall::testing::StoreKind;

namespace {

Request request(std::string_view tenant, uint64_t cost = 1, std::string_view route = "") {
  Request r;
  r.tenant = tenant;
  r.cost = cost;
  r.route = route;
  return r;
}

}  // namespace

// ---------------------------------------------------------------------------------- simulated time

TEST(Acquire, WaitsForItsTurnInsteadOfBeingRefused) {
  Sim sim(R"({"request_rate": {"rate": 10, "burst": 2}})");
  auto &g = *sim.guard;
  EXPECT_EQ(g.reserve(request("t"), 1.0).wait_us, 0);
  EXPECT_EQ(g.reserve(request("t"), 1.0).wait_us, 0);
  // The bucket is empty: the next requests are given the instants their tokens are paid for, 100 ms apart.
  Decision third = g.reserve(request("t"), 1.0);
  EXPECT_TRUE(third.allowed);
  EXPECT_EQ(third.status, 200);
  EXPECT_EQ(third.wait_us, 100'000);
  EXPECT_EQ(third.remaining, 0);
  EXPECT_EQ(g.reserve(request("t"), 1.0).wait_us, 200'000);
  // Admit sees the reservations: nothing left.
  Decision admitted = sim.admit("t");
  EXPECT_FALSE(admitted.allowed);
  EXPECT_EQ(admitted.status, 429);
}

TEST(Acquire, BeyondMaxWaitIsRefusedLikeAdmitAndConsumesNothing) {
  Sim sim(R"({"request_rate": {"rate": 10, "burst": 2}})");
  auto &g = *sim.guard;
  ASSERT_EQ(sim.burst("t", 2), 2);
  Decision far = g.reserve(request("t"), 0.05);  // its turn would be 100 ms away
  EXPECT_FALSE(far.allowed);
  EXPECT_EQ(far.status, 429);
  EXPECT_EQ(far.limiter, Limiter::request_rate);
  EXPECT_GE(far.retry_after_s, 1);
  EXPECT_EQ(far.wait_us, 0);
  // Nothing was taken: the next one is still given the first turn.
  EXPECT_EQ(g.reserve(request("t"), 1.0).wait_us, 100'000);
}

TEST(Acquire, TurnsFollowTheRefillAsTimePasses) {
  Sim sim(R"({"request_rate": {"rate": 10, "burst": 2}})");
  auto &g = *sim.guard;
  ASSERT_EQ(sim.burst("t", 2), 2);
  EXPECT_EQ(g.reserve(request("t"), 1.0).wait_us, 100'000);
  sim.clock.advance_us(150'000);  // the first reservation's turn has passed, and half the next token
  EXPECT_EQ(g.reserve(request("t"), 1.0).wait_us, 50'000);
  sim.clock.advance_us(1'000'000);  // full again
  EXPECT_EQ(g.reserve(request("t"), 1.0).wait_us, 0);
}

TEST(Acquire, WeightedCostWaitsForAllItsTokens) {
  Sim sim(R"({"request_rate": {"rate": 10, "burst": 5}})");
  auto &g = *sim.guard;
  ASSERT_EQ(sim.burst("t", 5), 5);
  EXPECT_EQ(g.reserve(request("t", 3), 1.0).wait_us, 300'000);
  EXPECT_EQ(g.reserve(request("t", 1), 1.0).wait_us, 400'000);
}

TEST(Acquire, MaxWaitIsCappedAtTheBucketsFullRefill) {
  Sim sim(R"({"request_rate": {"rate": 1, "burst": 2}})");  // refills from empty in 2 s
  auto &g = *sim.guard;
  ASSERT_EQ(sim.burst("t", 2), 2);
  EXPECT_EQ(g.reserve(request("t"), 1e9).wait_us, 1'000'000);
  EXPECT_EQ(g.reserve(request("t"), 1e9).wait_us, 2'000'000);
  Decision beyond = g.reserve(request("t"), 1e9);  // 3 s: beyond the cap of 2 s, however long max_wait is
  EXPECT_FALSE(beyond.allowed);
  EXPECT_EQ(beyond.status, 429);
}

TEST(Acquire, ZeroMaxWaitDecidesAsAdmit) {
  Sim sim(R"({"request_rate": {"rate": 10, "burst": 1}})");
  auto &g = *sim.guard;
  EXPECT_TRUE(g.reserve(request("t"), 0).allowed);
  Decision d = g.reserve(request("t"), 0);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after_s, 1);
}

TEST(Acquire, BadMaxWaitIsRefusedNamingItAndConsumesNothing) {
  Sim sim(R"({"request_rate": {"rate": 10, "burst": 1}})");
  auto &g = *sim.guard;
  for (double bad : {-1.0, -0.0001, std::nan(""), std::numeric_limits<double>::infinity(),
                     -std::numeric_limits<double>::infinity()}) {
    try {
      g.acquire(request("t"), bad);
      ADD_FAILURE() << "max_wait " << bad << " accepted";
    } catch (const floodwall::BadRequest &e) {
      EXPECT_NE(std::string(e.what()).find("max_wait"), std::string::npos) << e.what();
    }
  }
  EXPECT_TRUE(sim.admit("t").allowed) << "the bad calls took nothing";
}

TEST(Acquire, CostAboveTheBurstIsRefusedAsInAdmit) {
  Sim sim(R"({"request_rate": {"rate": 10, "burst": 3}})");
  try {
    sim.guard->reserve(request("t", 4), 10);
    ADD_FAILURE() << "a cost above the burst was accepted";
  } catch (const floodwall::BadRequest &e) {
    EXPECT_NE(std::string(e.what()).find("cost"), std::string::npos) << e.what();
  }
}

TEST(Acquire, AFullConcurrencyLimitRefusesAtOnceAndTakesNoToken) {
  Sim sim(R"({"request_rate": {"rate": 10, "burst": 1}, "concurrency": {"limit": 1, "ttl_s": 60}})");
  auto &g = *sim.guard;
  Decision first = g.reserve(request("t"), 1.0);
  ASSERT_TRUE(first.allowed);
  Decision second = g.reserve(request("t"), 1.0);  // would wait 100 ms for a token, but no slot is free
  EXPECT_FALSE(second.allowed);
  EXPECT_EQ(second.limiter, Limiter::concurrency);
  EXPECT_EQ(second.wait_us, 0);
  g.release(first.ticket);
  // The refused one took no token: the next waits one refill, not two.
  Decision third = g.reserve(request("t"), 1.0);
  EXPECT_TRUE(third.allowed);
  EXPECT_EQ(third.wait_us, 100'000);
  g.release(third.ticket);
}

TEST(Acquire, AWaitingRequestsSlotCountsFromItsTurn) {
  Sim sim(R"({"request_rate": {"rate": 10, "burst": 1}, "concurrency": {"limit": 2, "ttl_s": 1}})");
  auto &g = *sim.guard;
  ASSERT_EQ(sim.burst("t", 1), 1);
  Decision waiting = g.reserve(request("t"), 1.0);
  ASSERT_TRUE(waiting.allowed);
  ASSERT_EQ(waiting.wait_us, 100'000);
  // 1.05 s later a slot taken at the reservation would have expired; one counted from the turn has not.
  sim.clock.advance_us(1'050'000);
  Decision other = sim.admit("t");
  ASSERT_TRUE(other.allowed);
  EXPECT_EQ(other.concurrency_remaining, 0) << "the waiting request's slot still counts";
  g.release(waiting.ticket);
  g.release(other.ticket);
}

TEST(Acquire, APassingLimitTakesItsTokensAtTheTurnAndAnEmptyOneRefuses) {
  Sim sim(R"({"request_rate": {"rate": 10, "burst": 3,
      "limits": [{"name": "search", "routes": ["/search"], "rate": 5, "burst": 2}]}})");
  auto &g = *sim.guard;
  ASSERT_EQ(sim.burst("t", 3), 3);  // the tenant's bucket is empty; the limit (other routes) untouched
  // The tenant's turn is 100 ms away; the limit has its tokens now and takes them at that turn.
  Decision first = g.reserve(request("t", 1, "/search"), 5);
  EXPECT_TRUE(first.allowed);
  EXPECT_EQ(first.wait_us, 100'000);
  // Taken at the turn, the limit's token leaves it half a token now (taken now, it would hold one again):
  // a limit never waits, so the next search is refused by it, and nothing is consumed anywhere.
  Decision refused = g.reserve(request("t", 1, "/search"), 5);
  EXPECT_FALSE(refused.allowed);
  EXPECT_EQ(refused.status, 429);
  EXPECT_EQ(refused.rule, 0);
  EXPECT_EQ(refused.wait_us, 0);
  EXPECT_EQ(g.reserve(request("t", 1, "/other"), 5).wait_us, 200'000) << "the refused one took no token";
}

TEST(Acquire, AQuotaCountsAReservationAndASpentOneRefusesWithoutWaiting) {
  Sim sim(R"({"request_rate": {"rate": 10, "burst": 2}, "quotas": [{"name": "daily", "limit": 3, "period": "day"}]})");
  auto &g = *sim.guard;
  ASSERT_EQ(sim.burst("t", 2), 2);
  Decision third = g.reserve(request("t"), 1);
  EXPECT_TRUE(third.allowed);
  EXPECT_EQ(third.wait_us, 100'000);
  Decision fourth = g.reserve(request("t"), 1);  // its turn (200 ms) is near, but the quota is spent
  EXPECT_FALSE(fourth.allowed);
  EXPECT_EQ(fourth.status, 429);
  EXPECT_EQ(fourth.rule, 0);
  EXPECT_EQ(fourth.wait_us, 0);
}

TEST(Acquire, DarkBucketNeverMakesARequestWait) {
  Sim sim(R"({"request_rate": {"rate": 10, "burst": 1, "mode": "dark"}})");
  auto &g = *sim.guard;
  ASSERT_TRUE(g.reserve(request("t"), 1).allowed);
  Decision d = g.reserve(request("t"), 1);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.wait_us, 0);
  EXPECT_EQ(d.dark_limiter, Limiter::request_rate);
}

TEST(Acquire, TheUtilizationShedderNeverWaits) {
  Sim sim(R"({"request_rate": {"rate": 10, "burst": 1},
              "utilization": {"workers": 1, "sample_s": 1, "ramp_s": 1, "delay_s": 0}})");
  auto &g = *sim.guard;
  g.report_utilization(1.0);
  for (int i = 0; i < 5; i++) {
    sim.clock.advance_s(1.1);
    g.shedding_amount();
  }
  Decision d = g.reserve(request("t"), 1);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.status, 503);
  EXPECT_EQ(d.limiter, Limiter::utilization);
  EXPECT_EQ(d.wait_us, 0);
}

TEST(Acquire, BlocksUntilItsTurnAndNeverBefore) {
  floodwall::SteadyClock clock;
  floodwall::SystemRng rng;
  floodwall::Policy p = floodwall::parse_policy(R"({"request_rate": {"rate": 20, "burst": 1}})");
  floodwall::Guard g(p, floodwall::make_store(p, clock), clock, rng);
  ASSERT_TRUE(g.acquire(request("t"), 1).allowed);
  Decision d = g.acquire(request("t"), 1);
  int64_t back = clock.now_us();
  ASSERT_TRUE(d.allowed);
  EXPECT_GT(d.wait_us, 0);
  EXPECT_GE(back, d.turn_us) << "acquire returned before the caller's turn";
}

// ------------------------------------------------------------------- threads and processes, real clocks

namespace {

struct Go {
  int64_t turn_us;  // on the store's clock
  int64_t back_us;  // when acquire returned, on the same clock (CLOCK_MONOTONIC in process, wall for Redis)
  int32_t caller, seq;
  int32_t refused, waited;
};

constexpr double kRate = 200;
constexpr int kBurst = 20;
constexpr int kPerCaller = 25;

// Shared between forked processes: the record of every acquire.
struct Record {
  std::atomic<int64_t> n{0};
  Go at[4096];
};

// Every assertion on a run's record: nothing refused, never before its turn, each caller's turns in its own
// order, turns one refill apart (no two callers given one), and the bound over every window.
void check_record(const Record &rec, int callers) {
  int64_t n = rec.n.load();
  ASSERT_EQ(n, callers * kPerCaller);
  std::vector<Go> gos(rec.at, rec.at + n);
  int64_t refused = 0, early = 0;
  for (const Go &g : gos) {
    refused += g.refused;
    if (!g.refused && g.back_us < g.turn_us) early++;
  }
  EXPECT_EQ(refused, 0) << "a request within max_wait was refused";
  EXPECT_EQ(early, 0) << "a caller went before its turn";
  for (int c = 0; c < callers; c++) {
    std::vector<Go> mine;
    for (const Go &g : gos)
      if (g.caller == c) mine.push_back(g);
    std::sort(mine.begin(), mine.end(), [](const Go &a, const Go &b) { return a.seq < b.seq; });
    for (size_t i = 1; i < mine.size(); i++)
      EXPECT_LE(mine[i - 1].turn_us, mine[i].turn_us) << "caller " << c << " went out of its own order";
  }
  std::sort(gos.begin(), gos.end(), [](const Go &a, const Go &b) { return a.turn_us < b.turn_us; });
  // Those that waited were handed the instants the refill pays for, one token (5 ms) apart: first come,
  // first served, no two on one token (1 us for the rounding of each turn to whole microseconds). While
  // one waits the bucket is empty, so no request that went at once falls between two that waited.
  const int64_t step_us = static_cast<int64_t>(1e6 / kRate);
  int64_t waited = 0;
  for (size_t i = 0; i < gos.size(); i++) {
    waited += gos[i].waited;
    if (i > 0 && gos[i].waited && gos[i - 1].waited) {
      EXPECT_GE(gos[i].turn_us - gos[i - 1].turn_us, step_us - 1) << "two turns closer than one token";
    }
  }
  EXPECT_GT(waited, n / 2) << "most requests waited for their turn";
  // The bound, over windows starting at every turn: burst + rate x window (+1 for the edges).
  for (double w_s : {0.0, 0.005, 0.05, 0.2, 1.0}) {
    auto w = static_cast<int64_t>(w_s * 1e6);
    size_t j = 0;
    for (size_t i = 0; i < gos.size(); i++) {
      if (j < i) j = i;
      while (j < gos.size() && gos[j].turn_us <= gos[i].turn_us + w) j++;
      auto in_window = static_cast<double>(j - i);
      ASSERT_LE(in_window, kBurst + kRate * w_s + 1) << "window of " << w_s << " s from turn " << i;
    }
  }
}

// One caller: kPerCaller acquires in a row on the tenant, each recorded.
void run_caller(floodwall::Guard &g, const floodwall::Clock &clock, bool wall, Record &rec, int caller) {
  for (int s = 0; s < kPerCaller; s++) {
    Decision d = g.acquire(request("one-tenant"), 5.0);
    int64_t back = wall ? clock.wall_us() : clock.now_us();
    int64_t i = rec.n.fetch_add(1);
    rec.at[i] = Go{d.turn_us, back, caller, s, d.allowed ? 0 : 1, d.wait_us > 0 ? 1 : 0};
    if (d.degraded || d.failed_open) rec.at[i].refused = 1;
    g.release(d.ticket);
  }
}

std::string policy_for(const std::string &store) {
  return R"({"store": ")" + store +
         R"(", "redis": {"deadline_ms": 2000, "flags_poll_ms": 3600000},
             "request_rate": {"rate": 200, "burst": 20}})";
}

int64_t stat_calls(const floodwall::testing::RedisServer &redis, const std::string &command) {
  return floodwall::testing::completed_calls(redis.command({"INFO", "commandstats"}), command);
}

}  // namespace

TEST(AcquireThreads, ExactAndInOrderOnTheMemoryStore) {
  floodwall::SteadyClock clock;
  floodwall::SystemRng rng;
  floodwall::Policy p = floodwall::parse_policy(policy_for("memory://"));
  floodwall::Guard g(p, floodwall::make_store(p, clock), clock, rng);
  auto rec = std::make_unique<Record>();
  const int threads = 16;  // at most one reservation each in the queue: within the 100 ms cap (burst / rate)
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; t++) ts.emplace_back([&, t] { run_caller(g, clock, false, *rec, t); });
  for (auto &t : ts) t.join();
  check_record(*rec, threads);
}

// shm:// and Redis: the stores that processes share (memory:// is each process's own: threads above).
class AcquireProcesses : public EachStore {};

TEST_P(AcquireProcesses, ExactAndInOrderAcrossForkedProcesses) {
  const int processes = 4, threads = 4;  // 16 callers: within the 100 ms cap (burst / rate)
  std::string pol = policy_for(store());
  auto *rec =
      static_cast<Record *>(mmap(nullptr, sizeof(Record), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(rec, MAP_FAILED);
  new (rec) Record();
  bool redis = GetParam() == StoreKind::redis;
  int64_t evalsha0 = 0, hgetall0 = 0, time0 = 0;
  if (redis) {
    evalsha0 = stat_calls(*redis_, "evalsha");
    hgetall0 = stat_calls(*redis_, "hgetall");
    time0 = stat_calls(*redis_, "time");
  }
  std::vector<pid_t> kids;
  for (int p = 0; p < processes; p++) {
    pid_t pid = fork();
    if (pid == 0) {
      {
        floodwall::SteadyClock clock;
        floodwall::SystemRng rng;
        floodwall::Policy policy = floodwall::parse_policy(pol);
        floodwall::Guard g(policy, floodwall::make_store(policy, clock), clock, rng);
        std::vector<std::thread> ts;
        for (int t = 0; t < threads; t++)
          ts.emplace_back([&, t] { run_caller(g, clock, redis, *rec, p * threads + t); });
        for (auto &t : ts) t.join();
      }
      _exit(0);
    }
    kids.push_back(pid);
  }
  floodwall::testing::expect_children_exit_ok(kids);
  check_record(*rec, processes * threads);
  if (redis) {
    // One script call per acquire: every EVALSHA but the flags' polls (read_flags.lua, one HGETALL each) is
    // an acquire's, and each acquire's script ran once (its one TIME: a tenant without a control record is
    // not looked up again once its bucket says so, lua/lib/bucket.lua).
    int64_t acquires = processes * threads * kPerCaller;
    int64_t polls = stat_calls(*redis_, "hgetall") - hgetall0;
    EXPECT_EQ(stat_calls(*redis_, "evalsha") - evalsha0 - polls, acquires);
    EXPECT_EQ(stat_calls(*redis_, "time") - time0, acquires);
  }
  rec->~Record();
  munmap(rec, sizeof(Record));
}

INSTANTIATE_TEST_SUITE_P(Stores, AcquireProcesses, ::testing::Values(StoreKind::shm, StoreKind::redis),
                         floodwall::testing::store_kind_name);

// ------------------------------------------------------------- the same turns from every store's script

namespace {

std::string turns_sections() {
  return R"("request_rate": {"rate": 10, "burst": 2,
                "limits": [{"name": "search", "routes": ["/search"], "rate": 5, "burst": 2}]},
            "quotas": [{"name": "daily", "limit": 3, "period": "day", "routes": ["/quota"]}])";
}

// The turns of the simulated-time tests, on a real clock: each wait at most the exact one and less only by
// the time the calls before it took (under 50 ms on any machine that runs the suite).
void expect_wait(const Decision &d, int64_t exact_us, const char *what) {
  EXPECT_TRUE(d.allowed) << what;
  EXPECT_LE(d.wait_us, exact_us) << what;
  EXPECT_GT(d.wait_us, exact_us - 50'000) << what;
  EXPECT_FALSE(d.degraded || d.failed_open) << what << ": decided by the store";
}

void expect_same_turns(floodwall::Guard &g) {
  // The tenant's bucket: its turns, a refusal beyond max_wait that takes nothing, the cap.
  EXPECT_EQ(g.reserve(request("t"), 1).wait_us, 0);
  EXPECT_EQ(g.reserve(request("t"), 1).wait_us, 0);
  expect_wait(g.reserve(request("t"), 1), 100'000, "the first turn");
  expect_wait(g.reserve(request("t"), 1), 200'000, "the second turn");
  Decision far = g.reserve(request("t"), 0.01);
  EXPECT_FALSE(far.allowed);
  EXPECT_EQ(far.status, 429);
  EXPECT_GE(far.retry_after_s, 1);
  Decision capped = g.reserve(request("t"), 100);  // 300 ms: beyond the cap, burst / rate = 200 ms
  EXPECT_FALSE(capped.allowed);
  EXPECT_EQ(capped.status, 429);
  // A limit passes and takes at the turn, then refuses (nothing taken); the tenant's turns go on.
  EXPECT_EQ(g.reserve(request("u", 1, "/other"), 1).wait_us, 0);
  EXPECT_EQ(g.reserve(request("u", 1, "/other"), 1).wait_us, 0);
  expect_wait(g.reserve(request("u", 1, "/search"), 1), 100'000, "a limit that passes");
  Decision by_limit = g.reserve(request("u", 1, "/search"), 1);
  EXPECT_FALSE(by_limit.allowed);
  EXPECT_EQ(by_limit.rule, 0);
  expect_wait(g.reserve(request("u", 1, "/other"), 1), 200'000, "after the limit's refusal");
  // A quota counts a reservation; a spent one refuses at once.
  EXPECT_EQ(g.reserve(request("q", 1, "/quota"), 1).wait_us, 0);
  EXPECT_EQ(g.reserve(request("q", 1, "/quota"), 1).wait_us, 0);
  expect_wait(g.reserve(request("q", 1, "/quota"), 1), 100'000, "a quota's last unit");
  Decision by_quota = g.reserve(request("q", 1, "/quota"), 1);
  EXPECT_FALSE(by_quota.allowed);
  EXPECT_EQ(by_quota.rule, 1);
  // A runtime override of the tenant's bucket (its control record, read by the same step): 10/s, burst 1.
  g.admin_set_override("o", 10, 1);
  EXPECT_EQ(g.reserve(request("o"), 1).wait_us, 0);
  Decision overridden = g.reserve(request("o"), 1);
  expect_wait(overridden, 100'000, "under an override");
  g.release(overridden.ticket);  // before its turn: given back, by the override's arithmetic
  expect_wait(g.reserve(request("o"), 1), 100'000, "an override's turn given back");
  // Giving back (Guard::release before the turn): the last reservation's tokens return; one with a later
  // reservation behind it keeps them.
  EXPECT_EQ(g.reserve(request("g"), 1).wait_us, 0);
  EXPECT_EQ(g.reserve(request("g"), 1).wait_us, 0);
  Decision first = g.reserve(request("g"), 1), second = g.reserve(request("g"), 1);
  expect_wait(second, 200'000, "the second turn");
  g.release(first.ticket);                                                         // second stands behind it: kept
  g.release(second.ticket);                                                        // the last: given back
  expect_wait(g.reserve(request("g"), 1), 200'000, "the turn given back, again");  // else 300 ms: refused
  EXPECT_FALSE(g.reserve(request("g"), 1).allowed) << "first's token was not given back";
}

struct RealGuard {
  explicit RealGuard(const std::string &policy_json)
      : policy(floodwall::parse_policy(policy_json)), guard(policy, floodwall::make_store(policy, clock), clock, rng) {}
  floodwall::SteadyClock clock;
  floodwall::SystemRng rng;
  floodwall::Policy policy;
  floodwall::Guard guard;
};

}  // namespace

class AcquireTurns : public EachStore {};

TEST_P(AcquireTurns, SameTurnsOnEveryStore) {
  RealGuard g(policy(turns_sections()));
  expect_same_turns(g.guard);
}

INSTANTIATE_TEST_SUITE_P(Stores, AcquireTurns, ::testing::Values(StoreKind::memory, StoreKind::shm, StoreKind::redis),
                         floodwall::testing::store_kind_name);

TEST(AcquireCluster, SameTurnsThroughTheClusterStore) {
  floodwall::testing::ClusterTopology topo;
  RealGuard g(R"({"store": ")" + topo.url() + R"(", "redis": {"deadline_ms": 2000}, )" + turns_sections() + "}");
  expect_same_turns(g.guard);
}

TEST(AcquireSentinel, SameTurnsThroughTheSentinelStore) {
  floodwall::testing::SentinelTopology topo;
  RealGuard g(R"({"store": ")" + topo.sentinel_url() + R"(", "redis": {"deadline_ms": 2000}, )" + turns_sections() +
              "}");
  expect_same_turns(g.guard);
}
