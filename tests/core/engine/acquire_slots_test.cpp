// Acquire waiting for a concurrency slot (docs/concepts/acquire.md): an acquire refused by the concurrency
// limiter alone waits for a release instead, up to max_wait, woken by the release itself. On memory:// (threads
// of one process) and shm:// (forked processes of several threads, one segment): never more than the limit
// in flight, nothing refused while slots keep coming free within max_wait, the waiting took no token, and a
// wait that times out is refused by the concurrency limiter, and the waiters of a process are served in the
// order they came. Redis (forked processes on one node, woken by release.lua's PUBLISH) the same, and a wait's
// Redis commands counted.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "each_store.hpp"
#include "engine/guard.hpp"
#include "policy/policy.hpp"
#include "sentinel_redis.hpp"
#include "stores/store_factory.hpp"
#include "util/clock.hpp"

using floodwall::Decision;
using floodwall::Limiter;
using floodwall::Request;
using floodwall::testing::EachStore;
using floodwall::testing::StoreKind;

namespace {

Request request(std::string_view tenant) {
  Request r;
  r.tenant = tenant;
  return r;
}

struct RealGuard {
  explicit RealGuard(const std::string &policy_json)
      : policy(floodwall::parse_policy(policy_json)), guard(policy, floodwall::make_store(policy, clock), clock, rng) {}
  floodwall::SteadyClock clock;
  floodwall::SystemRng rng;
  floodwall::Policy policy;
  floodwall::Guard guard;
};

// Shared between forked processes: what is in flight now, the most ever in flight, the outcomes.
struct Tally {
  std::atomic<int64_t> in_flight{0}, most{0}, allowed{0}, refused{0}, waited_for_slot{0};
};

constexpr int kLimit = 3;
constexpr int kPerCaller = 20;

// One caller: kPerCaller acquires of the one tenant, each holding its slot for a moment, then releasing it.
void run_caller(floodwall::Guard &g, Tally &t) {
  for (int i = 0; i < kPerCaller; i++) {
    Decision d = g.acquire(request("one-tenant"), 30.0);
    if (!d.allowed) {
      t.refused++;
      continue;
    }
    t.allowed++;
    int64_t now = ++t.in_flight;
    int64_t most = t.most.load();
    while (now > most && !t.most.compare_exchange_weak(most, now)) {
    }
    std::this_thread::sleep_for(std::chrono::microseconds(500));
    --t.in_flight;
    g.release(d.ticket);
  }
}

class AcquireSlots : public EachStore {};

std::string slot_policy(const EachStore &) {
  return R"("concurrency": {"limit": )" + std::to_string(kLimit) + R"(, "ttl_s": 60})";
}

}  // namespace

TEST_P(AcquireSlots, WaitsForAReleaseInsteadOfBeingRefused) {
  RealGuard g(policy(R"("request_rate": {"rate": 1000, "burst": 100}, "concurrency": {"limit": 1, "ttl_s": 60})"));
  Decision first = g.guard.acquire(request("t"), 1.0);
  ASSERT_TRUE(first.allowed);
  std::atomic<bool> released{false}, allowed_before_release{false};
  Decision waited;
  std::thread waiter([&] {
    waited = g.guard.acquire(request("t"), 30.0);
    if (!released.load()) allowed_before_release = true;
  });
  // The waiter is refused at once without the wait, and admitted only by the release below.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  released = true;
  g.guard.release(first.ticket);
  waiter.join();
  EXPECT_TRUE(waited.allowed) << "an acquire refused for a slot only was not admitted by a release";
  EXPECT_FALSE(allowed_before_release.load()) << "admitted while the only slot was still held";
  EXPECT_EQ(waited.concurrency_remaining, 0);
  g.guard.release(waited.ticket);
}

