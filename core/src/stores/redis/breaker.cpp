#include "stores/redis/breaker.hpp"

#include <algorithm>
#include <climits>

namespace floodwall {

void Breaker::slide(int64_t now_us) {
  int64_t width = std::max<int64_t>(1, o_.window_us / kBuckets);
  int64_t start = now_us - now_us % width;
  Bucket &b = buckets_[static_cast<size_t>((now_us / width) % kBuckets)];
  if (b.start_us != start) b = Bucket{start, 0, 0};
}

Breaker::Window Breaker::window(int64_t now_us) {
  slide(now_us);
  Window w;
  for (const Bucket &b : buckets_) {
    if (b.start_us <= now_us - o_.window_us) continue;
    w.calls += b.calls;
    w.failures += b.failures;
  }
  return w;
}

void Breaker::clear() {
  buckets_.fill(Bucket{});
}

void Breaker::record(bool failure, int64_t now_us) {
  if (!closed()) return;  // open or probing: only the probe's answer counts
  slide(now_us);
  int64_t width = std::max<int64_t>(1, o_.window_us / kBuckets);
  Bucket &b = buckets_[static_cast<size_t>((now_us / width) % kBuckets)];
  b.calls++;
  b.failures += failure;
  if (!failure) return;
  Window w = window(now_us);
  if (w.calls >= o_.min_calls && static_cast<double>(w.failures) >= o_.failure_ratio * static_cast<double>(w.calls))
    open(now_us + o_.open_us);
}

void Breaker::trip(int64_t now_us) {
  if (state() == BreakerState::closed) open(now_us + o_.open_us);
}

void Breaker::open(int64_t until_us) {
  open_until_us_ = until_us;
  clear();
  state_.store(static_cast<uint8_t>(BreakerState::open), std::memory_order_release);
}

bool Breaker::probe_due(int64_t now_us) {
  if (state() != BreakerState::open || now_us < open_until_us_) return false;
  probe_sent_us_ = now_us;
  state_.store(static_cast<uint8_t>(BreakerState::half_open), std::memory_order_release);
  return true;
}

int64_t Breaker::next_probe_us() const {
  return state() == BreakerState::open ? open_until_us_ : INT64_MAX;
}

void Breaker::probe_result(bool ok, int64_t now_us) {
  if (state() != BreakerState::half_open) return;
  if (ok) {
    clear();
    state_.store(static_cast<uint8_t>(BreakerState::closed), std::memory_order_release);
    return;
  }
  // At most one probe per open period: a probe that failed at once waits out the rest of it; one that
  // waited its whole deadline (a silent store) is followed by the next at once, so that the store is
  // seen again as soon as it answers.
  open(std::max(now_us, probe_sent_us_ + o_.open_us));
}

}  // namespace floodwall
