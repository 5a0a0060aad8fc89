// The worker utilization shedder, in simulated time, with the seed's numbers.
#include <gtest/gtest.h>

#include "engine/utilization_shedder.hpp"
#include "harness.hpp"

using floodwall::Decision;
using floodwall::FailReason;
using floodwall::Limiter;
using floodwall::Ticket;
using floodwall::TrafficClass;
using floodwall::UtilizationController;
using floodwall::UtilizationPolicy;
using floodwall::testing::Sim;

TEST(UtilizationMath, RestingAmountIsARealNumberNotMinusOne) {
  UtilizationController c(UtilizationPolicy{}, 0);
  EXPECT_DOUBLE_EQ(c.resting(), -28.0 / 120.0);
  EXPECT_DOUBLE_EQ(c.amount(0), -28.0 / 120.0);
}

TEST(UtilizationMath, DerivativeHasADeadZone) {
  UtilizationPolicy p;
  EXPECT_DOUBLE_EQ(UtilizationController::derivative(p, 0.35), (0.35 / 0.7 - 1) / 120);
  EXPECT_DOUBLE_EQ(UtilizationController::derivative(p, 0.0), -1.0 / 120);
  EXPECT_DOUBLE_EQ(UtilizationController::derivative(p, 0.7), 0);
  EXPECT_DOUBLE_EQ(UtilizationController::derivative(p, 0.79), 0);
  EXPECT_DOUBLE_EQ(UtilizationController::derivative(p, 0.9), (0.9 - 0.8) / 0.2 / 120);
  EXPECT_DOUBLE_EQ(UtilizationController::derivative(p, 1.0), 1.0 / 120);
}

TEST(UtilizationMath, TrafficClassesAreShedInOrder) {
  EXPECT_DOUBLE_EQ(UtilizationController::drop_probability(0.125, TrafficClass::sandbox), 0.5);
  EXPECT_DOUBLE_EQ(UtilizationController::drop_probability(0.125, TrafficClass::read), 0);
  EXPECT_DOUBLE_EQ(UtilizationController::drop_probability(0.3, TrafficClass::sandbox), 1);
  EXPECT_DOUBLE_EQ(UtilizationController::drop_probability(0.3, TrafficClass::read), 0.2);
  EXPECT_DOUBLE_EQ(UtilizationController::drop_probability(0.6, TrafficClass::write), 0.4);
  EXPECT_DOUBLE_EQ(UtilizationController::drop_probability(0.6, TrafficClass::critical), 0);
  EXPECT_DOUBLE_EQ(UtilizationController::drop_probability(1.0, TrafficClass::critical), 1);
  EXPECT_DOUBLE_EQ(UtilizationController::drop_probability(-0.2, TrafficClass::sandbox), 0);
  EXPECT_EQ(floodwall::traffic_class_of(true, true, "POST"), TrafficClass::sandbox);
  EXPECT_EQ(floodwall::traffic_class_of(false, true, "GET"), TrafficClass::critical);
  EXPECT_EQ(floodwall::traffic_class_of(false, false, "GET"), TrafficClass::read);
  EXPECT_EQ(floodwall::traffic_class_of(false, false, "DELETE"), TrafficClass::write);
}

namespace {

// "t" + std::to_string(i) trips GCC 12's -Wrestrict false positive at -O3 (its PR 105651): append instead.
std::string tenant(const char *prefix, int i) {
  std::string t = prefix;
  t += std::to_string(i);
  return t;
}

// Drives the shedder at utilization u for `seconds`, sampling every second of simulated time, and
// returns the shedding amount at the end.
double drive(Sim &s, double u, double seconds) {
  s.guard->report_utilization(u);
  for (double t = 0; t < seconds; t += 1) {
    s.clock.advance_s(1);
    s.admit("probe", 1, "", "GET", true);
  }
  return s.guard->shedding_amount();
}

int shed_of(Sim &s, int n, bool sandbox, bool critical, const char *method) {
  int shed = 0;
  for (int i = 0; i < n; i++) {
    Decision d = s.admit(tenant("t", i), 1, "", method, critical, sandbox);
    if (!d.allowed) {
      shed++;
      EXPECT_EQ(d.status, 503);
      EXPECT_EQ(d.limiter, Limiter::utilization);
    }
    s.guard->release(d.ticket);
  }
  return shed;
}

const char *kPolicy = R"({"utilization": {"workers": 10}})";

}  // namespace

