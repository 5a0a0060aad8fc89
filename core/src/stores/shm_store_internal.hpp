// shm://NAME's shared segment as every process maps it: the layout (its header, the shards of tenants and
// slots, the fleet's slots, the control records, the processes), the robust lock a process killed while
// holding it cannot wedge, and the open-addressing slot tables. Internal to stores/: shm_store.cpp (the
// segment's life, admits and releases, repair) and shm_store_control.cpp (control records, inspect, reset).
#pragma once

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "stores/shm_store.hpp"
#include "util/key_hash.hpp"

namespace floodwall {

namespace shm {

constexpr char kMagic[8] = {'f', 'l', 'o', 'o', 'd', 'w', 'l', '\0'};
constexpr size_t kFleetSlots = 65536;
constexpr size_t kProcs = 1024;
constexpr int64_t kSweepEveryUs = 1000;  // a tenant at its limit sweeps its shard at most this often

// A tenant, or one of its limits and quotas (`rule` non-zero: its own entry in the tenant's shard, keyed by
// the tenant and the rule, so that it is found and written under the one lock the tenant's are).
struct Entry {
  uint64_t hash;       // 0: a free entry (a key that hashes to 0 is stored as 1)
  int64_t full_at_ns;  // the bucket (token_bucket.hpp), when has_bucket; a quota's window start (s)
  int64_t used_us;     // the last admit that spent or took a slot: the stalest is evicted first
  uint64_t rule;       // 0: the tenant's entry; else Rule::id
  int64_t quota_used;  // a quota: the units counted in its window
  int32_t in_flight;   // slots this tenant holds in its shard's slot table
  uint8_t has_bucket;
  uint8_t len;
  char key[TenantKey::kSize];
};

// A tenant's control record (TenantControl): a table of its own, never evicted (a full tenant table evicts
// tenants, never a block). Written whole under the control lock; `hash` last, so that a record half
// written by a process that died is a free one.
constexpr size_t kCtlSlots = 4096;
struct CtlEntry {
  uint64_t hash;  // 0: free
  int64_t rate_m, burst_m, blocked_until_s;
  uint8_t blocked, len, tier_len;
  char key[TenantKey::kSize];
  char tier[32];
};

struct Slot {
  uint64_t id_hi, id_lo;  // both 0: a free slot
  uint64_t tenant;        // the tenant's hash (0 in the fleet table)
  int64_t start_us;
  int32_t pid;
  int32_t unused;
};

// Per shard, and once for the fleet: its lock and counts; the tables are arrays of their own.
struct alignas(64) Shard {
  pthread_mutex_t mu;
  uint64_t count;  // tenants held
  uint64_t hand;   // where eviction looks next
  uint64_t slots;  // slots held
  int64_t last_sweep_us;
};

struct Proc {
  std::atomic<int32_t> pid;
  std::atomic<int64_t> busy_milli;  // time-weighted busy workers x 1000
  std::atomic<int64_t> workers;
};

// The segment's sizes and offsets: every process computes the same from the same max_tenants.
struct Geometry {
  uint64_t size, max_tenants, shards, per_shard, table_per_shard, slots_per_shard;
  uint64_t shards_off, entries_off, slots_off, fleet_off, fleet_slots_off, procs_off, ctl_off, ctl_entries_off;
  uint64_t signals_off;  // the slot signals (util/slot_signals.hpp): acquires waiting for a tenant's slot
};

struct Layout {
  char magic[8];
  uint32_t layout;
  std::atomic<uint32_t> ready;  // 1 once the creator has initialised everything
  Geometry g;
  uint64_t seed;
  std::atomic<uint64_t> evictions, repairs;
};

static_assert(std::atomic<int64_t>::is_always_lock_free && std::atomic<int32_t>::is_always_lock_free,
              "the shared tables need lock-free atomics");

inline size_t up64(size_t n) {
  return (n + 63) / 64 * 64;
}

inline Geometry geometry(int64_t max_tenants) {
  Geometry g{};
  g.max_tenants = static_cast<uint64_t>(max_tenants);
  g.shards = max_tenants >= 4096 ? 64 : 1;  // small bounds get one shard, so that the bound is exact
  g.per_shard = (g.max_tenants + g.shards - 1) / g.shards;
  g.table_per_shard = pow2_at_least(g.per_shard * 2);
  g.slots_per_shard = pow2_at_least(std::max<uint64_t>(g.per_shard * 2, 256));
  size_t off = up64(sizeof(Layout));
  g.shards_off = off;
  off = up64(off + g.shards * sizeof(Shard));
  g.entries_off = off;
  off = up64(off + g.shards * g.table_per_shard * sizeof(Entry));
  g.slots_off = off;
  off = up64(off + g.shards * g.slots_per_shard * sizeof(Slot));
  g.fleet_off = off;
  off = up64(off + sizeof(Shard));
  g.fleet_slots_off = off;
  off = up64(off + kFleetSlots * sizeof(Slot));
  g.procs_off = off;
  off = up64(off + kProcs * sizeof(Proc));
  g.ctl_off = off;
  off = up64(off + sizeof(Shard));
  g.ctl_entries_off = off;
  off = up64(off + kCtlSlots * sizeof(CtlEntry));
  g.signals_off = off;
  g.size = up64(off + SlotSignals::kWords * sizeof(SlotSignalWord));
  return g;
}

// A process-shared robust mutex: a holder that died is taken over and the tables carry on. Each write to
// them leaves them usable if it stops half way, but not always in agreement with the counts kept beside
// them (a slot erased, its tenant's count not yet lowered): a table's lock takes `repair`, which rebuilds
// them from the table when the previous holder died inside.
class Lock {
 public:
  Lock(pthread_mutex_t &m, std::atomic<uint64_t> &repairs) : Lock(m, repairs, [] {}) {}
  template <class Repair>
  Lock(pthread_mutex_t &m, std::atomic<uint64_t> &repairs, Repair &&repair) : m_(m) {
    int rc = pthread_mutex_lock(&m_);
    if (rc == EOWNERDEAD) {
      repair();
      pthread_mutex_consistent(&m_);
      repairs.fetch_add(1, std::memory_order_relaxed);
    } else if (rc != 0) {
      throw std::runtime_error(std::string("shm store: lock failed: ") + std::strerror(rc));
    }
  }
  ~Lock() { pthread_mutex_unlock(&m_); }
  Lock(const Lock &) = delete;
  Lock &operator=(const Lock &) = delete;

