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

ProcessGuard::ProcessGuard(Policy policy) : gen_(fork_generation()) {
  auto store = make_store(policy, clock_);
  guard_.store(new Guard(std::move(policy), std::move(store), clock_, rng_), std::memory_order_release);
}

ProcessGuard::~ProcessGuard() {
  // In a child whose guard was never remade the guard is the parent's: abandon it, never join threads
  // that exist only in the parent.
  Guard *g = guard_.load();
  if (gen_.load() == fork_generation())
    delete g;
  else if (g)
    g->abandon_after_fork();
}

void ProcessGuard::close() {
  Guard *g = guard_.exchange(nullptr);
  if (!g) return;
  if (gen_.load() == fork_generation())
    delete g;
  else
    g->abandon_after_fork();  // the parent's, in a child that never used it: never join its threads
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
    guard_.store(fresh.release(), std::memory_order_release);
    gen_.store(want, std::memory_order_release);
  } catch (...) {
    building_.store(UINT64_MAX, std::memory_order_release);
    throw;
  }
}

}  // namespace floodwall
