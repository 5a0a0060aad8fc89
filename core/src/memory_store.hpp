// memory:// - the embedded default. The same state and semantics as the Redis scripts, in process:
// sharded maps under one mutex per shard, a bounded number of tenants (least recently used evicted,
// counted), and TTL-style collection of idle tenants whose bucket is full again.
#pragma once

#include <atomic>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "clock.hpp"
#include "store.hpp"
#include "token_bucket.hpp"

namespace floodwall {

class MemoryStore final : public Store {
 public:
  MemoryStore(const Clock &clock, int64_t max_tenants);

  AdmitResult admit(const AdmitOp &op) override;
  void admit_async(const AdmitOp &op, AdmitCompletion *done) override;
  void release(const ReleaseOp &op) override;
  StoreStats stats() const override;
  const char *kind() const override { return "memory"; }

 private:
  struct Slot {
    SlotId id;
    int64_t start_us;
  };
  struct Entry {
    bool has_bucket = false;
    BucketState bucket;
    std::vector<Slot> slots;
    std::list<std::string>::iterator lru;
  };
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  struct Shard {
    std::mutex mu;
    std::unordered_map<std::string, Entry, Hash, std::equal_to<>> map;
    std::list<std::string> lru;  // front: most recently used
  };

  static int64_t live(std::vector<Slot> &slots, int64_t now_us, int64_t ttl_us);
  Entry &insert(Shard &s, std::string_view key);
  Shard &shard_for(std::string_view key);

  const Clock &clock_;
  size_t per_shard_;
  std::vector<std::unique_ptr<Shard>> shards_;
  std::mutex fleet_mu_;
  std::vector<Slot> fleet_;
  std::atomic<uint64_t> evictions_{0};
};

}  // namespace floodwall