 private:
  pthread_mutex_t &m_;
};

inline void init_robust(pthread_mutex_t &m) {
  pthread_mutexattr_t a;
  pthread_mutexattr_init(&a);
  pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
  pthread_mutex_init(&m, &a);
  pthread_mutexattr_destroy(&a);
}

// kill(pid, 0) says ESRCH only for a pid that no process has.
inline bool dead(int pid) {
  return pid > 0 && kill(pid, 0) != 0 && errno == ESRCH;
}

inline bool is_free(const Slot &s) {
  return s.id_hi == 0 && s.id_lo == 0;
}

inline size_t slot_home(uint64_t hi, uint64_t lo, size_t mask) {
  return static_cast<size_t>((hi ^ (lo * 0x9e3779b97f4a7c15ULL)) >> 7) & mask;
}

inline Slot *find_slot(Slot *t, size_t n, const SlotId &id) {
  size_t mask = n - 1;
  for (size_t i = slot_home(id.hi, id.lo, mask), step = 0; step < n; i = (i + 1) & mask, step++) {
    if (is_free(t[i])) return nullptr;
    if (t[i].id_hi == id.hi && t[i].id_lo == id.lo) return &t[i];
  }
  return nullptr;
}

// Removes slot i and closes the gap (backward shift, as the memory store's tables: no tombstones).
inline void erase_slot(Slot *t, size_t n, size_t i) {
  size_t mask = n - 1, hole = i;
  for (size_t j = (hole + 1) & mask; !is_free(t[j]); j = (j + 1) & mask) {
    size_t home = slot_home(t[j].id_hi, t[j].id_lo, mask);
    if (((j - home) & mask) >= ((j - hole) & mask)) {
      t[hole] = t[j];
      hole = j;
    }
  }
  t[hole] = Slot{};
}

// False when the table is three quarters full (the caller sweeps, then counts the slot as refused).
inline bool insert_slot(Slot *t, size_t n, uint64_t &held, const Slot &s) {
  if ((held + 1) * 4 > n * 3) return false;
  size_t mask = n - 1, i = slot_home(s.id_hi, s.id_lo, mask);
  while (!is_free(t[i])) i = (i + 1) & mask;
  t[i] = s;
  held++;
  return true;
}

}  // namespace shm

}  // namespace floodwall
