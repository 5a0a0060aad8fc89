// The requests a concurrency test holds at once and the most it ever held: on the stack for threads, or in
// a mapping forked children share with the test (in_shared_memory) for processes.
#pragma once

#include <sys/mman.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <thread>

namespace floodwall::testing {

struct InFlight {
  std::atomic<int64_t> now{0}, most{0};

  // One allowed request held for `hold`: counted in before the wait and out after it, before the caller
  // releases its ticket, so that what is counted here is never more than what the store holds.
  void hold(std::chrono::microseconds hold) {
    int64_t n = ++now;
    int64_t seen = most.load();
    while (n > seen && !most.compare_exchange_weak(seen, n)) {
    }
    if (hold.count() > 0) std::this_thread::sleep_for(hold);
    now--;
  }
};

// A T made in an anonymous MAP_SHARED mapping: the test process and the children it forks afterwards see
// one object. Never unmapped (a test process maps a few pages in all).
template <typename T>
T *in_shared_memory() {
  void *p = mmap(nullptr, sizeof(T), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) std::abort();
  return new (p) T();
}

}  // namespace floodwall::testing
