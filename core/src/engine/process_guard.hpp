// A client: the Guard of one policy, made anew in a forked child. Preforking servers (gunicorn
// --preload, Puma's preload_app!, uWSGI, Unicorn) create the client in the master and fork workers
// from it; a worker inherits the master's memory but none of its threads, so the Redis store's I/O
// thread, any lock another thread held at the fork and every ticket the master holds are not the
// child's. On its first call in a child a ProcessGuard builds a new Guard and store from the same policy
// (keeping the local modes) and abandons the old one untouched, its inherited descriptors closed: one
// mechanism, in the core, for every binding.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/fleet_summary.hpp"
#include "engine/guard.hpp"
#include "policy/policy.hpp"
#include "util/clock.hpp"
#include "util/fork.hpp"

namespace floodwall {

class ProcessGuard {
 public:
  // Throws PolicyError or StoreError. `version`: floodwall's, for the fleet view's summary.
  explicit ProcessGuard(Policy policy, std::string version = "");
  ~ProcessGuard();
  ProcessGuard(const ProcessGuard &) = delete;
  ProcessGuard &operator=(const ProcessGuard &) = delete;

  // Closes the Guard of this process (its store decides the admits pending on it first); guard() must
  // not be called after this (fw_client_close sees to that). The destructor then frees only this.
  void close();

  // The Guard of this process: one atomic load and a compare on every call.
  Guard &guard() {
    if (gen_.load(std::memory_order_acquire) != fork_generation()) rebirth();
    return *guard_.load(std::memory_order_acquire);
  }

  // The fleet view (fleet_summary.hpp): the language this client's summary names (the binding's), and the
  // writer of this process's summary (null once closed).
  void set_language(std::string language);
  SummaryWriter *summary_writer() {
    guard();
    return writer_.load(std::memory_order_acquire);
  }

 private:
  void rebirth();

  SteadyClock clock_;
  SystemRng rng_;
  std::atomic<Guard *> guard_{nullptr};
  // Made with guard_ and in its generation; the parent's is left as it is in a child (its thread is not there).
  std::atomic<SummaryWriter *> writer_{nullptr};
  std::shared_ptr<ClientLabel> label_ = std::make_shared<ClientLabel>();
  std::atomic<uint64_t> gen_;                   // the generation guard_ was made in
  std::atomic<uint64_t> building_{UINT64_MAX};  // the generation being made now
};

}  // namespace floodwall
