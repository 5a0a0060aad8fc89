// The adaptive concurrency limit, in simulated time: the policy section, the algorithms' arithmetic, and
// a box of workers driven by callers in a closed loop through the whole Guard (memory://), as the issue's
// service: 4 workers, 5 ms of work each, 64 callers. Every number asserted is the simulation's (its own
// clock), never a wall-clock time.
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <nlohmann/json.hpp>
#include <queue>
#include <random>

#include "engine/adaptive_limit.hpp"
#include "harness.hpp"

using floodwall::AdaptiveLimit;
using floodwall::AdaptivePolicy;
using floodwall::Decision;
using floodwall::Limiter;
using floodwall::parse_policy;
using floodwall::Ticket;
using floodwall::TrafficClass;
using floodwall::testing::policy_error;
using floodwall::testing::Sim;

TEST(AdaptivePolicy, EnabledAloneHasDefaultsThatWork) {
  auto p = parse_policy(R"({"adaptive": {"enabled": true}})");
  ASSERT_TRUE(p.adaptive);
  EXPECT_EQ(p.adaptive->algorithm, AdaptivePolicy::Algorithm::gradient2);
  EXPECT_EQ(p.adaptive->initial_limit, 20);
  EXPECT_EQ(p.adaptive->min_limit, 3);
  EXPECT_EQ(p.adaptive->probe_interval_s, 30);
  EXPECT_EQ(p.adaptive->max_limit, 1000);
  EXPECT_EQ(p.adaptive->window_ms, 100);
  EXPECT_TRUE(p.adaptive->routes.empty());
  EXPECT_TRUE(p.configured(Limiter::adaptive));
  EXPECT_FALSE(parse_policy(R"({"adaptive": {"enabled": false, "algorithm": "vegas"}})").adaptive);
  auto v = parse_policy(R"({"adaptive": {"algorithm": "vegas", "min_limit": 5, "max_limit": 50, "window_ms": 250,
                                         "routes": ["/search", "/upload"], "mode": "dark"}})");
  ASSERT_TRUE(v.adaptive);
  EXPECT_EQ(v.adaptive->algorithm, AdaptivePolicy::Algorithm::vegas);
  EXPECT_EQ(v.adaptive->initial_limit, 20);
  EXPECT_EQ(v.adaptive->routes, (std::vector<std::string>{"/search", "/upload"}));
  EXPECT_EQ(v.configured_mode(Limiter::adaptive), floodwall::Mode::dark);
  // An initial limit outside [min, max] by default is brought inside.
  EXPECT_EQ(parse_policy(R"({"adaptive": {"max_limit": 8}})").adaptive->initial_limit, 8);
}

TEST(AdaptivePolicy, BadFieldsAreErrorsNamingThem) {
  EXPECT_EQ(policy_error(R"({"adaptive": {"min_limit": 50, "max_limit": 10}})"),
            "adaptive.min_limit: must be at most adaptive.max_limit, 10 (got 50)");
  EXPECT_EQ(policy_error(R"({"adaptive": {"window_ms": 0}})"),
            "adaptive.window_ms: must be between 1 and 60000 (got 0)");
  EXPECT_EQ(policy_error(R"({"adaptive": {"algorithm": "aimd"}})"),
            "adaptive.algorithm: must be \"gradient2\" or \"vegas\" (got \"aimd\")");
  EXPECT_EQ(policy_error(R"({"adaptive": {"initial_limit": 1, "min_limit": 4}})"),
            "adaptive.initial_limit: must be between adaptive.min_limit and adaptive.max_limit (4 to 1000, got 1)");
  EXPECT_EQ(policy_error(R"({"adaptive": {"smoothing": 0}})"), "adaptive.smoothing: must be > 0 (got 0)");
  EXPECT_EQ(policy_error(R"({"adaptive": {"critical_reserve": 0.95}})"),
            "adaptive.critical_reserve: must be at most 0.9 (got 0.95)");
  EXPECT_EQ(policy_error(R"({"adaptive": {"enabled": "yes"}})"),
            "adaptive.enabled: must be true or false (got \"yes\")");
  EXPECT_EQ(policy_error(R"({"adaptive": {"routes": ["/a", "/a"]}})"), "adaptive.routes[1]: names \"/a\" twice");
  EXPECT_EQ(policy_error(R"({"adaptive": {"limit": 5}})"), "adaptive.limit: unknown key");
  EXPECT_EQ(policy_error(R"({"adaptive": true})"), "adaptive: must be an object (got true)");
  EXPECT_EQ(policy_error(R"({"adaptive": {"probe_interval_s": -1}})"),
            "adaptive.probe_interval_s: must be > 0 (got -1)");
}

