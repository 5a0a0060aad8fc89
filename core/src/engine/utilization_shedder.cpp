#include "engine/utilization_shedder.hpp"

#include <algorithm>

namespace floodwall {

TrafficClass traffic_class_of(bool sandbox, bool critical, std::string_view method) {
  if (sandbox) return TrafficClass::sandbox;
  if (critical) return TrafficClass::critical;
  if (method == "GET" || method == "HEAD" || method == "OPTIONS") return TrafficClass::read;
  return TrafficClass::write;
}

UtilizationController::UtilizationController(const UtilizationPolicy &p, int64_t now_us)
    : p_(p),
      resting_(-p.delay_s / p.ramp_s),  // a real number: -28/120 = -0.2333..., not -1
      amount_(resting_),
      last_us_(now_us),
      next_sample_us_(now_us + static_cast<int64_t>(p.sample_s * 1e6)) {}

double UtilizationController::derivative(const UtilizationPolicy &p, double u) {
  double d;
  if (u < p.good)
    d = u / p.good - 1;  // healthy: ramp shedding back down
  else if (u < p.bad)
    d = 0;  // dead zone: change nothing
  else
    d = (u - p.bad) / (1 - p.bad);  // unhealthy: ramp shedding up
  return std::clamp(d, -1.0, 1.0) / p.ramp_s;
}

double UtilizationController::drop_probability(double amount, TrafficClass t) {
  return std::clamp(4 * amount - static_cast<double>(t), 0.0, 1.0);
}

double UtilizationController::amount(int64_t now_us) const {
  double dt = static_cast<double>(std::max<int64_t>(0, now_us - last_us_)) / 1e6;
  return std::clamp(amount_ + derivative_ * dt, resting_, 1.0);
}

void UtilizationController::sample(double u, int64_t now_us) {
  amount_ = amount(now_us);
  last_us_ = now_us;
  derivative_ = derivative(p_, u);
  next_sample_us_ = now_us + static_cast<int64_t>(p_.sample_s * 1e6);
}

void InFlightMeter::change(int delta, int64_t now_us) {
  std::lock_guard lock(mu_);
  if (now_us > last_us_) {
    busy_us_ += static_cast<double>(in_flight_) * static_cast<double>(now_us - last_us_);
    last_us_ = now_us;
  }
  in_flight_ = std::max<int64_t>(0, in_flight_ + delta);
}

double InFlightMeter::take_average(int64_t now_us) {
  std::lock_guard lock(mu_);
  if (now_us > last_us_) {
    busy_us_ += static_cast<double>(in_flight_) * static_cast<double>(now_us - last_us_);
    last_us_ = now_us;
  }
  double span = static_cast<double>(now_us - window_start_us_);
  double avg = span > 0 ? busy_us_ / span : static_cast<double>(in_flight_);
  busy_us_ = 0;
  window_start_us_ = now_us;
  return avg;
}

int64_t InFlightMeter::in_flight() const {
  std::lock_guard lock(mu_);
  return in_flight_;
}

}  // namespace floodwall
