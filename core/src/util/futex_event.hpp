// One thread waits for one event that another thread sets, with no lock held by either: a word and a
// futex. Cheaper than a mutex and condition variable, which cost two wakes (the notify, then the unlock
// the woken thread blocks on at once). Used by blocking admits and by a blocking admit's wait for its hot
// tenant's lease call. Elsewhere than Linux (a macOS build), C++20's atomic wait and notify on the same word
// (libc++ waits on it with the system's address wait: __ulock on macOS).
#pragma once

#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include <atomic>
#include <cstdint>

namespace floodwall {

class FutexEvent {
 public:
  // Ready to wait again (only the waiter calls it, when nobody can set the event).
  void reset() { state_.store(kWaiting, std::memory_order_relaxed); }
  // Release: what the setter wrote before is seen by the waiter after wait(). Wakes it only if it slept.
  void set() {
    if (state_.exchange(kDone, std::memory_order_acq_rel) == kSleeping) wake();
  }
  void wait() {
    uint32_t s = state_.load(std::memory_order_acquire);
    while (s != kDone) {
      if (s == kWaiting && !state_.compare_exchange_strong(s, kSleeping, std::memory_order_acquire)) continue;
      block();  // returns at once if the word is no longer kSleeping
      s = state_.load(std::memory_order_acquire);
    }
  }

 private:
#ifdef __linux__
  void wake() {
    futex(FUTEX_WAKE, 1);
  }
  void block() {
    futex(FUTEX_WAIT, kSleeping);
  }
  long futex(int op, uint32_t val) {
    return syscall(SYS_futex, reinterpret_cast<uint32_t *>(&state_), op | FUTEX_PRIVATE_FLAG, val, nullptr, nullptr, 0);
  }
#else
  void wake() {
    state_.notify_one();
  }
  void block() {
    state_.wait(kSleeping, std::memory_order_acquire);
  }
#endif
  static constexpr uint32_t kWaiting = 0, kSleeping = 1, kDone = 2;
  std::atomic<uint32_t> state_{kWaiting};
};

}  // namespace floodwall
