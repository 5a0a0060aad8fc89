#include "util/fork.hpp"

#include <pthread.h>
#include <unistd.h>

namespace floodwall {

namespace detail {
std::atomic<uint64_t> fork_generation{0};
}

namespace {
// Registered when the library is loaded. The child handler does nothing but count: whatever else a
// child needs it does lazily, on its first call, outside the fork.
const int registered =
    pthread_atfork(nullptr, nullptr, [] { detail::fork_generation.fetch_add(1, std::memory_order_relaxed); });
}  // namespace

void InheritedFds::close_all() {
  (void)registered;
  for (auto &f : fds_) {
    int fd = f.exchange(-1, std::memory_order_acq_rel);
    if (fd >= 0) ::close(fd);
  }
}

}  // namespace floodwall