namespace {

// The probe a limit begins with: kProbeSamples requests one after another, `latency_us` each, from `now`.
int64_t measure_base(AdaptiveLimit &a, int64_t now, int64_t latency_us) {
  bool over = false;
  for (size_t i = 0; i < AdaptiveLimit::kProbeSamples; i++) {
    uint64_t id = a.acquire(TrafficClass::read, true, now, over);
    EXPECT_NE(id, 0u);
    now += latency_us;
    a.release(id, true, now);
  }
  return now;
}

}  // namespace

TEST(AdaptiveLimitMath, TheNoLoadLatencyIsMeasuredAtMinLimitFirstAndAgainEveryProbeInterval) {
  AdaptivePolicy p;  // min_limit 3, initial 20, probe every 30 s
  AdaptiveLimit a(p, 0);
  bool over = false;
  std::vector<uint64_t> ids;
  for (int i = 0; i < 3; i++) ids.push_back(a.acquire(TrafficClass::critical, true, 0, over));
  EXPECT_EQ(a.acquire(TrafficClass::critical, true, 0, over), 0u) << "a fourth critical request while probing";
  EXPECT_TRUE(over);
  for (uint64_t id : ids) a.release(id, true, 500);  // three samples of 0.5 ms
  // Seventeen more, one after another, of 1..17 ms: the median of the twenty, 9 ms.
  int64_t now = 500;
  for (int i = 1; i <= 17; i++) {
    uint64_t id = a.acquire(TrafficClass::read, true, now, over);
    now += i * 1000;
    a.release(id, true, now);
  }
  EXPECT_DOUBLE_EQ(a.base_latency_us(), 8000) << "the median of the probe's 20 latencies (the 11th)";
  EXPECT_EQ(a.limit(), 20) << "the probe does not move the limit";
  std::vector<uint64_t> held;
  for (int i = 0; i < 16; i++) held.push_back(a.acquire(TrafficClass::read, true, now, over));
  EXPECT_EQ(std::count(held.begin(), held.end(), 0u), 0) << "the limit's 16 reads (20 * 0.8), the probe over";
  EXPECT_EQ(a.acquire(TrafficClass::read, true, now, over), 0u);
  for (uint64_t id : held) a.release(id, false, now);
  // 30 s on, the next admit begins a new probe: min_limit again, then a new median.
  now += 30'000'000;
  for (int i = 0; i < 3; i++) EXPECT_NE(a.acquire(TrafficClass::critical, true, now, over), 0u);
  EXPECT_EQ(a.acquire(TrafficClass::critical, true, now, over), 0u);
}

