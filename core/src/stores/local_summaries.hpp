// The fleet view's summaries (Store::put_summary, engine/fleet_summary.hpp) kept in process: what memory://
// holds, which no other process can read (it shows this process's own client, nothing more).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace floodwall {

class LocalSummaries {
 public:
  void put(const std::string &id, const std::string &text, int64_t ttl_ms) {
    std::lock_guard lock(mu_);
    if (text.empty()) {
      stored_.erase(id);
      return;
    }
    stored_[id] = {text, now() + std::chrono::milliseconds(ttl_ms)};
  }
  std::vector<std::string> live() {
    std::lock_guard lock(mu_);
    std::vector<std::string> out;
    auto t = now();
    for (auto it = stored_.begin(); it != stored_.end();) {
      if (it->second.expires <= t) {
        it = stored_.erase(it);
        continue;
      }
      out.push_back(it->second.text);
      ++it;
    }
    return out;
  }

 private:
  static std::chrono::steady_clock::time_point now() { return std::chrono::steady_clock::now(); }
  struct Stored {
    std::string text;
    std::chrono::steady_clock::time_point expires;
  };
  std::mutex mu_;
  std::map<std::string, Stored> stored_;
};

}  // namespace floodwall
