#include "engine/process_guard.hpp"

#include <unistd.h>

#include <cstdio>
#include <thread>

#include "stores/store_factory.hpp"

namespace floodwall {

namespace {

// Once per process: memory:// in a forked worker limits that worker alone.
void warn_memory_store_per_process() {
  static std::atomic<pid_t> warned{0};
  pid_t self = getpid();
  if (warned.exchange(self) == self) return;
  std::fprintf(stderr,
               "floodwall: memory:// keeps its limits per process, and this is a forked worker (pid %d): each "
               "worker limits on its own, so N workers allow N times the limit. Use shm://NAME to share the "
               "limits between the processes of this machine, or redis://host:port/db for a fleet.\n",
               static_cast<int>(self));
}

}  // namespace

ProcessGuard::ProcessGuard(Policy policy, std::string version) : gen_(fork_generation()) {
  label_->version = std::move(version);
  auto store = make_store(policy, clock_);
  auto g = std::make_unique<Guard>(std::move(policy), std::move(store), clock_, rng_);
  writer_.store(new SummaryWriter(*g, label_), std::memory_order_release);
  guard_.store(g.release(), std::memory_order_release);
}

ProcessGuard::~ProcessGuard() {
  close();
}

void ProcessGuard::close() {
  Guard *g = guard_.exchange(nullptr);
  SummaryWriter *w = writer_.exchange(nullptr);
  if (!g) return;
  if (gen_.load() == fork_generation()) {
    delete w;  // its summary taken away, before the store goes
    delete g;
  } else {
    // The parent's, in a child that never used it: never join its threads (the writer is left too).
    g->abandon_after_fork();
  }
}

void ProcessGuard::set_language(std::string language) {
  std::lock_guard lock(label_->mu);
  label_->language = std::move(language);
}

void ProcessGuard::rebirth() {
  uint64_t want = fork_generation();
  uint64_t building = building_.load(std::memory_order_acquire);
  if (building == want || !building_.compare_exchange_strong(building, want)) {
    // Another thread of this child is making it: wait for it.
    while (gen_.load(std::memory_order_acquire) != want) std::this_thread::yield();
    return;
  }
  Guard *old = guard_.load(std::memory_order_acquire);
  try {
    auto fresh = std::make_unique<Guard>(old->policy(), make_store(old->policy(), clock_), clock_, rng_);
    for (Limiter l : kLimiters) fresh->set_mode(l, old->local_mode(l));
    if (old->policy().store.rfind("memory", 0) == 0) warn_memory_store_per_process();
    // The old guard is left as it is (a parent thread may have held one of its locks at the fork), and
    // leaked: only its inherited descriptors are closed.
    old->abandon_after_fork();
    // The parent's writer is left (its thread is not in this child); this child writes a summary of its own.
    writer_.store(new SummaryWriter(*fresh, label_), std::memory_order_release);
    guard_.store(fresh.release(), std::memory_order_release);
    gen_.store(want, std::memory_order_release);
  } catch (...) {
    building_.store(UINT64_MAX, std::memory_order_release);
    throw;
  }
}

}  // namespace floodwall