// Dark mode admits beyond min_limit while the probe runs: such a flood says nothing about the latency at no
// load, so its requests are not samples; once enforced, the probe measures the service at min_limit.
TEST(AdaptiveLimitMath, ADarkFloodIsNotMistakenForTheNoLoadLatency) {
  AdaptivePolicy p;  // min_limit 3
  AdaptiveLimit a(p, 0);
  bool over = false;
  int64_t now = 0;
  for (int round = 0; round < 10; round++) {  // 10 at once, 300 ms each (queued behind each other)
    std::vector<uint64_t> ids;
    for (int i = 0; i < 10; i++) ids.push_back(a.acquire(TrafficClass::critical, false, now, over));
    now += 300'000;
    for (uint64_t id : ids) a.release(id, true, now);
  }
  EXPECT_EQ(a.base_latency_us(), 0) << "100 releases, none a sample: the probe goes on";
  now = measure_base(a, now, 20'000);  // enforced: one at a time, 20 ms each
  EXPECT_DOUBLE_EQ(a.base_latency_us(), 20'000);
}

TEST(AdaptiveLimitMath, TrafficClassesStopInTheShedderOrderAndCriticalUsesTheWholeLimit) {
  AdaptivePolicy p;
  p.initial_limit = 10;
  AdaptiveLimit a(p, 0);
  measure_base(a, 0, 1000);
  EXPECT_EQ(a.cap(10, TrafficClass::sandbox), 7);
  EXPECT_EQ(a.cap(10, TrafficClass::read), 8);
  EXPECT_EQ(a.cap(10, TrafficClass::write), 9);
  EXPECT_EQ(a.cap(10, TrafficClass::critical), 10);
  EXPECT_EQ(a.cap(1, TrafficClass::sandbox), 1) << "at least one request of every traffic class";
  // Fill it with reads: the eighth is the last read, writes go to nine, critical to ten.
  bool over = false;
  std::vector<uint64_t> held;
  for (int i = 0; i < 8; i++) {
    held.push_back(a.acquire(TrafficClass::read, true, 0, over));
    EXPECT_FALSE(over);
  }
  EXPECT_EQ(a.acquire(TrafficClass::sandbox, true, 0, over), 0u);
  EXPECT_TRUE(over);
  EXPECT_EQ(a.acquire(TrafficClass::read, true, 0, over), 0u);
  EXPECT_NE(a.acquire(TrafficClass::write, true, 0, over), 0u);
  EXPECT_EQ(a.acquire(TrafficClass::write, true, 0, over), 0u);
  EXPECT_NE(a.acquire(TrafficClass::critical, true, 0, over), 0u);
  EXPECT_EQ(a.acquire(TrafficClass::critical, true, 0, over), 0u);
  EXPECT_EQ(a.in_flight(), 10);
  // Not enforcing: admitted and counted, and said to be over.
  EXPECT_NE(a.acquire(TrafficClass::critical, false, 0, over), 0u);
  EXPECT_TRUE(over);
  EXPECT_EQ(a.in_flight(), 11);
  a.release(held[0], true, 1000);
  a.release(held[0], true, 1000);  // twice: once
  EXPECT_EQ(a.in_flight(), 10);
}

TEST(AdaptiveLimitMath, ALeakedTicketStopsCountingAfterTheTtl) {
  AdaptivePolicy p;
  p.initial_limit = p.min_limit = p.max_limit = 2;
  p.critical_reserve = 0;
  p.ttl_s = 10;
  p.probe_interval_s = 3600;
  AdaptiveLimit a(p, 0);
  measure_base(a, 0, 1);
  bool over = false;
  ASSERT_NE(a.acquire(TrafficClass::read, true, 0, over), 0u);
  uint64_t leaked = a.acquire(TrafficClass::read, true, 0, over);
  ASSERT_NE(leaked, 0u);
  EXPECT_EQ(a.acquire(TrafficClass::read, true, 5'000'000, over), 0u) << "both held at 5 s";
  EXPECT_NE(a.acquire(TrafficClass::read, true, 10'000'001, over), 0u) << "both expired at 10 s: a slot again";
  EXPECT_EQ(a.in_flight(), 1);
  a.release(leaked, true, 11'000'000);  // late: ignored, the count is not taken below what is held
  EXPECT_EQ(a.in_flight(), 1);
}

TEST(AdaptiveLimitMath, Gradient2FallsWhenLatencyRisesAndDoesNotGrowWhenAppLimited) {
  AdaptivePolicy p;
  p.initial_limit = 20;
  p.probe_interval_s = 3600;
  AdaptiveLimit a(p, 0);
  int64_t now = measure_base(a, 0, 5000);
  EXPECT_DOUBLE_EQ(a.base_latency_us(), 5000);
  // Windows of 20 requests in flight at once, at the no-load latency: the limit grows by sqrt(limit) * smoothing.
  auto window = [&](int in_flight, int64_t rtt_us) {
    bool over = false;
    std::vector<uint64_t> ids;
    for (int i = 0; i < in_flight; i++) ids.push_back(a.acquire(TrafficClass::critical, false, now, over));
    now += std::max<int64_t>(rtt_us, 100'000);
    for (int i = 0; i < in_flight; i++) {
      // each released rtt_us after it started
      a.release(ids[static_cast<size_t>(i)], true, now - std::max<int64_t>(rtt_us, 100'000) + rtt_us);
    }
  };
  for (int i = 0; i < 10; i++) window(20, 5000);
  double grown = a.limit();
  EXPECT_GT(grown, 20) << "not app-limited, latency flat: it grows";
  // App-limited: 4 in flight of a limit above 20 teach nothing about growth.
  window(4, 5000);  // (the window the last full ones' releases end in)
  grown = a.limit();
  for (int i = 0; i < 20; i++) window(4, 5000);
  EXPECT_DOUBLE_EQ(a.limit(), grown);
  // Latency triples at full load: the limit falls, by at most a tenth each window (gradient 0.5, smoothing 0.2).
  int full = static_cast<int>(a.limit());
  for (int i = 0; i < 5; i++) window(full, 15000);
  EXPECT_LT(a.limit(), grown * 0.85);
  EXPECT_GE(a.limit(), grown * 0.5);
}

// ----------------------------------------------------------------------------------- the box, simulated

namespace {

// A service of `workers` workers taking requests first come first served, each `work_us` of work (+-20%),
// and callers in a closed loop: each sends its next request when the last one ends, or 1 ms after a 503.
// Every request goes through the Guard at its arrival and is released when its work ends.
struct Box {
  explicit Box(const std::string &policy) : sim(policy, 7) {}
  struct Phase {
    double until_s;
    int workers;
    int callers;
  };
  struct Stats {
    int64_t completed = 0, shed = 0;
    std::vector<int64_t> latencies_us;  // admitted requests, from arrival to the end of their work
    double p99_ms() {
      if (latencies_us.empty()) return 0;
      std::sort(latencies_us.begin(), latencies_us.end());
      return static_cast<double>(latencies_us[latencies_us.size() * 99 / 100]) / 1000.0;
    }
  };
  // Runs the phases; `measure(stats index, time)` picks which Stats a completion or a shed counts in (-1:
  // none); `every_100ms(t)` is called each 100 ms of simulated time.
  template <class Pick, class Tick>
  void run(const std::vector<Phase> &phases, std::vector<Stats> &stats, Pick pick, Tick every_100ms) {
    std::mt19937_64 rng(11);
    std::uniform_int_distribution<int64_t> work(work_us * 8 / 10, work_us * 12 / 10);
    struct Event {
      int64_t at;
      int kind;  // 0: a caller sends, 1: a worker finishes
      int who;   // the caller
      bool operator>(const Event &o) const { return at > o.at || (at == o.at && kind < o.kind); }
    };
    struct Job {
      int caller;
      int64_t arrived;
      Ticket ticket;
    };
    std::priority_queue<Event, std::vector<Event>, std::greater<>> events;
    std::deque<Job> queue;
    std::vector<Job> running(64);
    std::vector<bool> busy(64, false);
    int64_t t0 = sim.clock.now_us(), now = t0;
    int caller_count = 0;
    auto start_callers = [&](int n) {
      for (; caller_count < n; caller_count++) events.push({now, 0, caller_count});
    };
    size_t phase = 0;
    int workers = phases[0].workers;
    start_callers(phases[0].callers);
    auto dispatch = [&] {
      for (int w = 0; w < workers && !queue.empty(); w++) {
        if (busy[static_cast<size_t>(w)]) continue;
        busy[static_cast<size_t>(w)] = true;
        running[static_cast<size_t>(w)] = queue.front();
        queue.pop_front();
        events.push({now + work(rng), 1, w});
      }
    };
    int64_t next_tick = t0;
    while (!events.empty()) {
      Event e = events.top();
      events.pop();
      while (next_tick <= e.at) {
        sim.clock.advance_us(next_tick - now);
        now = next_tick;
        every_100ms(static_cast<double>(now - t0) / 1e6);
        next_tick += 100'000;
      }
      sim.clock.advance_us(e.at - now);
      now = e.at;
      double t = static_cast<double>(now - t0) / 1e6;
      while (phase < phases.size() && t >= phases[phase].until_s) phase++;
      if (phase == phases.size()) break;
      workers = phases[phase].workers;
      start_callers(phases[phase].callers);
      int s = pick(t);
      if (e.kind == 0) {
        if (e.who >= phases[phase].callers) continue;  // a caller the load no longer has
        Decision d = sim.admit("svc");
        if (!d.allowed) {
          EXPECT_EQ(d.status, 503);
          EXPECT_EQ(d.limiter, Limiter::adaptive);
          if (s >= 0) stats[static_cast<size_t>(s)].shed++;
          events.push({now + 1000, 0, e.who});
          continue;
        }
        queue.push_back({e.who, now, d.ticket});
      } else {
        Job j = running[static_cast<size_t>(e.who)];
        busy[static_cast<size_t>(e.who)] = false;
        sim.guard->release(j.ticket);
        if (s >= 0) {
          stats[static_cast<size_t>(s)].completed++;
          stats[static_cast<size_t>(s)].latencies_us.push_back(now - j.arrived);
        }
        events.push({now, 0, j.caller});
      }
      dispatch();
    }
  }
  double limit() {
    auto m = nlohmann::json::parse(sim.guard->metrics_json());
    return m.contains("adaptive") ? m["adaptive"]["*"]["limit"].get<double>() : 0;
  }
  Sim sim;
  int64_t work_us = 5000;
};

}  // namespace

// The issue's service: 4 workers of 5 ms (800 requests/s), 64 callers. With no limiter every caller queues
// (p99 about 64 / 800 s); with {"adaptive": {"enabled": true}} the admitted requests' p99 stays within 30 ms
// at no less than 85% of the goodput.
TEST(AdaptiveBox, KeepsLatencyLowAtNearlyTheGoodputOfNoLimiter) {
  for (const char *algorithm : {"gradient2", "vegas"}) {
    SCOPED_TRACE(algorithm);
    Box none("{}");
    Box adaptive(std::string(R"({"adaptive": {"enabled": true, "algorithm": ")") + algorithm + "\"}}");
    std::vector<Box::Stats> a(1), n(1);
    auto pick = [](double t) { return t >= 5 ? 0 : -1; };  // 5 s of warm-up, then 20 s measured
    none.run({{25, 4, 64}}, n, pick, [](double) {});
    adaptive.run({{25, 4, 64}}, a, pick, [](double) {});
    double goodput_none = static_cast<double>(n[0].completed) / 20, goodput = static_cast<double>(a[0].completed) / 20;
    std::printf("  %s: no limiter %.0f/s p99 %.1f ms; adaptive %.0f/s (%.1f%%) p99 %.1f ms, %lld shed, limit %.1f\n",
                algorithm, goodput_none, n[0].p99_ms(), goodput, 100 * goodput / goodput_none, a[0].p99_ms(),
                static_cast<long long>(a[0].shed), adaptive.limit());
    EXPECT_GT(n[0].p99_ms(), 60) << "without a limiter every caller queues";
    EXPECT_LE(a[0].p99_ms(), 30);
    EXPECT_GE(goodput, 0.85 * goodput_none);
  }
}

// Capacity halves at 10 s (4 workers -> 2): the limit follows within 2 s (the admitted requests' p99 from
// 2 s after the change is within 30 ms again). Load drops at 20 s (64 callers -> 2, 4 workers): the limit
// recovers and, once it has, nothing is shed.
TEST(AdaptiveBox, FollowsCapacityDownAndRecoversWhenLoadDrops) {
  for (const char *algorithm : {"gradient2", "vegas"}) {
    SCOPED_TRACE(algorithm);
    Box box(std::string(R"({"adaptive": {"enabled": true, "algorithm": ")") + algorithm + "\"}}");
    std::vector<Box::Stats> s(4);  // 5-10 s, 12-20 s, 20-25 s, 25-30 s
    std::vector<std::pair<double, double>> limits;
    box.run(
        {{10, 4, 64}, {20, 2, 64}, {30, 4, 2}}, s,
        [](double t) {
          return t < 5 ? -1 : t < 10 ? 0 : t < 12 ? -1 : t < 20 ? 1 : t < 25 ? 2 : 3;
        },
        [&](double t) {
          limits.push_back({t, box.limit()});
        });
    auto limit_at = [&](double t) {
      for (auto &[at, l] : limits)
        if (at >= t) return l;
      return 0.0;
    };
    std::printf(
        "  %s: 4 workers p99 %.1f ms, limit %.1f; 2 workers from 12 s p99 %.1f ms, limit at 10 s %.1f, "
        "12 s %.1f; 2 callers: %lld shed in 20-25 s, %lld in 25-30 s, limit at 30 s %.1f\n",
        algorithm, s[0].p99_ms(), limit_at(9.9), s[1].p99_ms(), limit_at(10), limit_at(12),
        static_cast<long long>(s[2].shed), static_cast<long long>(s[3].shed), limit_at(29.9));
    EXPECT_LE(s[0].p99_ms(), 30);
    EXPECT_LE(s[1].p99_ms(), 30) << "the limit followed the halved capacity within 2 s";
    EXPECT_LT(limit_at(12), limit_at(9.9)) << "it fell";
    EXPECT_EQ(s[3].shed, 0) << "nothing shed once the load dropped and the limit recovered";
    EXPECT_GT(s[3].completed, 0);
  }
}