TEST(UtilizationShedder, NothingIsShedForTheFirst28SecondsAtFullLoad) {
  Sim s(kPolicy);
  drive(s, 1.0, 30);  // the first sample at 8 s starts the ramp: -28/120 + 22/120 < 0
  EXPECT_LT(s.guard->shedding_amount(), 0);
  EXPECT_EQ(shed_of(s, 200, true, false, "GET"), 0);
}

TEST(UtilizationShedder, ShedsSandboxThenGetThenPostThenCriticalOverTwoMinutes) {
  Sim s(kPolicy);
  double a = drive(s, 1.0, 8 + 28 + 15);  // amount ~ 0.125: half the sandbox traffic
  EXPECT_NEAR(a, 15.0 / 120, 0.02);
  int sandbox = shed_of(s, 400, true, false, "GET");
  EXPECT_GT(sandbox, 120);
  EXPECT_LT(sandbox, 280);
  EXPECT_EQ(shed_of(s, 200, false, false, "GET"), 0);

  drive(s, 1.0, 30);  // ~0.375: every sandbox request, half the GETs
  EXPECT_EQ(shed_of(s, 100, true, false, "GET"), 100);
  int gets = shed_of(s, 400, false, false, "GET");
  EXPECT_GT(gets, 120);
  EXPECT_LT(gets, 280);
  EXPECT_EQ(shed_of(s, 200, false, false, "POST"), 0);

  drive(s, 1.0, 30);  // ~0.625: half the other writes, no critical yet
  int posts = shed_of(s, 400, false, false, "POST");
  EXPECT_GT(posts, 120);
  EXPECT_LT(posts, 280);
  EXPECT_EQ(shed_of(s, 200, false, true, "POST"), 0);

  drive(s, 1.0, 60);  // capped at 1: everything, critical included
  EXPECT_DOUBLE_EQ(s.guard->shedding_amount(), 1.0);
  EXPECT_EQ(shed_of(s, 100, false, true, "POST"), 100);
}

TEST(UtilizationShedder, TheDeadZoneHoldsTheAmountStill) {
  Sim s(kPolicy);
  double a = drive(s, 1.0, 60);
  double held = drive(s, 0.75, 120);
  // Only the derivative in force until the first dead-zone sample (at most one sample_s) moves it.
  EXPECT_GE(held, a);
  EXPECT_LE(held, a + 8.0 / 120 + 1e-9);
  // Hovering on both sides of 0.75 inside the dead zone never moves it: no flapping.
  double before = s.guard->shedding_amount();
  for (int i = 0; i < 20; i++) drive(s, i % 2 ? 0.72 : 0.78, 8);
  EXPECT_DOUBLE_EQ(s.guard->shedding_amount(), before);
}

TEST(UtilizationShedder, RecoversWhenHealthyAndRestsAtTheDelay) {
  Sim s(kPolicy);
  drive(s, 1.0, 120);
  double recovered = drive(s, 0.0, 400);
  EXPECT_DOUBLE_EQ(recovered, -28.0 / 120);
}

TEST(UtilizationShedder, MeasuresItsOwnInFlightAccountingWhenNothingIsReported) {
  Sim s(R"({"utilization": {"workers": 4, "sample_s": 8}})");
  std::vector<Ticket> busy;
  for (int i = 0; i < 4; i++) busy.push_back(s.admit(tenant("w", i)).ticket);  // 4 of 4 workers busy
  for (int i = 0; i < 80; i++) {
    s.clock.advance_s(1);
    s.guard->shedding_amount();
  }
  EXPECT_GT(s.guard->shedding_amount(), 0) << "a saturated box ramps up from its own accounting";
  for (auto t : busy) s.guard->release(t);
  std::string m = s.guard->metrics_json();
  EXPECT_NE(m.find("\"utilization\":1"), std::string::npos) << m;
  EXPECT_NE(m.find("\"in_flight\":0"), std::string::npos);
}

TEST(UtilizationShedder, DarkModeCountsWhatItWouldHaveShed) {
  Sim s(R"({"utilization": {"workers": 1, "mode": "dark"}})");
  drive(s, 1.0, 100);
  int allowed = 0, dark = 0;
  for (int i = 0; i < 100; i++) {
    Decision d = s.admit("t", 1, "", "GET", false, true);
    allowed += d.allowed;
    dark += d.dark_limiter == Limiter::utilization;
    s.guard->release(d.ticket);
  }
  EXPECT_EQ(allowed, 100);
  EXPECT_EQ(dark, 100);
}
