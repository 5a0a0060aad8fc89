// Fork generations: every process forked from this one (gunicorn, uWSGI, Puma cluster mode, Unicorn,
// Passenger: preforking servers all fork) counts one more than its parent. A client compares the
// generation it was made in with the current one: in a forked child it makes itself anew (ProcessGuard in
// process_guard.hpp), leaving the parent's state untouched, so that no lock a parent thread held at the fork,
// no I/O thread that exists only in the parent and no ticket of the parent's is ever used by a child.
#pragma once

#include <atomic>
#include <cstdint>

namespace floodwall {

namespace detail {
extern std::atomic<uint64_t> fork_generation;
}

// The process's generation: 0 in a process that was not forked from one that loaded floodwall.
inline uint64_t fork_generation() {
  return detail::fork_generation.load(std::memory_order_relaxed);
}

// Descriptors a store opened, closed in a forked child that abandons the store: a child must not
// keep the parent's sockets open (Redis would see them as live clients), but may not touch the state
// that owned them. A slot holds -1 or an open descriptor: it is set after the descriptor is opened and
// cleared before it is closed, so that the child closes only descriptors that were open at the fork.
class InheritedFds {
 public:
  static constexpr int kMax = 32;
  InheritedFds() {
    for (auto &f : fds_) f.store(-1, std::memory_order_relaxed);
  }
  void set(int slot, int fd) { fds_[static_cast<size_t>(slot)].store(fd, std::memory_order_release); }
  void clear(int slot) { fds_[static_cast<size_t>(slot)].store(-1, std::memory_order_release); }
  void close_all();  // in the child

 private:
  std::atomic<int> fds_[kMax];
};

}  // namespace floodwall
