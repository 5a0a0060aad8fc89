#include "util/platform.hpp"
// shm:// is built on Linux alone (util/platform.hpp); elsewhere the store factory refuses it.
#if FW_HAVE_SHM_STORE

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>

#include "stores/rule_state.hpp"
#include "stores/shm_store.hpp"
#include "stores/shm_store_internal.hpp"
#include "util/errors.hpp"
#include "util/key_hash.hpp"
#include "util/token_bucket.hpp"

namespace floodwall {

using namespace shm;

ShmStore::ShmStore(const Clock &clock, const std::string &name, int64_t max_tenants)
    : clock_(clock), segment_(segment_name(name)), pid_(getpid()) {
  if (name.empty() || name.size() > 200 || name.find('/') != std::string::npos ||
      std::any_of(name.begin(), name.end(), [](char c) { return c <= ' ' || c == 0x7f; }))
    throw PolicyError("store", "shm://NAME: NAME must be 1 to 200 printable characters without '/' (got \"" +
                                   name.substr(0, 40) + (name.size() > 40 ? "...\")" : "\")"));
  const Geometry want = geometry(max_tenants);
  size_ = want.size;
  int fd = shm_open(segment_.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  bool creator = fd >= 0;
  if (!creator) {
    if (errno != EEXIST)
      throw StoreError("store: cannot create the shared memory segment " + segment_ + ": " + std::strerror(errno));
    fd = shm_open(segment_.c_str(), O_RDWR, 0);
    if (fd < 0)
      throw StoreError("store: cannot open the shared memory segment " + segment_ + ": " + std::strerror(errno));
  } else if (ftruncate(fd, static_cast<off_t>(size_)) != 0) {
    int e = errno;
    close(fd);
    shm_unlink(segment_.c_str());
    throw StoreError("store: cannot size the shared memory segment " + segment_ + ": " + std::strerror(e));
  }
  // Another process may have created it an instant ago and not sized it yet.
  struct stat st {};
  auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (fstat(fd, &st) == 0 && st.st_size == 0 && std::chrono::steady_clock::now() < give_up)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  size_t have = static_cast<size_t>(st.st_size);
  base_ = mmap(nullptr, std::max(have, sizeof(Layout)), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base_ == MAP_FAILED) throw StoreError("store: cannot map the shared memory segment " + segment_);
  layout_ = static_cast<Layout *>(base_);
  signals_ = SlotSignals(reinterpret_cast<SlotSignalWord *>(static_cast<char *>(base_) + want.signals_off), true);
  if (creator) {
    std::memcpy(layout_->magic, kMagic, sizeof kMagic);
    layout_->layout = kLayout;
    layout_->g = want;
    layout_->seed = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
    auto *shards = reinterpret_cast<Shard *>(static_cast<char *>(base_) + want.shards_off);
    for (size_t i = 0; i < want.shards; i++) init_robust(shards[i].mu);
    init_robust(reinterpret_cast<Shard *>(static_cast<char *>(base_) + want.fleet_off)->mu);
    init_robust(reinterpret_cast<Shard *>(static_cast<char *>(base_) + want.ctl_off)->mu);
    layout_->ready.store(1, std::memory_order_release);
    return;
  }
  // Opened, not made: wait for its creator, then check that it is the segment this library expects.
  auto fail = [&](const std::string &why) {
    munmap(base_, std::max(have, sizeof(Layout)));
    base_ = nullptr;
    throw StoreError("store: the shared memory segment " + segment_ + " " + why);
  };
  if (have < sizeof(Layout)) fail("is too small to be a floodwall segment (" + std::to_string(have) + " bytes)");
  if (std::memcmp(layout_->magic, kMagic, sizeof kMagic) != 0) {
    // Its creator may still be writing the header.
    while (layout_->ready.load(std::memory_order_acquire) == 0 && std::chrono::steady_clock::now() < give_up)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (std::memcmp(layout_->magic, kMagic, sizeof kMagic) != 0) fail("is not a floodwall segment");
  }
  if (layout_->layout != kLayout)
    fail("has layout version " + std::to_string(layout_->layout) + ", and this library uses version " +
         std::to_string(kLayout) + ": stop the processes of the other version, or use another NAME");
  while (layout_->ready.load(std::memory_order_acquire) == 0 && std::chrono::steady_clock::now() < give_up)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (layout_->ready.load(std::memory_order_acquire) == 0)
    fail("was never initialised (its creator died making it): remove /dev/shm" + segment_);
  if (layout_->g.max_tenants != want.max_tenants || have != want.size)
    fail("was made for max_tenants " + std::to_string(layout_->g.max_tenants) + ", and this process's policy says " +
         std::to_string(max_tenants) + ": every process on one NAME needs the same max_tenants");
}

ShmStore::~ShmStore() {
  if (!base_) return;
  if (proc_index_ >= 0) {
    auto *procs = reinterpret_cast<Proc *>(static_cast<char *>(base_) + layout_->g.procs_off);
    int32_t me = pid_;
    procs[proc_index_].pid.compare_exchange_strong(me, 0);
  }
  munmap(base_, size_);
}

Shard &ShmStore::shard_of(uint64_t h) const {
  auto *shards = reinterpret_cast<Shard *>(static_cast<char *>(base_) + layout_->g.shards_off);
  return shards[(h >> 48) & (layout_->g.shards - 1)];
}

Entry *ShmStore::entries_of(const Shard &s) const {
  auto *shards = reinterpret_cast<Shard *>(static_cast<char *>(base_) + layout_->g.shards_off);
  size_t i = static_cast<size_t>(&s - shards);
  return reinterpret_cast<Entry *>(static_cast<char *>(base_) + layout_->g.entries_off) +
         i * layout_->g.table_per_shard;
}

Slot *ShmStore::slots_of(const Shard &s) const {
  auto *shards = reinterpret_cast<Shard *>(static_cast<char *>(base_) + layout_->g.shards_off);
  size_t i = static_cast<size_t>(&s - shards);
  return reinterpret_cast<Slot *>(static_cast<char *>(base_) + layout_->g.slots_off) + i * layout_->g.slots_per_shard;
}

uint64_t ShmStore::hash(std::string_view key) const {
  uint64_t h = key_hash(key, layout_->seed);
  return h ? h : 1;
}

Entry *ShmStore::find(Shard &s, uint64_t h, std::string_view key, uint64_t rule) const {
  Entry *t = entries_of(s);
  size_t mask = layout_->g.table_per_shard - 1;
  for (size_t i = h & mask, step = 0; step <= mask; i = (i + 1) & mask, step++) {
    Entry &e = t[i];
    if (e.hash == 0) return nullptr;
    if (e.hash == h && e.rule == rule && e.len == key.size() && same_bytes(e.key, key.data(), key.size())) return &e;
  }
  return nullptr;
}

// A rule's entry: in the tenant's shard (the top 16 bits, shard_of's), elsewhere in its table.
uint64_t ShmStore::rule_hash(uint64_t tenant_hash, uint64_t rule) {
  uint64_t x = (tenant_hash ^ rule) * 0x9e3779b97f4a7c15ULL;
  x ^= x >> 31;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 29;
  uint64_t h = (tenant_hash & 0xffff000000000000ULL) | (x & 0x0000ffffffffffffULL);
  return h ? h : 1;
}

Entry *ShmStore::find_hash(Shard &s, uint64_t h) const {
  Entry *t = entries_of(s);
  size_t mask = layout_->g.table_per_shard - 1;
  for (size_t i = h & mask, step = 0; step <= mask; i = (i + 1) & mask, step++) {
    if (t[i].hash == 0) return nullptr;
    if (t[i].hash == h && t[i].rule == 0) return &t[i];
  }
  return nullptr;
}

void ShmStore::erase_entry(Shard &s, size_t i) {
  Entry *t = entries_of(s);
  size_t mask = layout_->g.table_per_shard - 1, hole = i;
  for (size_t j = (hole + 1) & mask; t[j].hash != 0; j = (j + 1) & mask) {
    size_t home = t[j].hash & mask;
    if (((j - home) & mask) >= ((j - hole) & mask)) {
      t[hole] = t[j];
      hole = j;
    }
  }
  t[hole] = Entry{};
  // Atomic stores (under the shard's lock) because stats() reads the count without it: the metrics and the
  // fleet summary's thread.
  if (s.count) __atomic_store_n(&s.count, s.count - 1, __ATOMIC_RELAXED);
}

// The stalest of the next 32 tenants under the hand that holds no slot (else the stalest of them).
void ShmStore::evict_one(Shard &s) {
  Entry *t = entries_of(s);
  size_t mask = layout_->g.table_per_shard - 1, best = SIZE_MAX, best_busy = SIZE_MAX;
  for (size_t step = 0, seen = 0; step <= mask && seen < 32; step++) {
    size_t i = s.hand & mask;
    s.hand = (s.hand + 1) & mask;
    if (t[i].hash == 0) continue;
    seen++;
    size_t &pick = t[i].in_flight > 0 ? best_busy : best;
    if (pick == SIZE_MAX || t[i].used_us < t[pick].used_us) pick = i;
  }
  size_t victim = best != SIZE_MAX ? best : best_busy;
  if (victim == SIZE_MAX) return;
  erase_entry(s, victim);
  layout_->evictions.fetch_add(1, std::memory_order_relaxed);
}

Entry &ShmStore::insert(Shard &s, uint64_t h, const TenantKey &key, uint64_t rule) {
  if (s.count >= layout_->g.per_shard) evict_one(s);
  Entry *t = entries_of(s);
  size_t mask = layout_->g.table_per_shard - 1, i = h & mask;
  while (t[i].hash != 0) i = (i + 1) & mask;
  Entry &e = t[i];
  std::string_view k = key.view();
  e.full_at_ns = 0;
  e.has_bucket = 0;
  e.in_flight = 0;
  e.rule = rule;
  e.quota_used = 0;
  e.len = static_cast<uint8_t>(k.size());
  std::memcpy(e.key, k.data(), k.size());
  e.hash = h;  // last: an entry half written by a process that died is still a free one
  __atomic_store_n(&s.count, s.count + 1, __ATOMIC_RELAXED);
  return e;
}

template <class F>
size_t ShmStore::sweep(Shard &s, Slot *slots, size_t n, int64_t now, int64_t ttl_us, F &&on_free) {
  s.last_sweep_us = now;
  int32_t alive[8] = {}, gone[8] = {};  // the pids seen in this sweep, so that each is asked once
  size_t n_alive = 0, n_gone = 0, freed = 0;
  auto is_dead = [&](int32_t pid) {
    if (pid == pid_) return false;
    for (size_t k = 0; k < n_alive; k++)
      if (alive[k] == pid) return false;
    for (size_t k = 0; k < n_gone; k++)
      if (gone[k] == pid) return true;
    bool d = dead(pid);
    if (d && n_gone < 8) gone[n_gone++] = pid;
    if (!d && n_alive < 8) alive[n_alive++] = pid;
    return d;
  };
  for (size_t i = 0; i < n;) {
    Slot &x = slots[i];
    if (!is_free(x) && (x.start_us <= now - ttl_us || is_dead(x.pid))) {
      on_free(x.tenant);
      erase_slot(slots, n, i);  // may pull a later slot into i: look at i again
      if (s.slots) s.slots--;
      freed++;
      continue;
    }
    i++;
  }
  return freed;
}

// The previous holder of the table's lock died inside it: drops the slots no release can find any more
// (half written, or left twice by a backward shift it did not finish), then counts again what the table
// holds, per table and (a shard's, whose slots name their tenant) per tenant.
void ShmStore::repair(Shard &s, Slot *slots, size_t n, bool tenants) {
  for (size_t i = 0; i < n;) {
    const Slot &x = slots[i];
    Slot *first = is_free(x) ? &slots[i] : find_slot(slots, n, SlotId{x.id_hi, x.id_lo});
    bool torn = !is_free(x) && (x.pid <= 0 || x.start_us == 0 || (tenants && x.tenant == 0));
    if (torn || first != &slots[i]) {
      // Twice: a backward shift copies a slot to an earlier place, the copy perhaps cut short; the later
      // one is whole. A slot no lookup reaches is dropped.
      if (!torn && first) *first = x;
      erase_slot(slots, n, i);  // may pull a later slot into i: look at i again
      continue;
    }
    i++;
  }
  s.slots = static_cast<uint64_t>(std::count_if(slots, slots + n, [](const Slot &x) { return !is_free(x); }));
  if (!tenants) return;
  Entry *t = entries_of(s);
  size_t m = layout_->g.table_per_shard;
  __atomic_store_n(&s.count, static_cast<uint64_t>(std::count_if(t, t + m, [](const Entry &e) { return e.hash != 0; })),
                   __ATOMIC_RELAXED);
  for (size_t i = 0; i < m; i++) t[i].in_flight = 0;
  for (size_t i = 0; i < n; i++)
    if (Entry *e = is_free(slots[i]) ? nullptr : find_hash(s, slots[i].tenant)) e->in_flight++;
}

void ShmStore::repair_shard(Shard &s) {
  repair(s, slots_of(s), layout_->g.slots_per_shard, true);
}

void ShmStore::repair_fleet() {
  repair(*reinterpret_cast<Shard *>(static_cast<char *>(base_) + layout_->g.fleet_off),
         reinterpret_cast<Slot *>(static_cast<char *>(base_) + layout_->g.fleet_slots_off), kFleetSlots, false);
}

StoreStatus ShmStore::status(int64_t fleet_ttl_us) {
  StoreStatus st;
  for (size_t l = 0; l < st.modes.size(); l++) st.modes[l] = fleet_modes_[l].load();  // this process's (README)
  {
    auto *fleet = reinterpret_cast<Shard *>(static_cast<char *>(base_) + layout_->g.fleet_off);
    auto *slots = reinterpret_cast<Slot *>(static_cast<char *>(base_) + layout_->g.fleet_slots_off);
    Lock lock(fleet->mu, layout_->repairs, [&] { repair_fleet(); });
    sweep(*fleet, slots, kFleetSlots, clock_.now_us(), fleet_ttl_us, [](uint64_t) {});
    st.fleet_in_flight = static_cast<int64_t>(fleet->slots);
  }
  st.controlled = static_cast<int64_t>(controlled(kCtlSlots).size());
  st.server = "shared memory (this machine)";
  st.topology = "one machine";
  return st;
}

AdmitResult ShmStore::admit(const AdmitOp &op) {
  TenantControl c;
  bool has = control_of(op.tenant, c);
  if (!has && op.tier.empty()) return admit_tables(op);
  return admit_controlled(has ? &c : nullptr, op, floor_div(clock_.wall_us(), 1'000'000),
                          [this](const AdmitOp &o) { return admit_tables(o); });
}

AdmitResult ShmStore::admit_tables(const AdmitOp &op) {
  AdmitResult r;
  r.decided = true;
  std::string_view key = op.tenant.view();
  uint64_t h = hash(key);
  Shard &s = shard_of(h);
  Slot *slots = slots_of(s);
  size_t n_slots = layout_->g.slots_per_shard;
  Lock lock(s.mu, layout_->repairs, [&] { repair_shard(s); });
  // The Guard's reading when it handed one down (one clock read per decision), else the store's own.
  int64_t now = op.now_us != AdmitOp::kStoreClock ? op.now_us : clock_.now_us();
  Entry *e = find(s, h, key);

  int64_t tokens = 0, debt_ns = 0;
  if (op.rate) {
    BucketState b{e && e->has_bucket ? e->full_at_ns : 0};
    debt_ns = bucket_debt_ns(e && e->has_bucket ? &b : nullptr, now);
    tokens = bucket_tokens(op.rate_m, op.burst_m, debt_ns);
    r.rate_ok = tokens >= op.cost_m;
  }
  int64_t in_flight = 0;
  if (op.conc) {
    in_flight = e ? e->in_flight : 0;
    // At the limit, or with a full slot table: give back what expired or belongs to a dead process.
    bool full = (s.slots + 1) * 4 > n_slots * 3;
    if ((in_flight >= op.conc_limit || full) && now - s.last_sweep_us >= kSweepEveryUs) {
      sweep(s, slots, n_slots, now, op.conc_ttl_us, [&](uint64_t tenant) {
        if (Entry *x = find_hash(s, tenant); x && x->in_flight > 0) x->in_flight--;
      });
      in_flight = e ? e->in_flight : 0;
      full = (s.slots + 1) * 4 > n_slots * 3;
    }
    r.conc_ok = in_flight < op.conc_limit && !full;
  }
  Shard *fleet = nullptr;
  std::optional<Lock> fleet_lock;
  Slot *fleet_slots = nullptr;
  if (op.fleet) {
    fleet = reinterpret_cast<Shard *>(static_cast<char *>(base_) + layout_->g.fleet_off);
    fleet_slots = reinterpret_cast<Slot *>(static_cast<char *>(base_) + layout_->g.fleet_slots_off);
    fleet_lock.emplace(fleet->mu, layout_->repairs, [&] { repair_fleet(); });
    bool full = (fleet->slots + 1) * 4 > kFleetSlots * 3;
    if ((static_cast<int64_t>(fleet->slots) >= op.fleet_cap || full) && now - fleet->last_sweep_us >= kSweepEveryUs) {
      sweep(*fleet, fleet_slots, kFleetSlots, now, op.fleet_ttl_us, [](uint64_t) {});
      full = (fleet->slots + 1) * 4 > kFleetSlots * 3;
    }
    r.fleet_ok = static_cast<int64_t>(fleet->slots) < op.fleet_cap && !full;
  }

  // The limits and quotas that apply: each its own entry in this shard.
  RuleCheck checks[kMaxRules];
  int64_t wall = op.rules.n > 0 ? clock_.wall_us() : 0;
  for (size_t j = 0; j < op.rules.n; j++) {
    const RuleOp &ro = op.rules.at[j];
    Entry *x = find(s, rule_hash(h, ro.id), key, ro.id);
    RuleState st;
    if (x && x->has_bucket) st = {x->full_at_ns, x->quota_used};
    checks[j] = check_rule(ro, x && x->has_bucket ? &st : nullptr, now, wall, op.cost_m, op.units);
    if (!checks[j].ok) r.rules.failed |= 1u << j;
  }

  // An acquire: the tenant's bucket, lacking the tokens now, reserves them from their turn if it is near.
  int64_t turn = reserve_turn(op, debt_ns, r.rate_ok);
  r.committed = commits(op, r.rate_ok, r.conc_ok, r.fleet_ok, r.rules.failed);
  if (!r.committed) turn = 0;
  r.wait_ns = turn;
  if (op.max_wait_ns > 0) r.store_now_us = now;
  // A waiting request's slots count from its turn (their ttl runs from when it goes).
  int64_t start = now + ceil_div(turn, 1000);
  bool spend = r.committed && op.rate && r.rate_ok;
  bool take_slot = r.committed && op.conc && r.conc_ok;
  if (spend || take_slot) {
    if (!e) e = &insert(s, h, op.tenant);
    e->used_us = now;
    if (spend && turn > 0) {
      int64_t debt = taken_debt_ns(op.rate_m, debt_ns, turn, op.cost_m);
      tokens = tokens_at_turn(op.rate_m, op.burst_m, debt, turn);
      e->full_at_ns = now * 1000 + debt;
      e->has_bucket = 1;
    } else if (spend) {
      tokens -= op.cost_m;
      e->full_at_ns = now * 1000 + debt_ns + bucket_cost_ns(op.rate_m, op.cost_m);
      e->has_bucket = 1;
    }
    if (take_slot && insert_slot(slots, n_slots, s.slots, Slot{op.slot.hi, op.slot.lo, h, start, pid_, 0})) {
      e->in_flight++;
      in_flight++;
    }
  }
  // fleet_ok refused a table three quarters full, so there is room; were there none, the request would
  // only go uncounted, and its release is a no-op.
  if (r.committed && op.fleet && r.fleet_ok)
    insert_slot(fleet_slots, kFleetSlots, fleet->slots, Slot{op.slot.hi, op.slot.lo, 0, start, pid_, 0});
  // Each rule's entry written on its own (an insert may move entries: no pointer is kept across one).
  for (size_t j = 0; r.committed && j < op.rules.n; j++) {
    if (!checks[j].ok) continue;
    const RuleOp &ro = op.rules.at[j];
    uint64_t rh = rule_hash(h, ro.id);
    RuleState st = commit_rule(ro, checks[j], now, op.cost_m, op.units, turn);
    Entry *x = find(s, rh, key, ro.id);
    if (!x) x = &insert(s, rh, op.tenant, ro.id);
    x->used_us = now;
    x->full_at_ns = st.instant;
    x->quota_used = st.used;
    x->has_bucket = 1;
  }
  r.rules.n = op.rules.n;
  for (size_t j = 0; j < op.rules.n; j++) report_rule(r, j, op.rules.at[j], checks[j], wall);
  r.tokens_m = tokens;
  r.conc_count = in_flight;
  return r;
}

void ShmStore::admit_async(const AdmitOp &op, AdmitCompletion *done) {
  done->complete(admit(op));
}

void ShmStore::release(const ReleaseOp &op) {
  if (op.gives_back()) {
    // A reservation given back: only while the bucket is where it left it (no later turn moves).
    uint64_t h = hash(op.tenant.view());
    Shard &s = shard_of(h);
    Lock lock(s.mu, layout_->repairs, [&] { repair_shard(s); });
    if (Entry *e = find(s, h, op.tenant.view()); e && e->has_bucket && e->full_at_ns == op.give_back_full_at_ns)
      e->full_at_ns -= op.give_back_cost_ns;
  }
  if (op.conc) {
    uint64_t h = hash(op.tenant.view());
    Shard &s = shard_of(h);
    Slot *slots = slots_of(s);
    Lock lock(s.mu, layout_->repairs, [&] { repair_shard(s); });
    if (Slot *x = find_slot(slots, layout_->g.slots_per_shard, op.slot)) {
      uint64_t tenant = x->tenant;
      erase_slot(slots, layout_->g.slots_per_shard, static_cast<size_t>(x - slots));
      if (s.slots) s.slots--;
      if (Entry *e = find_hash(s, tenant); e && e->in_flight > 0) e->in_flight--;
      signals_.bump(SlotSignals::hash(op.tenant.view()));  // a waiting acquire, in any process, tries again
    }
  }
  if (op.fleet) {
    auto *fleet = reinterpret_cast<Shard *>(static_cast<char *>(base_) + layout_->g.fleet_off);
    auto *fleet_slots = reinterpret_cast<Slot *>(static_cast<char *>(base_) + layout_->g.fleet_slots_off);
    Lock lock(fleet->mu, layout_->repairs, [&] { repair_fleet(); });
    if (Slot *x = find_slot(fleet_slots, kFleetSlots, op.slot)) {
      erase_slot(fleet_slots, kFleetSlots, static_cast<size_t>(x - fleet_slots));
      if (fleet->slots) fleet->slots--;
    }
  }
}

StoreStats ShmStore::stats() const {
  StoreStats st;
  st.evictions = layout_->evictions.load(std::memory_order_relaxed);
  auto *shards = reinterpret_cast<Shard *>(static_cast<char *>(base_) + layout_->g.shards_off);
  for (size_t i = 0; i < layout_->g.shards; i++) st.tenants += __atomic_load_n(&shards[i].count, __ATOMIC_RELAXED);
  st.repairs = layout_->repairs.load(std::memory_order_relaxed);
  return st;
}

std::optional<double> ShmStore::box_utilization(double busy, int64_t workers, int64_t /*now_us*/) {
  auto *procs = reinterpret_cast<Proc *>(static_cast<char *>(base_) + layout_->g.procs_off);
  if (proc_index_ < 0 || procs[proc_index_].pid.load() != pid_) {
    proc_index_ = -1;
    for (size_t i = 0; i < kProcs && proc_index_ < 0; i++) {
      int32_t p = procs[i].pid.load();
      if ((p == 0 || dead(p)) && procs[i].pid.compare_exchange_strong(p, pid_)) proc_index_ = static_cast<int>(i);
    }
    if (proc_index_ < 0) return std::nullopt;  // a table full of live processes: this one counts alone
  }
  Proc &me = procs[proc_index_];
  me.busy_milli.store(static_cast<int64_t>(busy * 1000), std::memory_order_relaxed);
  me.workers.store(workers, std::memory_order_relaxed);
  int64_t busy_sum = 0, workers_sum = 0;
  for (size_t i = 0; i < kProcs; i++) {
    int32_t p = procs[i].pid.load();
    if (p == 0) continue;
    if (p != pid_ && dead(p)) {
      procs[i].pid.compare_exchange_strong(p, 0);  // reaped
      continue;
    }
    busy_sum += procs[i].busy_milli.load(std::memory_order_relaxed);
    workers_sum += procs[i].workers.load(std::memory_order_relaxed);
  }
  if (workers_sum <= 0) return std::nullopt;
  return static_cast<double>(busy_sum) / 1000.0 / static_cast<double>(workers_sum);
}

}  // namespace floodwall

#endif  // FW_HAVE_SHM_STORE
