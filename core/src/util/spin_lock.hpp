// A test-and-test-and-set lock for critical sections of a few dozen instructions (the memory store's
// shards). Uncontended, lock is one atomic exchange and unlock one plain release store, where a
// pthread mutex pays a locked instruction on both and a call into libc. A waiter spins on a read (no
// cache-line ping-pong) with `pause`, and yields the CPU after a while, so that a holder descheduled
// mid-section (two cores, many threads) is not starved by its waiters.
#pragma once

#include <atomic>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace floodwall {

class SpinLock {
 public:
  void lock() noexcept {
    while (held_.exchange(true, std::memory_order_acquire)) wait();
  }
  void unlock() noexcept { held_.store(false, std::memory_order_release); }

 private:
  void wait() noexcept {
    for (int spins = 0; held_.load(std::memory_order_relaxed); spins++) {
      if (spins < 64) {
        relax();
      } else {
        std::this_thread::yield();
      }
    }
  }
  static void relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
  }

  std::atomic<bool> held_{false};
};

}  // namespace floodwall
