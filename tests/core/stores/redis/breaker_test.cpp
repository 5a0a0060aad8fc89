// The breaker judges the store, not the queue: a failure rate over a sliding window, a trip on
// silence, one probe when half-open. Simulated time only.
#include "stores/redis/breaker.hpp"

#include <gtest/gtest.h>

#include "util/clock.hpp"

using floodwall::Breaker;
using floodwall::BreakerOptions;
using floodwall::BreakerState;
using floodwall::ManualClock;

namespace {

BreakerOptions defaults() {
  return BreakerOptions{};  // at least half of at least 20 calls within 1 s; open for 1 s
}

void calls(Breaker &b, ManualClock &clock, int n, bool failure, int64_t spacing_us = 1000) {
  for (int i = 0; i < n; i++) {
    b.record(failure, clock.now_us());
    clock.advance_us(spacing_us);
  }
}

}  // namespace

TEST(Breaker, ConsecutiveFailuresBelowTheMinimumCallsDoNotOpenIt) {
  ManualClock clock;
  Breaker b(defaults());
  calls(b, clock, 19, true);
  EXPECT_EQ(b.state(), BreakerState::closed) << "19 calls are too few to judge";
  calls(b, clock, 1, true);
  EXPECT_EQ(b.state(), BreakerState::open) << "20 of 20 failed";
}

TEST(Breaker, OpensAtHalfOfTheCallsInTheWindow) {
  ManualClock clock;
  Breaker b(defaults());
  calls(b, clock, 30, false);
  calls(b, clock, 29, true);
  EXPECT_EQ(b.state(), BreakerState::closed) << "29 of 59 failed: under half";
  calls(b, clock, 1, true);
  EXPECT_EQ(b.state(), BreakerState::open) << "30 of 60 failed";
}

TEST(Breaker, ScatteredFailuresAmongSuccessesNeverOpenIt) {
  // The old breaker opened on 5 consecutive deadline misses; a busy, healthy store has runs like that.
  ManualClock clock;
  Breaker b(defaults());
  for (int round = 0; round < 1000; round++) {
    calls(b, clock, 5, true, 100);
    calls(b, clock, 15, false, 100);
  }
  EXPECT_EQ(b.state(), BreakerState::closed);
}

TEST(Breaker, SuccessesOlderThanTheWindowNoLongerCount) {
  ManualClock clock;
  Breaker b(defaults());
  calls(b, clock, 1000, false, 100);  // 0.1 s of successes
  clock.advance_s(1.2);               // they slide out of the window
  calls(b, clock, 20, true);
  EXPECT_EQ(b.state(), BreakerState::open);
}

TEST(Breaker, SilenceTripsItAtOnce) {
  ManualClock clock;
  Breaker b(defaults());
  calls(b, clock, 100000, false, 1);  // a busy store: no failure rate could open it quickly
  b.trip(clock.now_us());
  EXPECT_EQ(b.state(), BreakerState::open);
  EXPECT_FALSE(b.closed());
}

TEST(Breaker, OneProbeAfterTheOpenPeriodAndItsSuccessClosesIt) {
  ManualClock clock;
  Breaker b(defaults());
  b.trip(clock.now_us());
  EXPECT_EQ(b.next_probe_us(), clock.now_us() + 1'000'000);
  clock.advance_s(0.999);
  EXPECT_FALSE(b.probe_due(clock.now_us()));
  clock.advance_s(0.001);
  EXPECT_TRUE(b.probe_due(clock.now_us()));
  EXPECT_EQ(b.state(), BreakerState::half_open);
  EXPECT_FALSE(b.probe_due(clock.now_us())) << "a single probe";
  b.record(false, clock.now_us());  // a late reply of an earlier call is not the probe's answer
  EXPECT_EQ(b.state(), BreakerState::half_open);
  b.probe_result(true, clock.now_us());
  EXPECT_EQ(b.state(), BreakerState::closed);
  calls(b, clock, 19, true);
  EXPECT_EQ(b.state(), BreakerState::closed) << "the window starts empty after closing";
}

TEST(Breaker, AProbeThatFailsAtOnceWaitsOutTheOpenPeriod) {
  ManualClock clock;
  Breaker b(defaults());
  b.trip(clock.now_us());
  clock.advance_s(1);
  ASSERT_TRUE(b.probe_due(clock.now_us()));
  clock.advance_us(300);  // an error reply
  b.probe_result(false, clock.now_us());
  EXPECT_EQ(b.state(), BreakerState::open);
  clock.advance_s(0.9);
  EXPECT_FALSE(b.probe_due(clock.now_us()));
  clock.advance_s(0.1);
  EXPECT_TRUE(b.probe_due(clock.now_us()));
}

TEST(Breaker, AProbeThatTimedOutIsFollowedByTheNextAtOnce) {
  // A silent store: the probe waited its whole deadline (the open period); the next goes out at once,
  // so that the store is seen again as soon as it answers.
  ManualClock clock;
  Breaker b(defaults());
  b.trip(clock.now_us());
  clock.advance_s(1);
  ASSERT_TRUE(b.probe_due(clock.now_us()));
  clock.advance_s(1);
  b.probe_result(false, clock.now_us());
  EXPECT_TRUE(b.probe_due(clock.now_us()));
}

TEST(Breaker, TheRuleIsConfigurable) {
  ManualClock clock;
  Breaker b(BreakerOptions{200'000, 4, 0.75, 50'000});
  calls(b, clock, 1, false);
  calls(b, clock, 2, true);
  EXPECT_EQ(b.state(), BreakerState::closed) << "3 calls";
  calls(b, clock, 1, true);
  EXPECT_EQ(b.state(), BreakerState::open) << "3 of 4 failed";
  clock.advance_us(50'000);
  EXPECT_TRUE(b.probe_due(clock.now_us()));
}
