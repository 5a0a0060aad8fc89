// The line of this process's acquires waiting for a concurrency slot of one tenant (Guard::acquire,
// docs/concepts/acquire.md): first come, first served within the process. Only the head of a tenant's line
// tries the store (and sleeps on the store's slot signal between tries); the others wait here to be the head.
// An acquire of a tenant that has a line joins its tail, so that a newcomer does not take the slot the head
// was woken for.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <unordered_map>

namespace floodwall {

class SlotLine {
 public:
  using Deadline = std::chrono::steady_clock::time_point;

  // Whether the tenant has a line now (an acquire then joins it before trying the store).
  bool has_line(const std::string &tenant) {
    std::lock_guard lock(mu_);
    return lines_.count(tenant) > 0;
  }

  // A place in the tenant's line, from its construction (at the tail) to its destruction (out of the line,
  // and the next one is the head).
  class Place {
   public:
    Place(SlotLine &line, std::string tenant) : line_(line), tenant_(std::move(tenant)) {
      std::lock_guard lock(line_.mu_);
      id_ = ++line_.next_id_;
      line_.lines_[tenant_].push_back(id_);
    }
    ~Place() {
      {
        std::lock_guard lock(line_.mu_);
        auto it = line_.lines_.find(tenant_);
        if (it != line_.lines_.end()) {
          std::erase(it->second, id_);
          if (it->second.empty()) line_.lines_.erase(it);
        }
      }
      line_.cv_.notify_all();
    }
    // Waits until this place is the head of its line: false when the deadline came first.
    bool wait_head(Deadline deadline) {
      std::unique_lock lock(line_.mu_);
      return line_.cv_.wait_until(lock, deadline, [&] {
        auto it = line_.lines_.find(tenant_);
        return it != line_.lines_.end() && !it->second.empty() && it->second.front() == id_;
      });
    }
    Place(const Place &) = delete;
    Place &operator=(const Place &) = delete;

   private:
    SlotLine &line_;
    std::string tenant_;
    uint64_t id_ = 0;
  };

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::unordered_map<std::string, std::deque<uint64_t>> lines_;
  uint64_t next_id_ = 0;
};

}  // namespace floodwall
