// Waiting for a concurrency slot (an acquire, docs/concepts/acquire.md): words that a release of a tenant's
// slot changes, one per hash of the tenant, and a futex on each. A waiter reads its tenant's word, tries, and
// sleeps until the word moves (or its time is up): woken by the release itself, never by polling. The words
// live in process (memory://, the Redis stores' subscriber) or in a shared segment (shm://, with
// `shared`: a futex across processes). Two tenants that share a word wake each other: a spurious wake-up
// costs one more try, never a lost one. Without Linux's futex (macOS, where shm:// is refused), a waiter
// looks at its word every millisecond instead: in process, never a store command.
#pragma once

#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif
#include <time.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <functional>
#include <string_view>
#include <thread>

namespace floodwall {

struct SlotSignalWord {
  std::atomic<uint32_t> seq{0};       // moves at every release of a slot of the tenants of this word
  std::atomic<uint32_t> sleepers{0};  // threads (of any process) asleep on seq: a release with none wakes nobody
};
static_assert(sizeof(SlotSignalWord) == 8 && std::atomic<uint32_t>::is_always_lock_free);

class SlotSignals {
 public:
  // The hash that picks a tenant's word (of its TenantKey's text): the same in every process of one library.
  static uint64_t hash(std::string_view tenant_key) { return std::hash<std::string_view>{}(tenant_key); }

  static constexpr size_t kWords = 256;
  SlotSignals(SlotSignalWord *words, bool shared) : words_(words), shared_(shared) {}

  uint32_t seen(uint64_t tenant_hash) const { return word(tenant_hash).seq.load(std::memory_order_seq_cst); }

  // A slot of the tenant was freed: every sleeper on its word wakes (and the head of each process's line
  // tries again).
  void bump(uint64_t tenant_hash) const {
    SlotSignalWord &w = word(tenant_hash);
    w.seq.fetch_add(1, std::memory_order_seq_cst);
#ifdef __linux__
    if (w.sleepers.load(std::memory_order_seq_cst) > 0) futex(w, FUTEX_WAKE, INT_MAX, nullptr);
#endif
  }

  // Sleeps while the tenant's word is still `seen`, for at most timeout_us: true when it moved.
  bool wait(uint64_t tenant_hash, uint32_t seen, int64_t timeout_us) const {
    SlotSignalWord &w = word(tenant_hash);
    if (timeout_us <= 0) return w.seq.load(std::memory_order_seq_cst) != seen;
#ifndef __linux__
    for (int64_t left = timeout_us; left > 0 && w.seq.load(std::memory_order_seq_cst) == seen; left -= 1000)
      std::this_thread::sleep_for(std::chrono::microseconds(left < 1000 ? left : 1000));
    return w.seq.load(std::memory_order_seq_cst) != seen;
#else
    w.sleepers.fetch_add(1, std::memory_order_seq_cst);
    timespec ts{static_cast<time_t>(timeout_us / 1'000'000), static_cast<long>(timeout_us % 1'000'000) * 1000};
    // Returns at once when seq moved before the sleep (the sleeper count is up first, so a release after
    // this load wakes it); else on a wake-up, the time-out or a signal: seq says which.
    if (w.seq.load(std::memory_order_seq_cst) == seen) futex(w, FUTEX_WAIT, seen, &ts);
    w.sleepers.fetch_sub(1, std::memory_order_seq_cst);
    return w.seq.load(std::memory_order_seq_cst) != seen;
#endif
  }

 private:
  SlotSignalWord &word(uint64_t h) const {
    return words_[(h ^ (h >> 32)) % kWords];
  }
#ifdef __linux__
  long futex(SlotSignalWord &w, int op, uint32_t val, const timespec *ts) const {
    return syscall(SYS_futex, reinterpret_cast<uint32_t *>(&w.seq), op | (shared_ ? 0 : FUTEX_PRIVATE_FLAG), val, ts,
                   nullptr, 0);
  }
#endif
  SlotSignalWord *words_;
  bool shared_;
};

// The words of one process's store (memory://, a Redis store's subscriber).
class LocalSlotSignals {
 public:
  LocalSlotSignals() : signals_(words_, false) {}
  const SlotSignals &signals() const { return signals_; }

 private:
  SlotSignalWord words_[SlotSignals::kWords];
  SlotSignals signals_;
};

}  // namespace floodwall
