// memory:// - the embedded default. The same state and semantics as the Redis scripts, in process:
// 64 shards (one for small bounds, so that the bound is exact), each an open-addressing table under
// its own mutex, and a bounded number of tenants: beyond max_tenants a tenant is evicted, counted, and
// starts again with a full bucket.
//
// The tables hold the tenant key inline (at most 65 bytes) and probe linearly, so that a decision
// touches one or two cache lines and hashes the tenant once, for both the shard and the slot. Eviction
// is CLOCK (a second-chance approximation of least recently used): a hand sweeps the table, clearing
// each entry's recently-used bit, and takes the first entry that is neither recently used nor holding
// a slot; evicting a tenant with requests in flight would hand it fresh capacity.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "stores/local_summaries.hpp"
#include "stores/rule_state.hpp"
#include "stores/store.hpp"
#include "util/clock.hpp"
#include "util/spin_lock.hpp"
#include "util/token_bucket.hpp"

namespace floodwall {

class MemoryStore final : public Store {
 public:
  MemoryStore(const Clock &clock, int64_t max_tenants);

  AdmitResult admit(const AdmitOp &op) override;
  void admit_async(const AdmitOp &op, AdmitCompletion *done) override;
  void release(const ReleaseOp &op) override;
  const SlotSignals *slot_signals() const override { return &signals_.signals(); }
  bool takes_time() const override { return true; }
  StoreStats stats() const override;
  void control(const TenantKey &tenant, const ControlChange &change) override;
  TenantState inspect(const AdmitOp &op) override;
  void reset(const AdmitOp &op) override;
  std::vector<std::pair<std::string, TenantControl>> controlled(size_t limit) override;
  StoreStatus status(int64_t fleet_ttl_us) override;
  void put_summary(const std::string &id, const std::string &text, int64_t ttl_ms) override {
    summaries_.put(id, text, ttl_ms);
  }
  std::vector<std::string> summaries() override { return summaries_.live(); }

 private:
  LocalSummaries summaries_;  // the fleet view: this process's own client only
  AdmitResult admit_tables(const AdmitOp &op);
  struct Slot {
    SlotId id;
    int64_t start_us;
  };
  // What a decision reads comes first, together: the hash, the bucket, the flags and the key, its length
  // ahead of its bytes (a TenantKey keeps its length behind them), so that a probe and a decision on an id
  // of up to 45 bytes touch one or two cache lines, not two or three.
  struct Entry {
    uint64_t hash = 0;
    BucketState bucket;
    bool used_recently = false, has_bucket = false;
    uint8_t key_len = 0;               // 0 marks a free entry (tenant ids are never empty)
    char key_bytes[TenantKey::kSize];  // the canonical key (TenantKey::view()); only key_len bytes are read
    std::vector<Slot> slots;
    std::vector<std::pair<uint64_t, RuleState>> rules;  // by Rule::id: the tenant's limits and quotas used
    bool free() const { return key_len == 0; }
    std::string_view key() const { return {key_bytes, key_len}; }
  };
  struct alignas(64) Shard {  // one cache line of its own: a shard's lock is written on every decision
    SpinLock mu;
    std::vector<Entry> table;  // a power of two, at most half full
    size_t count = 0, hand = 0;
    // The refill that a request's cost takes (bucket_cost_ns, a floating-point division), for the rate and
    // cost it was last computed for: a policy has few buckets and most requests cost 1, so it is reused.
    int64_t cost_rate_m = 0, cost_m = 0, cost_ns = 0;
    int64_t cost_of(int64_t rate_m, int64_t c_m) {
      if (rate_m != cost_rate_m || c_m != cost_m) {
        cost_ns = bucket_cost_ns(rate_m, c_m);
        cost_rate_m = rate_m;
        cost_m = c_m;
      }
      return cost_ns;
    }
  };

  static int64_t live(std::vector<Slot> &slots, int64_t now_us, int64_t ttl_us);
  uint64_t hash(std::string_view key) const;
  Shard &shard_for(uint64_t h) { return *shards_[(h >> 48) & shard_mask_]; }
  static Entry *find(Shard &s, uint64_t h, std::string_view key);
  Entry &insert(Shard &s, uint64_t h, const TenantKey &key);
  static void place(std::vector<Entry> &table, Entry &&e);
  void evict_one(Shard &s);
  static void erase_at(Shard &s, size_t i);

  const Clock &clock_;
  const uint64_t seed_;
  size_t per_shard_, max_table_, shard_mask_;
  std::vector<std::unique_ptr<Shard>> shards_;
  std::mutex fleet_mu_;
  LocalSlotSignals signals_;  // moved by each release of a tenant's slot (acquires waiting for one)
  std::vector<Slot> fleet_;
  std::atomic<uint64_t> evictions_{0};
  // Control records, apart from the tenant table: a full table evicts tenants, never a block.
  mutable std::mutex ctl_mu_;
  std::map<std::string, TenantControl, std::less<>> ctl_;
  std::atomic<size_t> ctl_count_{0};
};

}  // namespace floodwall
