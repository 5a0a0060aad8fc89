// shm://NAME - the store of one machine's processes: a preforking server's workers (gunicorn, uvicorn
// --workers, Puma cluster mode, Node's cluster module) that use the same NAME share token buckets,
// concurrency slots, the fleet count and the box's utilization through POSIX shared memory
// (/dev/shm/floodwall.NAME, mode 0600), with the memory store's arithmetic (token_bucket.hpp).
//
// The segment has a fixed size, set by max_tenants when it is made (every process that opens it must
// use the same max_tenants): 64 shards, each a table of tenants and a table of their in-flight slots
// under one process-shared robust mutex, a fleet table under another, and a table of processes. A full
// tenant table evicts its stalest tenant (counted), never refuses to decide.
//
// Robust to SIGKILL at any instant: nothing blocks while holding a lock (no I/O, no allocation); a lock
// whose holder died is taken over (EOWNERDEAD) and made consistent, every write leaves the tables
// usable if it stops half way, and the slots of a dead process are given back when a tenant at its
// limit sweeps its shard (by ttl, or at once when their pid is seen dead).
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "stores/store.hpp"
#include "util/clock.hpp"

namespace floodwall {

namespace shm {
struct Layout;
struct Shard;
struct Entry;
struct Slot;
struct CtlEntry;
}  // namespace shm

class ShmStore final : public Store {
 public:
  // Throws PolicyError naming "store" for a bad NAME, StoreError naming the segment when it cannot be
  // opened or was made by another layout version or another max_tenants.
  ShmStore(const Clock &clock, const std::string &name, int64_t max_tenants);
  ~ShmStore() override;

  AdmitResult admit(const AdmitOp &op) override;
  void admit_async(const AdmitOp &op, AdmitCompletion *done) override;
  void release(const ReleaseOp &op) override;
  bool takes_time() const override { return true; }
  const SlotSignals *slot_signals() const override { return &signals_; }  // in the segment: every process's
  StoreStats stats() const override;
  void control(const TenantKey &tenant, const ControlChange &change) override;
  TenantState inspect(const AdmitOp &op) override;
  void reset(const AdmitOp &op) override;
  std::vector<std::pair<std::string, TenantControl>> controlled(size_t limit) override;
  StoreStatus status(int64_t fleet_ttl_us) override;
  // The fleet view: a file per client beside the segment (shm_summaries.cpp).
  void put_summary(const std::string &id, const std::string &text, int64_t ttl_ms) override;
  std::vector<std::string> summaries() override;

  // Publishes this process's time-weighted busy workers and its workers, and returns the machine's
  // utilization: the sum of busy over the sum of workers of its live processes (dead ones reaped).
  std::optional<double> box_utilization(double busy, int64_t workers, int64_t now_us) override;

  static constexpr uint32_t kLayout = 3;  // 2: a tenant's limits and quotas, and the control records; 3: slot signals
  static std::string segment_name(const std::string &name) { return "/floodwall." + name; }

 private:
  AdmitResult admit_tables(const AdmitOp &op);
  shm::CtlEntry *ctl_find(uint64_t h, std::string_view key) const;
  bool control_of(const TenantKey &tenant, TenantControl &out) const;
  uint64_t hash(std::string_view key) const;  // seeded per segment, the same in every process
  shm::Shard &shard_of(uint64_t h) const;
  shm::Entry *entries_of(const shm::Shard &s) const;
  shm::Slot *slots_of(const shm::Shard &s) const;
  shm::Entry *find(shm::Shard &s, uint64_t h, std::string_view key, uint64_t rule = 0) const;
  static uint64_t rule_hash(uint64_t tenant_hash, uint64_t rule);
  shm::Entry *find_hash(shm::Shard &s, uint64_t h) const;
  shm::Entry &insert(shm::Shard &s, uint64_t h, const TenantKey &key, uint64_t rule = 0);
  void erase_entry(shm::Shard &s, size_t i);
  void evict_one(shm::Shard &s);
  // Gives back the slots of a table that are older than ttl_us or whose process is dead; returns how
  // many, and calls on_free(tenant hash) for each.
  // A table's lock taken over from a holder that died inside it: its counts rebuilt from it.
  void repair(shm::Shard &s, shm::Slot *slots, size_t n, bool tenants);
  void repair_shard(shm::Shard &s);
  void repair_fleet();
  template <class F>
  size_t sweep(shm::Shard &s, shm::Slot *slots, size_t n, int64_t now, int64_t ttl_us, F &&on_free);

  const Clock &clock_;
  const std::string segment_;
  void *base_ = nullptr;
  size_t size_ = 0;
  shm::Layout *layout_ = nullptr;
  int pid_ = 0;
  SlotSignals signals_{nullptr, true};
  int proc_index_ = -1;  // this process's row in the process table, once it published utilization
};

}  // namespace floodwall
