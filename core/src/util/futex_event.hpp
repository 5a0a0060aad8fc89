// One thread waits for one event that another thread sets, with no lock held by either: a word and a
// futex. Cheaper than a mutex and condition variable, which cost two wakes (the notify, then the unlock
// the woken thread blocks on at once). Used by blocking admits and by a blocking admit's wait for its hot
// tenant's lease call.
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

namespace floodwall {

class FutexEvent {
 public:
  // Ready to wait again (only the waiter calls it, when nobody can set the event).
  void reset() { state_.store(kWaiting, std::memory_order_relaxed); }
  // Release: what the setter wrote before is seen by the waiter after wait(). Wakes it only if it slept.
  void set() {
    if (state_.exchange(kDone, std::memory_order_acq_rel) == kSleeping) futex(FUTEX_WAKE, 1);
  }
  void wait() {
    uint32_t s = state_.load(std::memory_order_acquire);
    while (s != kDone) {
      if (s == kWaiting && !state_.compare_exchange_strong(s, kSleeping, std::memory_order_acquire)) continue;
      futex(FUTEX_WAIT, kSleeping);  // returns at once if the word is no longer kSleeping
      s = state_.load(std::memory_order_acquire);
    }
  }

 private:
  long futex(int op, uint32_t val) {
    return syscall(SYS_futex, reinterpret_cast<uint32_t *>(&state_), op | FUTEX_PRIVATE_FLAG, val, nullptr, nullptr, 0);
  }
  static constexpr uint32_t kWaiting = 0, kSleeping = 1, kDone = 2;
  std::atomic<uint32_t> state_{kWaiting};
};

}  // namespace floodwall