TEST_P(AcquireSlots, AWaitThatTimesOutIsRefusedByTheConcurrencyLimiterAndTakesNoToken) {
  RealGuard g(policy(R"("request_rate": {"rate": 10, "burst": 2}, "concurrency": {"limit": 1, "ttl_s": 60})"));
  Decision first = g.guard.acquire(request("t"), 1.0);
  ASSERT_TRUE(first.allowed);
  Decision timed_out = g.guard.acquire(request("t"), 0.05);
  EXPECT_FALSE(timed_out.allowed);
  EXPECT_EQ(timed_out.status, 429);
  EXPECT_EQ(timed_out.limiter, Limiter::concurrency);
  g.guard.release(first.ticket);
  // The refused wait took no token: one is left of the burst of 2, so this reserve goes at once.
  Decision next = g.guard.reserve(request("t"), 1.0);
  EXPECT_TRUE(next.allowed);
  EXPECT_EQ(next.wait_us, 0);
  g.guard.release(next.ticket);
}

TEST_P(AcquireSlots, ZeroMaxWaitStillRefusesAtOnce) {
  RealGuard g(policy(R"("concurrency": {"limit": 1, "ttl_s": 60})"));
  Decision first = g.guard.acquire(request("t"), 0);
  ASSERT_TRUE(first.allowed);
  Decision second = g.guard.acquire(request("t"), 0);
  EXPECT_FALSE(second.allowed);
  EXPECT_EQ(second.limiter, Limiter::concurrency);
  g.guard.release(first.ticket);
}

// Many callers on one tenant: never more than the limit in flight, none refused (each waits for a slot that a
// release frees within max_wait). memory://: threads of one process; shm://: forked processes of threads.
TEST_P(AcquireSlots, ManyCallersNeverExceedTheLimitAndNoneIsRefused) {
  const bool forks = GetParam() != StoreKind::memory;
  const int processes = forks ? 3 : 1, threads = forks ? 4 : 12;
  std::string pol = policy(slot_policy(*this));
  auto *tally =
      static_cast<Tally *>(mmap(nullptr, sizeof(Tally), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(tally, MAP_FAILED);
  new (tally) Tally();
  auto run_process = [&] {
    RealGuard g(pol);
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; t++) ts.emplace_back([&] { run_caller(g.guard, *tally); });
    for (auto &t : ts) t.join();
  };
  if (!forks) {
    run_process();
  } else {
    std::vector<pid_t> kids;
    for (int p = 0; p < processes; p++) {
      pid_t pid = fork();
      if (pid == 0) {
        run_process();
        _exit(0);
      }
      kids.push_back(pid);
    }
    floodwall::testing::expect_children_exit_ok(kids);
  }
  EXPECT_EQ(tally->refused.load(), 0) << "an acquire was refused while slots came free within max_wait";
  EXPECT_EQ(tally->allowed.load(), int64_t{processes} * threads * kPerCaller);
  EXPECT_LE(tally->most.load(), kLimit) << "more than the limit in flight";
  EXPECT_EQ(tally->most.load(), kLimit) << "the slots were never all in use: the test did not wait for any";
  tally->~Tally();
  munmap(tally, sizeof(Tally));
}

INSTANTIATE_TEST_SUITE_P(Stores, AcquireSlots, ::testing::Values(StoreKind::memory, StoreKind::shm, StoreKind::redis),
                         floodwall::testing::store_kind_name);

// Redis: counted commands. A slot wait is woken by the release's PUBLISH, never by asking Redis in a loop:
// its admits are the first try, one when its subscription stands (a release before it would be missed), and
// the one the release woke, which is admitted.
TEST(AcquireSlotsRedis, AWaitAsksRedisThreeTimesAndSubscribesOnce) {
  floodwall::testing::RedisServer redis;
  RealGuard g(R"({"store": ")" + redis.url() + R"(", "redis": {"deadline_ms": 2000, "flags_poll_ms": 3600000},
                  "concurrency": {"limit": 1, "ttl_s": 60}})");
  Decision first = g.guard.acquire(request("t"), 5.0);
  ASSERT_TRUE(first.allowed);
  auto calls = [&](const char *command) {
    return floodwall::testing::completed_calls(redis.command({"INFO", "commandstats"}), command);
  };
  // Each admit runs its script once, and the script reads the control record once (one EXISTS).
  int64_t admits0 = calls("exists"), publish0 = calls("publish"), subscribe0 = calls("subscribe");
  Decision waited;
  // max_wait 0.9 s: within it only the release's notice can wake the waiter (its re-check without news would
  // come a second after its last try).
  std::thread waiter([&] { waited = g.guard.acquire(request("t"), 0.9); });
  // Well within the 1 s re-check: the waiter's two tries are done, and it sleeps.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  g.guard.release(first.ticket);
  waiter.join();
  ASSERT_TRUE(waited.allowed) << "the release's notice did not wake the waiter within max_wait";
  EXPECT_EQ(calls("exists") - admits0, 3) << "the waiter's admits: first try, subscribed, woken by the release";
  EXPECT_EQ(calls("publish") - publish0, 1) << "the release published once";
  EXPECT_EQ(calls("subscribe") - subscribe0, 1) << "one subscription for the waiting tenant";
  g.guard.release(waited.ticket);
}

