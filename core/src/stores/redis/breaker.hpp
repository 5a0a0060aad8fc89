// The circuit breaker of a remote store. It judges the store, not the local queue: a call that missed
// its deadline while the store kept answering (replies arriving, only late because of queueing) is
// not a failure. What is:
//   - a definitive signal, which opens it at once (`trip`): no reply byte arrived within the deadline
//     while commands were outstanding, or no connection to the store is up;
//   - otherwise a failure rate over a sliding window (`record`): it opens when at least `min_calls`
//     calls completed within `window` and at least `failure_ratio` of them failed (an error reply, a
//     connection that broke under a call, a call that got no byte back).
// Open, it lets no call through; after `open` the I/O thread sends one probe (half-open), and the
// probe's answer closes it or opens it again. Callers only read the state; the I/O thread writes it.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

#include "stores/store.hpp"

namespace floodwall {

struct BreakerOptions {
  int64_t window_us = 1'000'000;
  int64_t min_calls = 20;
  double failure_ratio = 0.5;
  int64_t open_us = 1'000'000;
};

class Breaker {
 public:
  explicit Breaker(BreakerOptions o) : o_(o) {}

  // Any thread.
  BreakerState state() const { return static_cast<BreakerState>(state_.load(std::memory_order_acquire)); }
  bool closed() const { return state() == BreakerState::closed; }

  // The rest is for the one thread that sees the store's replies.
  void record(bool failure, int64_t now_us);
  void trip(int64_t now_us);
  // True once per open period, when the probe is due: moves open -> half_open.
  bool probe_due(int64_t now_us);
  // When probe_due can next say yes (for the I/O thread's sleep); INT64_MAX when closed or probing.
  int64_t next_probe_us() const;
  void probe_result(bool ok, int64_t now_us);

  // The calls and failures within the window now.
  struct Window {
    int64_t calls = 0, failures = 0;
  };
  Window window(int64_t now_us);

 private:
  static constexpr int kBuckets = 10;  // the window slides a tenth at a time
  struct Bucket {
    int64_t start_us = INT64_MIN;
    int64_t calls = 0, failures = 0;
  };
  void open(int64_t until_us);
  void slide(int64_t now_us);
  void clear();

  const BreakerOptions o_;
  std::atomic<uint8_t> state_{static_cast<uint8_t>(BreakerState::closed)};
  std::array<Bucket, kBuckets> buckets_{};
  int64_t open_until_us_ = 0;
  int64_t probe_sent_us_ = 0;
};

}  // namespace floodwall
