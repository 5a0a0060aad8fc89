#include "util/clock.hpp"

#include <pthread.h>
#include <time.h>

#include <chrono>
#include <cstdio>
#include <random>

#include "util/fork.hpp"

namespace floodwall {

// CLOCK_MONOTONIC, as std::chrono::steady_clock reads it on Linux, without the library's wrapper: one
// clock read per decision is a fifth of the embedded store's time.
int64_t SteadyClock::now_us() const {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000 + ts.tv_nsec / 1000;
}

int64_t SteadyClock::wall_us() const {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000 + ts.tv_nsec / 1000;
}

namespace {

uint64_t splitmix64(uint64_t &x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t rotl(uint64_t x, int k) {
  return (x << k) | (x >> (64 - k));
}

struct Xoshiro {
  uint64_t s[4];
  Xoshiro() {
    std::random_device rd;
    uint64_t seed = (static_cast<uint64_t>(rd()) << 32) ^ rd();
    seed ^= static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    for (auto &w : s) w = splitmix64(seed);
  }
  uint64_t next() {
    const uint64_t result = rotl(s[1] * 5, 7) * 9;
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
  }
};

}  // namespace

uint64_t SystemRng::next_u64() {
  // Reseed after fork(): a child must not draw the same slot ids as its parent.
  thread_local Xoshiro gen;
  thread_local uint64_t seen = fork_generation();
  if (uint64_t g = fork_generation(); g != seen) {
    gen = Xoshiro();
    seen = g;
  }
  return gen.next();
}

uint64_t SeededRng::next_u64() {
  uint64_t x = state_.fetch_add(0x9e3779b97f4a7c15ULL, std::memory_order_relaxed);
  return splitmix64(x);
}

std::string random_id(Rng &rng) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(rng.next_u64()),
                static_cast<unsigned long long>(rng.next_u64()));
  return buf;
}

}  // namespace floodwall
