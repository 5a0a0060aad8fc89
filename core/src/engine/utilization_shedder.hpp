// The worker utilization load shedder: a controller, not a threshold.
//
// Every sample_s it reads the box's utilization u and sets a derivative of the shedding amount:
// below `good` it recovers (u/good - 1), between `good` and `bad` it holds still (the dead zone keeps a
// box that hovers near one threshold from flapping), above `bad` it ramps up ((u-bad)/(1-bad)); the
// derivative is clamped to [-1,1] and divided by ramp_s, so even at 100% it takes ramp_s to shed
// everything. The amount rests at -delay_s/ramp_s, so the first ~delay_s of pressure sheds nothing: a
// single slow query is not an emergency. Traffic class i (sandbox, GET, other writes, critical) is dropped with
// probability clamp(4*amount - i, 0, 1).
#pragma once

#include <cstdint>
#include <mutex>

#include "policy/policy.hpp"

namespace floodwall {

// What the shedders drop first (Stripe's four kinds of traffic): test-mode requests, reads, other writes,
// critical requests. Not the plan tier of Policy::tiers, which a tenant's control record names.
enum class TrafficClass : uint8_t { sandbox = 0, read = 1, write = 2, critical = 3 };

TrafficClass traffic_class_of(bool sandbox, bool critical, std::string_view method);

class UtilizationController {
 public:
  explicit UtilizationController(const UtilizationPolicy &p, int64_t now_us);

  static double derivative(const UtilizationPolicy &p, double u);
  static double drop_probability(double amount, TrafficClass t);
  double resting() const { return resting_; }

  // Integrates the derivative in force up to now, then sets the next one from u.
  void sample(double u, int64_t now_us);
  double amount(int64_t now_us) const;
  int64_t next_sample_us() const { return next_sample_us_; }

 private:
  UtilizationPolicy p_;
  double resting_;
  double amount_;          // at last_us_
  double derivative_ = 0;  // per second
  int64_t last_us_;
  int64_t next_sample_us_;
};

// Time-weighted busy workers: the integral of in-flight requests over time, read per sample.
class InFlightMeter {
 public:
  explicit InFlightMeter(int64_t now_us) : last_us_(now_us), window_start_us_(now_us) {}
  void change(int delta, int64_t now_us);
  // Average in-flight requests since the previous call, and restart the window.
  double take_average(int64_t now_us);
  int64_t in_flight() const;

 private:
  mutable std::mutex mu_;
  int64_t in_flight_ = 0;
  int64_t last_us_;
  int64_t window_start_us_;
  double busy_us_ = 0;
};

}  // namespace floodwall
