// The clocks and random numbers every decision reads (util/clock.hpp): the steady clock never goes back, the
// wall clock is the system's, a manual clock moves only when told, and the random numbers are in range and,
// seeded, the same every run.
#include "util/clock.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <string>
#include <thread>
#include <vector>

using floodwall::ManualClock;
using floodwall::random_id;
using floodwall::SeededRng;
using floodwall::SteadyClock;
using floodwall::SystemRng;

TEST(Clock, TheSteadyClockNeverGoesBackOnAnyThread) {
  SteadyClock c;
  std::vector<std::thread> threads;
  std::atomic<int> backwards{0};
  for (int t = 0; t < 4; t++)
    threads.emplace_back([&] {
      int64_t last = c.now_us();
      for (int i = 0; i < 100'000; i++) {
        int64_t now = c.now_us();
        if (now < last) backwards++;
        last = now;
      }
    });
  for (auto &t : threads) t.join();
  EXPECT_EQ(backwards.load(), 0);
}

TEST(Clock, TheWallClockIsTheSystemsInMicroseconds) {
  SteadyClock c;
  auto sys = [] {
    return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  int64_t before = sys(), wall = c.wall_us(), after = sys();
  EXPECT_GE(wall, before);
  EXPECT_LE(wall, after);
}

TEST(Clock, AManualClockMovesOnlyWhenTold) {
  ManualClock c(5'000'000);
  EXPECT_EQ(c.now_us(), 5'000'000);
  EXPECT_EQ(c.wall_us(), 5'000'000);
  c.advance_us(250);
  EXPECT_EQ(c.now_us(), 5'000'250);
  EXPECT_EQ(c.now_us(), 5'000'250);
}

TEST(Rng, UnitsAreInZeroToOneAndSeededOnesRepeat) {
  SeededRng a(7), b(7), other(8);
  bool differs = false;
  for (int i = 0; i < 10'000; i++) {
    double u = a.next_unit();
    EXPECT_GE(u, 0.0);
    EXPECT_LT(u, 1.0);
    double v = b.next_unit();
    EXPECT_EQ(u, v) << "the same seed, the same numbers";
    differs = differs || other.next_unit() != u;
  }
  EXPECT_TRUE(differs);
  SystemRng sys;
  for (int i = 0; i < 10'000; i++) {
    double u = sys.next_unit();
    EXPECT_GE(u, 0.0);
    EXPECT_LT(u, 1.0);
  }
}

TEST(Rng, ClientIdsAre32HexDigitsAndDoNotRepeat) {
  SystemRng rng;
  std::set<std::string> ids;
  for (int i = 0; i < 1000; i++) {
    std::string id = random_id(rng);
    EXPECT_EQ(id.size(), 32u);
    EXPECT_EQ(id.find_first_not_of("0123456789abcdef"), std::string::npos) << id;
    ids.insert(id);
  }
  EXPECT_EQ(ids.size(), 1000u);
}
