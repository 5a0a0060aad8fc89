// The calls in progress on a client, so that fw_client_close waits for them and no call starts after it.
//
// A call counts itself in and then looks at `closed`; close sets `closed` and then looks at the counts: one
// of the two sees the other (Dekker). Done with a locked instruction and a full fence on both sides, that
// costs every fw_admit and fw_release two locked read-modify-writes (about 10 ns, measured). So the cost is
// put where it is rare, as liburcu and folly do: each calling thread owns a slot and counts in it with
// plain stores and a compiler-only fence, and close makes every thread of the process pass a full memory
// barrier (membarrier(2), MEMBARRIER_CMD_PRIVATE_EXPEDITED, a few microseconds) between setting `closed`
// and reading the counts. Where membarrier is not available (an old kernel, a seccomp filter), and for
// threads beyond the owned slots, calls count with locked instructions as before; so does every call where
// there is no membarrier at all (macOS).
#pragma once

#ifdef __linux__
#include <linux/membarrier.h>
#include <sys/syscall.h>
#endif
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <thread>

namespace fw_capi {

constexpr unsigned kOwnedSlots = 64;  // threads that count without a locked instruction at once

// Whether this process counts the asymmetric way: decided once, when the first client is made (before any
// call can be counted), by registering for expedited barriers.
inline std::atomic<bool> g_asymmetric{false};

inline void choose_counting() {
  static std::once_flag once;
  std::call_once(once, [] {
#ifdef __linux__
    bool ok = syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
#else
    bool ok = false;
#endif
    g_asymmetric.store(ok, std::memory_order_release);
  });
}

// The owned slots: bit i set while a thread owns slot i.
inline std::atomic<uint64_t> g_owned{0};

// This thread's part, in one thread-local so that a call reaches it once (a thread-local of a shared
// library costs a __tls_get_addr call each time): its calls in progress on any client (a close from inside
// one, a callback run inline, would wait for itself), and its slot plus one (0: none yet). Slots below
// kOwnedSlots are owned, one thread each; the others are shared by several and counted with locked
// instructions.
struct ThreadCalls {
  int in_progress = 0;
  unsigned slot_plus_1 = 0;
};
constinit inline thread_local ThreadCalls tl_calls;

// Gives an owned slot back when its thread ends (its counts are back to zero then).
struct SlotKeeper {
  unsigned slot = kOwnedSlots;
  ~SlotKeeper() {
    if (slot < kOwnedSlots) g_owned.fetch_and(~(uint64_t{1} << slot), std::memory_order_release);
    tl_calls.slot_plus_1 = kOwnedSlots + 1;  // a call from a later destructor counts the shared way
  }
};

inline unsigned shared_slot() {
  static std::atomic<unsigned> next{0};
  return kOwnedSlots + next.fetch_add(1, std::memory_order_relaxed) % kOwnedSlots;
}

[[gnu::noinline]] inline unsigned first_slot(ThreadCalls &t) {
  unsigned slot = shared_slot();
  if (g_asymmetric.load(std::memory_order_acquire)) {
    uint64_t taken = g_owned.load(std::memory_order_relaxed);
    while (~taken != 0) {
      unsigned free = static_cast<unsigned>(__builtin_ctzll(~taken));
      if (g_owned.compare_exchange_weak(taken, taken | (uint64_t{1} << free), std::memory_order_acquire)) {
        slot = free;
        break;
      }
    }
  }
  static thread_local SlotKeeper keeper;
  keeper.slot = slot;
  t.slot_plus_1 = slot + 1;
  return t.slot_plus_1;
}

class CallCounts {
 public:
  struct alignas(64) Slot {
    std::atomic<int64_t> calls{0};
  };

  // Counts a call of this thread in; false (counted out again) when the client is closed.
  bool enter(ThreadCalls &t, unsigned slot_plus_1) {
    unsigned i = slot_plus_1 - 1;
    std::atomic<int64_t> &n = slots_[i].calls;
    if (i < kOwnedSlots) {
      n.store(n.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
      std::atomic_signal_fence(std::memory_order_seq_cst);  // the store before the load; close fences the rest
      if (!closed_.load(std::memory_order_relaxed)) return ++t.in_progress, true;
      n.store(n.load(std::memory_order_relaxed) - 1, std::memory_order_release);
      return false;
    }
    n.fetch_add(1, std::memory_order_seq_cst);
    if (!closed_.load(std::memory_order_seq_cst)) return ++t.in_progress, true;
    n.fetch_sub(1, std::memory_order_release);
    return false;
  }
  // Counts it out: what the call did happens before close reads the count (release).
  void leave(ThreadCalls &t, unsigned slot_plus_1) {
    --t.in_progress;
    unsigned i = slot_plus_1 - 1;
    std::atomic<int64_t> &n = slots_[i].calls;
    if (i < kOwnedSlots)
      n.store(n.load(std::memory_order_relaxed) - 1, std::memory_order_release);
    else
      n.fetch_sub(1, std::memory_order_release);
  }

  // Sets `closed`, then waits until no call is in progress; none can start after it returns.
  void close() {
    closed_.store(true, std::memory_order_seq_cst);
    if (g_asymmetric.load(std::memory_order_acquire)) heavy_barrier();
    for (;;) {
      int64_t calls = 0;
      for (const Slot &s : slots_) calls += s.calls.load(std::memory_order_seq_cst);
      if (calls == 0) return;
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }

 private:
  // Every thread of the process passes a full barrier: a call that counted itself in before it is seen by
  // the counts read after it, and one that looks at `closed` after it sees true.
  static void heavy_barrier() {
#ifdef __linux__
    if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0) return;
    if (syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0 &&
        syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0)
      return;
    if (syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0) == 0) return;
#endif
    // Refused after it was granted (a filter installed since): a store leaves a core's buffer within
    // microseconds, and a thread switched out has drained its own, so a pause long past that stands in.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }

  std::array<Slot, 2 * kOwnedSlots> slots_{};
  std::atomic<bool> closed_{false};
};

}  // namespace fw_capi
