// The fleet view without Prometheus (`floodwall top`, docs/operations.md): every client writes a small
// summary of its counters to the store every summary.period_s (5 s by default) from a thread of its own,
// never from a request's path, with a TTL of three periods, so that a process that dies disappears. A
// write that fails is counted (floodwall_summary_writes_total{result="failed"}) and tried again at the next
// period; deciding never waits on it. The store keeps the summaries (Store::put_summary): Redis (single
// node, Sentinel, Cluster) as keys under one hash tag (stores/redis/redis_summaries.cpp), shm:// as files beside
// the segment (stores/shm_summaries.cpp), memory:// in process.
//
// A summary is a JSON object: the client's id, host, pid, language, version, when it started and wrote,
// its cumulative decisions by limiter and outcome and by source, its decisions and refusals per second
// over its last period (from the counters of its previous write: one read of the store gives rates), the
// tenants it refused most, its breaker and the share the fallback decided.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "engine/guard.hpp"
#include "stores/store.hpp"

namespace floodwall {

// What a client says of itself: the binding sets its language (fw_client_set_language); the C ABI's is "c".
struct ClientLabel {
  std::mutex mu;
  std::string language = "c";
  std::string version;
};

class SummaryWriter {
 public:
  // Writes every policy.summary_period_s from a thread of its own (none when it is 0). `guard` outlives it.
  SummaryWriter(Guard &guard, std::shared_ptr<ClientLabel> label);
  // Stops the thread and takes the summary away from the store (within the store's deadline; a store that
  // cannot be reached lets it expire).
  ~SummaryWriter();
  SummaryWriter(const SummaryWriter &) = delete;
  SummaryWriter &operator=(const SummaryWriter &) = delete;

  const std::string &id() const { return id_; }
  // The summary as the next write would write it, and one write now (what the thread does each period;
  // counted, never throwing).
  std::string summary();
  bool write();

 private:
  void run();

  Guard &guard_;
  std::shared_ptr<ClientLabel> label_;
  const std::string id_;
  const int64_t started_ms_;
  const int64_t period_ms_;
  std::mutex mu_;  // the previous write's counters; stop_
  std::condition_variable wake_;
  bool stop_ = false;
  bool last_ok_ = false;  // the last write went through (none yet: nothing to take away)
  int64_t last_ms_ = 0;
  uint64_t last_decisions_ = 0;
  std::string last_refused_;  // the previous write's refusals by limiter (JSON)
  std::thread thread_;
};

// Every live client's summary, as a JSON array sorted by id (what `floodwall top` and `status` read); a
// summary that is not a JSON object is left out. Throws StoreError.
std::string fleet_clients_json(Store &store);

}  // namespace floodwall
