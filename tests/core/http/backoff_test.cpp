// The backoff a caller waits after a 429 or a 503, and the Retry-After it reads (http/backoff.hpp). The exact
// values every language must agree on are tests/vectors.json's (vectors_test.cpp); here, what holds for any
// input: the bounds of the jitter, the floor the server sets, the cap, and bad input refused naming the field.
#include "http/backoff.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "util/errors.hpp"

using floodwall::Backoff;
using floodwall::backoff_delay;
using floodwall::BadRequest;
using floodwall::parse_retry_after;

namespace {

std::string refusal(const Backoff &b, unsigned attempt, double retry_after_s, double random01) {
  try {
    backoff_delay(b, attempt, retry_after_s, random01);
  } catch (const BadRequest &e) {
    return e.what();
  }
  return "(accepted)";
}

}  // namespace

TEST(Backoff, FullJitterStaysWithinZeroAndTheCappedExponential) {
  Backoff b;  // 0.1 s, doubling, cap 20 s
  for (unsigned attempt = 0; attempt < 80; attempt++) {
    const double ceiling = std::min(b.cap_s, b.base_s * std::ldexp(1.0, static_cast<int>(std::min(attempt, 64u))));
    EXPECT_EQ(backoff_delay(b, attempt, -1, 0.0), 0.0) << attempt;
    double high = backoff_delay(b, attempt, -1, std::nextafter(1.0, 0.0));
    EXPECT_LT(high, ceiling + 1e-12) << attempt;
    EXPECT_GT(high, ceiling * 0.999) << attempt;
    EXPECT_LE(high, b.cap_s) << attempt << ": never above the cap";
  }
}

TEST(Backoff, TheWindowDoublesUntilTheCap) {
  Backoff b;
  double previous = 0;
  for (unsigned attempt = 0; attempt < 12; attempt++) {
    double window = backoff_delay(b, attempt, -1, 0.5) * 2;
    if (window < b.cap_s) {
      EXPECT_GT(window, previous) << attempt;
      if (attempt > 0) {
        EXPECT_DOUBLE_EQ(window, previous * 2) << attempt;
      }
    } else {
      EXPECT_DOUBLE_EQ(window, b.cap_s) << attempt;
    }
    previous = window;
  }
  EXPECT_DOUBLE_EQ(backoff_delay(b, 4'000'000'000u, -1, 0.5), b.cap_s / 2) << "a huge attempt costs nothing";
}

TEST(Backoff, NeverEarlierThanTheServerAsked) {
  Backoff b;
  for (double retry_after : {0.0, 0.5, 1.0, 30.0, 86400.0})
    for (double r : {0.0, 0.3, 0.999})
      for (unsigned attempt : {0u, 3u, 40u}) {
        double d = backoff_delay(b, attempt, retry_after, r);
        EXPECT_GE(d, retry_after) << retry_after << " " << r << " " << attempt;
        EXPECT_LE(d, retry_after + b.cap_s) << "the jitter is added to the server's delay, capped";
      }
  EXPECT_DOUBLE_EQ(backoff_delay(b, 0, -1, 0.5), backoff_delay(b, 0, -0.25, 0.5)) << "negative: none sent";
}

TEST(Backoff, BadInputIsRefusedNamingTheField) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  Backoff ok;
  for (double base : {0.0, -1.0, nan, inf}) {
    Backoff b;
    b.base_s = base;
    EXPECT_EQ(refusal(b, 0, -1, 0.5), "backoff.base_s: must be a finite number > 0") << base;
  }
  for (double cap : {0.05, nan, inf}) {
    Backoff b;
    b.cap_s = cap;
    EXPECT_EQ(refusal(b, 0, -1, 0.5), "backoff.cap_s: must be a finite number >= backoff.base_s") << cap;
  }
  Backoff none;
  none.attempts = 0;
  EXPECT_EQ(refusal(none, 0, -1, 0.5), "backoff.attempts: must be at least 1");
  for (double r : {-0.1, 1.0, 2.0, nan}) EXPECT_EQ(refusal(ok, 0, -1, r), "random: must be in [0, 1)") << r;
  for (double ra : {nan, inf, -inf})
    EXPECT_EQ(refusal(ok, 0, ra, 0.5), "retry_after_s: must be a finite number (negative for none)") << ra;
}

TEST(RetryAfter, DelaySecondsNeedNoClockAndDatesDo) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(parse_retry_after("30", nan), 30.0) << "delay-seconds do not read now";
  EXPECT_EQ(parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", nan), std::nullopt);
  EXPECT_EQ(parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", std::numeric_limits<double>::infinity()), std::nullopt);
}

TEST(RetryAfter, NeverNegativeAndNothingButTheGrammar) {
  // A date in the past is "now": 0, never negative.
  EXPECT_EQ(parse_retry_after("Thu, 01 Jan 1970 00:00:00 GMT", 1e9), 0.0);
  for (const char *bad : {"", " ", "1e3", "0x10", "1,000", "30s", "- 1", "Sun, 06 Nov 1994", "GMT", "\n30"})
    EXPECT_EQ(parse_retry_after(bad, 1e9), std::nullopt) << "'" << bad << "'";
  std::string nul("3\0", 2);
  EXPECT_EQ(parse_retry_after(nul, 1e9), std::nullopt) << "a NUL byte";
}
