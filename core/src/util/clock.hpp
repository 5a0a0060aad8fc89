// Time and randomness are injected so that every limiter can be tested in simulated time.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace floodwall {

// Microseconds on a monotonic clock. The memory store and the utilization shedder read it; the Redis
// store never does (its clock is the server's TIME, so a fleet shares one clock).
class Clock {
 public:
  virtual ~Clock() = default;
  virtual int64_t now_us() const = 0;
  // Microseconds since the epoch: the calendar that quotas' windows follow in the in-process stores.
  virtual int64_t wall_us() const = 0;
};

class SteadyClock final : public Clock {
 public:
  int64_t now_us() const override;
  int64_t wall_us() const override;
};

// A clock that only moves when a test says so.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(int64_t start_us = 1'000'000'000) : now_(start_us) {}
  int64_t now_us() const override { return now_.load(std::memory_order_relaxed); }
  int64_t wall_us() const override { return now_us(); }  // a test sets the calendar with the clock
  void advance_us(int64_t d) { now_.fetch_add(d, std::memory_order_relaxed); }
  void advance_s(double s) { advance_us(static_cast<int64_t>(s * 1e6)); }

 private:
  std::atomic<int64_t> now_;
};

class Rng {
 public:
  virtual ~Rng() = default;
  virtual uint64_t next_u64() = 0;  // must be safe to call from many threads
  double next_unit() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }  // [0, 1)
};

// Per-thread xoshiro256** seeded from the OS; 128-bit slot ids drawn from it do not collide across
// processes (2^-64 odds within a ttl window at any realistic rate).
class SystemRng final : public Rng {
 public:
  uint64_t next_u64() override;
};

// 128 random bits in 32 hex digits: a client's id in the fleet reports.
std::string random_id(Rng &rng);

// Deterministic and thread-safe, for tests.
class SeededRng final : public Rng {
 public:
  explicit SeededRng(uint64_t seed) : state_(seed) {}
  uint64_t next_u64() override;

 private:
  std::atomic<uint64_t> state_;
};

}  // namespace floodwall
