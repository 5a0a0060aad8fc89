#include "engine/adaptive_limit.hpp"

#include <algorithm>
#include <cmath>

namespace floodwall {

AdaptiveLimit::AdaptiveLimit(const AdaptivePolicy &p, int64_t now_us)
    : p_(p),
      limit_(static_cast<double>(p.initial_limit)),
      window_start_us_(now_us),
      next_sweep_us_(now_us + static_cast<int64_t>(p.ttl_s * 1e6)) {}

int64_t AdaptiveLimit::cap(double limit, TrafficClass t) const {
  double share = 1.0 - p_.critical_reserve * static_cast<double>(3 - static_cast<int>(t)) / 3.0;
  return std::max<int64_t>(1, static_cast<int64_t>(std::floor(limit * share + 1e-9)));
}

uint64_t AdaptiveLimit::acquire(TrafficClass t, bool enforce, int64_t now_us, bool &over) {
  std::lock_guard lock(mu_);
  if (now_us >= next_sweep_us_) sweep(now_us);
  if (!probing_ && now_us >= next_probe_us_) {
    probing_ = true;
    probe_epoch_++;  // what is in flight now began before the probe: not its samples
    probe_samples_.clear();
  }
  auto in_flight = static_cast<int64_t>(started_.size());
  // While the no-load latency is measured, every traffic class waits for min_limit.
  over = in_flight >= (probing_ ? p_.min_limit : cap(limit_, t));
  if (over && enforce) return 0;
  if (over && probing_) probe_epoch_++;  // admitted beyond min_limit (dark): spoils the samples in flight
  uint64_t id = next_id_++;
  started_.emplace(id, Slot{now_us, probing_ && !over ? probe_epoch_ : 0});
  window_peak_ = std::max(window_peak_, in_flight + 1);
  return id;
}

void AdaptiveLimit::release(uint64_t id, bool sample, int64_t now_us) {
  std::lock_guard lock(mu_);
  auto it = started_.find(id);
  if (it == started_.end()) return;  // expired, or given back already
  int64_t latency = std::max<int64_t>(1, now_us - it->second.started_us);
  bool clean = it->second.probe_epoch == probe_epoch_;
  started_.erase(it);
  if (!sample) return;
  if (probing_) {
    if (clean) probe_samples_.push_back(latency);
    if (probe_samples_.size() >= kProbeSamples) end_probe(now_us);
    return;
  }
  window_sum_us_ += static_cast<double>(latency);
  window_samples_++;
  if (window_samples_ >= kMinWindowSamples && now_us - window_start_us_ >= p_.window_ms * 1000) close_window(now_us);
}

void AdaptiveLimit::end_probe(int64_t now_us) {
  auto mid = probe_samples_.begin() + static_cast<std::ptrdiff_t>(probe_samples_.size() / 2);
  std::nth_element(probe_samples_.begin(), mid, probe_samples_.end());
  base_us_ = static_cast<double>(*mid);
  probing_ = false;
  next_probe_us_ = now_us + static_cast<int64_t>(p_.probe_interval_s * 1e6);
  window_start_us_ = now_us;  // a window of the limit's own load begins
  window_sum_us_ = 0;
  window_samples_ = 0;
  window_peak_ = static_cast<int64_t>(started_.size());
}

// Tickets that were never released (a crashed handler, a leaked ticket) stop counting after ttl_s.
void AdaptiveLimit::sweep(int64_t now_us) {
  auto ttl_us = static_cast<int64_t>(p_.ttl_s * 1e6);
  for (auto it = started_.begin(); it != started_.end();) {
    if (now_us - it->second.started_us >= ttl_us)
      it = started_.erase(it);
    else
      ++it;
  }
  next_sweep_us_ = now_us + std::max<int64_t>(ttl_us / 4, 1000);
}

void AdaptiveLimit::close_window(int64_t now_us) {
  double latency = window_sum_us_ / static_cast<double>(window_samples_);
  int64_t peak = std::max(window_peak_, static_cast<int64_t>(started_.size()));
  double estimate = p_.algorithm == AdaptivePolicy::Algorithm::vegas ? vegas(latency, peak) : gradient2(latency, peak);
  double next = limit_ * (1 - p_.smoothing) + estimate * p_.smoothing;
  limit_ = std::clamp(next, static_cast<double>(p_.min_limit), static_cast<double>(p_.max_limit));
  window_start_us_ = now_us;
  window_sum_us_ = 0;
  window_samples_ = 0;
  window_peak_ = static_cast<int64_t>(started_.size());
}

double AdaptiveLimit::gradient2(double latency, int64_t peak) const {
  double gradient = std::clamp(p_.tolerance * base_us_ / latency, 0.5, 1.0);
  if (gradient >= 1 && static_cast<double>(peak) < limit_ / 2) return limit_;  // app-limited: no growth learned
  return limit_ * gradient + std::sqrt(limit_);
}

double AdaptiveLimit::vegas(double latency, int64_t peak) {
  base_us_ = std::min(base_us_, latency);
  double log = std::max(1.0, std::log10(limit_));
  double queue = std::ceil(limit_ * (1 - base_us_ / latency));
  if (queue > 6 * log) return limit_ - log;
  if (static_cast<double>(peak) * 2 < limit_) return limit_;  // app-limited
  if (queue <= log) return limit_ + 6 * log;
  if (queue < 3 * log) return limit_ + log;
  return limit_;
}

double AdaptiveLimit::limit() const {
  std::lock_guard lock(mu_);
  return limit_;
}

int64_t AdaptiveLimit::in_flight() const {
  std::lock_guard lock(mu_);
  return static_cast<int64_t>(started_.size());
}

double AdaptiveLimit::base_latency_us() const {
  std::lock_guard lock(mu_);
  return base_us_;
}

}  // namespace floodwall
