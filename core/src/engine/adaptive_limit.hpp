// The adaptive concurrency limit: the in-flight requests a process admits, under a limit that the
// latency it measures moves, as Netflix's concurrency-limits and envoy's adaptive concurrency filter do.
//
// Each admitted request's latency is measured from its admit to its release (the core's own clock; no
// call of the bindings'). Both algorithms compare the latency now with the service's latency at no load,
// which the limit measures itself, as envoy's gradient controller does: at its start and every
// probe_interval_s it admits at most min_limit requests at once until kProbeSamples of them have ended,
// and takes their median (in dark mode, where requests beyond it are admitted too, a sample counts only if
// none was admitted beyond it while it ran: under a dark flood the probe waits for enforcement). (Netflix's Gradient2
// compares with a long-term average instead, and that average, fed by the queued requests' latency, drifts up under
// sustained overload: the limit with it.) Between probes the samples of a window (window_ms and at least
// kMinWindowSamples releases) give one average latency, and the algorithm moves the limit once per window:
//   gradient2 (default): gradient = clamp(tolerance * base / latency, 0.5, 1); new = limit * gradient +
//     sqrt(limit); the limit does not grow while the window's peak in-flight stayed under half of it.
//   vegas: queue = limit * (1 - base / latency); under log10(limit) the limit grows by 6 log10, under
//     3 log10 by log10, over 6 log10 it falls by log10 (log10 at least 1); base follows a lower latency.
// Either way limit = limit * (1 - smoothing) + new * smoothing, within [min_limit, max_limit].
//
// A request of traffic class t (sandbox, read, write, critical) is admitted while the in-flight count is below
// its share of the limit, limit * (1 - critical_reserve * (3 - t) / 3): sandbox work is shed first,
// critical work last, and critical requests may use the whole limit. A ticket never released stops
// counting after ttl_s, as a concurrency slot does, so a leaked ticket does not pin the limit.
#pragma once

#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "engine/utilization_shedder.hpp"
#include "policy/policy.hpp"

namespace floodwall {

class AdaptiveLimit {
 public:
  static constexpr int64_t kMinWindowSamples = 10;
  static constexpr size_t kProbeSamples = 20;

  AdaptiveLimit(const AdaptivePolicy &p, int64_t now_us);

  // A slot for a request of traffic class t. Returns its id, or 0 when the limit refuses it and `enforce` is set.
  // `over` says whether the limit refused (or, not enforcing, would have): a dark request still holds a
  // slot and is measured, so that the limit learns the service as it would run.
  uint64_t acquire(TrafficClass t, bool enforce, int64_t now_us, bool &over);
  // The slot back. `sample`: the request ran (it was admitted); its latency is measured. A slot that
  // expired (ttl_s) or was given back already is ignored.
  void release(uint64_t id, bool sample, int64_t now_us);

  double limit() const;
  int64_t in_flight() const;
  double base_latency_us() const;  // the no-load latency measured last (0: not yet)
  // The most requests of traffic class t admitted at once under a limit: at least one.
  int64_t cap(double limit, TrafficClass t) const;

 private:
  void close_window(int64_t now_us);  // mu_ held, as for the rest
  void end_probe(int64_t now_us);
  void sweep(int64_t now_us);
  double gradient2(double latency, int64_t peak) const;
  double vegas(double latency, int64_t peak);

  const AdaptivePolicy p_;
  mutable std::mutex mu_;
  double limit_;
  struct Slot {
    int64_t started_us;
    uint64_t probe_epoch;  // probe_epoch_ when it was admitted under min_limit during a probe; else 0
  };
  std::unordered_map<uint64_t, Slot> started_;  // in flight, by id
  uint64_t next_id_ = 1;
  // The current window.
  int64_t window_start_us_;
  double window_sum_us_ = 0;
  int64_t window_samples_ = 0;
  int64_t window_peak_ = 0;  // the most in flight at once
  int64_t next_sweep_us_;
  // The no-load latency, and its probe.
  double base_us_ = 0;
  bool probing_ = true;
  // A probe's sample is a request admitted under min_limit that ended with no request admitted beyond
  // min_limit meanwhile (dark mode admits those): each such admission begins a new epoch.
  uint64_t probe_epoch_ = 1;
  std::vector<int64_t> probe_samples_;
  int64_t next_probe_us_ = 0;
};

}  // namespace floodwall