// First come, first served within a process: of two acquires waiting for the tenant's one slot, the one that
// began waiting first gets the first slot released, the other the next one.
TEST_P(AcquireSlots, WaitersOfAProcessGetSlotsInTheOrderTheyCame) {
  RealGuard g(policy(R"("concurrency": {"limit": 1, "ttl_s": 60})"));
  Decision held = g.guard.acquire(request("t"), 1.0);
  ASSERT_TRUE(held.allowed);
  std::mutex mu;
  std::vector<int> order;
  std::vector<Decision> got(2);
  auto wait = [&](int who) {
    got[static_cast<size_t>(who)] = g.guard.acquire(request("t"), 30.0);
    std::lock_guard lock(mu);
    order.push_back(who);
  };
  std::thread first(wait, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the first is in line before the second
  std::thread second(wait, 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  g.guard.release(held.ticket);
  first.join();  // the first slot released is the first waiter's (else this never returns: the test times out)
  {
    std::lock_guard lock(mu);
    ASSERT_EQ(order, std::vector<int>{0}) << "the second waiter went before the first";
  }
  g.guard.release(got[0].ticket);
  second.join();
  EXPECT_EQ(order, (std::vector<int>{0, 1}));
  EXPECT_TRUE(got[0].allowed && got[1].allowed);
  g.guard.release(got[1].ticket);
}

// Behind Sentinel: the subscriber follows the master the sentinels name, and the release's notice wakes the
// waiting acquire.
TEST(AcquireSlotsSentinel, WaitsForAReleaseThroughTheSentinelStore) {
  floodwall::testing::SentinelTopology topo;
  RealGuard g(R"({"store": ")" + topo.sentinel_url() +
              R"(", "redis": {"deadline_ms": 2000}, "concurrency": {"limit": 1, "ttl_s": 60}})");
  Decision first = g.guard.acquire(request("t"), 1.0);
  ASSERT_TRUE(first.allowed);
  ASSERT_FALSE(first.degraded || first.failed_open) << "decided by the store";
  std::atomic<bool> released{false}, allowed_before_release{false};
  Decision waited;
  std::thread waiter([&] {
    // max_wait 0.9 s: within it only the release's notice can wake the waiter (not its 1 s re-check).
    waited = g.guard.acquire(request("t"), 0.9);
    if (!released.load()) allowed_before_release = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  released = true;
  g.guard.release(first.ticket);
  waiter.join();
  EXPECT_TRUE(waited.allowed) << "the release's notice did not wake the waiter within max_wait";
  EXPECT_FALSE(waited.degraded || waited.failed_open);
  EXPECT_FALSE(allowed_before_release.load()) << "admitted while the only slot was still held";
  g.guard.release(waited.ticket);
}
