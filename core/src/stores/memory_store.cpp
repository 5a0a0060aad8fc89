#include "stores/memory_store.hpp"

#include <algorithm>
#include <cstring>
#include <random>

#include "util/key_hash.hpp"
#include "util/token_bucket.hpp"

namespace floodwall {

MemoryStore::MemoryStore(const Clock &clock, int64_t max_tenants)
    : clock_(clock), seed_((static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}()) {
  // Small bounds get one shard so that the bound is exact; large ones spread the lock.
  size_t n = max_tenants >= 4096 ? 64 : 1;  // a power of two: the shard is picked with a mask
  shard_mask_ = n - 1;
  per_shard_ = static_cast<size_t>((max_tenants + static_cast<int64_t>(n) - 1) / static_cast<int64_t>(n));
  max_table_ = pow2_at_least(per_shard_ * 2);
  for (size_t i = 0; i < n; i++) {
    shards_.push_back(std::make_unique<Shard>());
    shards_.back()->table.resize(std::min<size_t>(16, max_table_));
  }
}

uint64_t MemoryStore::hash(std::string_view key) const {
  return key_hash(key, seed_);
}

// Drops the slots older than ttl (a crashed worker's slot heals itself) and counts the rest.
int64_t MemoryStore::live(std::vector<Slot> &slots, int64_t now_us, int64_t ttl_us) {
  int64_t horizon = now_us - ttl_us;
  std::erase_if(slots, [horizon](const Slot &s) { return s.start_us <= horizon; });
  return static_cast<int64_t>(slots.size());
}

// Inlined into each caller, as admit_tables is into admit: a call's frame was a tenth of an embedded decision's
// instructions, spread over its nested calls.
[[gnu::always_inline]] inline MemoryStore::Entry *MemoryStore::find(Shard &s, uint64_t h, std::string_view key) {
  size_t mask = s.table.size() - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    Entry &e = s.table[i];
    if (e.free()) return nullptr;
    if (e.hash == h && e.key_len == key.size() && same_bytes(e.key_bytes, key.data(), key.size())) return &e;
  }
}

void MemoryStore::place(std::vector<Entry> &table, Entry &&e) {
  size_t mask = table.size() - 1;
  size_t i = e.hash & mask;
  while (!table[i].free()) i = (i + 1) & mask;
  table[i] = std::move(e);
}

// Removes the entry at i and closes the gap (Knuth's algorithm R for linear probing): every entry after
// it in the run moves back unless that would put it before its home position. No tombstones.
void MemoryStore::erase_at(Shard &s, size_t i) {
  size_t mask = s.table.size() - 1;
  size_t hole = i;
  for (size_t j = (hole + 1) & mask; !s.table[j].free(); j = (j + 1) & mask) {
    size_t home = s.table[j].hash & mask;
    if (((j - home) & mask) >= ((j - hole) & mask)) {
      s.table[hole] = std::move(s.table[j]);
      hole = j;
    }
  }
  s.table[hole] = Entry{};
  s.count--;
}

void MemoryStore::evict_one(Shard &s) {
  // Two turns of the hand find an entry that is not recently used and holds no slot, if there is one;
  // if every tenant has requests in flight, the one under the hand goes.
  size_t mask = s.table.size() - 1, fallback = SIZE_MAX;
  for (size_t step = 0; step < 2 * s.table.size(); step++) {
    size_t i = s.hand;
    s.hand = (s.hand + 1) & mask;
    Entry &e = s.table[i];
    if (e.free()) continue;
    if (!e.slots.empty()) {
      if (fallback == SIZE_MAX) fallback = i;
      continue;
    }
    if (e.used_recently) {
      e.used_recently = false;
      continue;
    }
    erase_at(s, i);
    evictions_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (fallback != SIZE_MAX) {
    erase_at(s, fallback);
    evictions_.fetch_add(1, std::memory_order_relaxed);
  }
}

MemoryStore::Entry &MemoryStore::insert(Shard &s, uint64_t h, const TenantKey &key) {
  if (s.count >= per_shard_) evict_one(s);
  if ((s.count + 1) * 2 > s.table.size() && s.table.size() < max_table_) {
    std::vector<Entry> bigger(s.table.size() * 2);
    for (Entry &e : s.table)
      if (!e.free()) place(bigger, std::move(e));
    s.table.swap(bigger);
    s.hand = 0;
  }
  size_t mask = s.table.size() - 1;
  size_t i = h & mask;
  while (!s.table[i].free()) i = (i + 1) & mask;
  Entry &e = s.table[i];
  e.hash = h;
  std::string_view k = key.view();
  e.key_len = static_cast<uint8_t>(k.size());
  std::memcpy(e.key_bytes, k.data(), k.size());
  s.count++;
  return e;
}

AdmitResult MemoryStore::admit(const AdmitOp &op) {
  if (ctl_count_.load(std::memory_order_relaxed) == 0 && op.tier.empty()) return admit_tables(op);
  TenantControl c;
  bool has = false;
  {
    std::lock_guard lock(ctl_mu_);
    auto it = ctl_.find(op.tenant.view());
    if (it != ctl_.end()) {
      c = it->second;
      has = true;
    }
  }
  return admit_controlled(has ? &c : nullptr, op, floor_div(clock_.wall_us(), 1'000'000),
                          [this](const AdmitOp &o) { return admit_tables(o); });
}

void MemoryStore::control(const TenantKey &tenant, const ControlChange &change) {
  std::lock_guard lock(ctl_mu_);
  TenantControl &c = ctl_[std::string(tenant.view())];
  apply_change(c, change);
  if (c.empty()) ctl_.erase(std::string(tenant.view()));
  ctl_count_.store(ctl_.size(), std::memory_order_relaxed);
  bump_ctl_epoch();
}

std::vector<std::pair<std::string, TenantControl>> MemoryStore::controlled(size_t limit) {
  std::lock_guard lock(ctl_mu_);
  std::vector<std::pair<std::string, TenantControl>> out;
  for (const auto &kv : ctl_) {
    if (out.size() >= limit) break;
    out.push_back(kv);
  }
  return out;
}

StoreStatus MemoryStore::status(int64_t fleet_ttl_us) {
  StoreStatus st;
  for (size_t l = 0; l < st.modes.size(); l++) st.modes[l] = fleet_modes_[l].load();
  {
    std::lock_guard lock(fleet_mu_);
    st.fleet_in_flight = live(fleet_, clock_.now_us(), fleet_ttl_us);
  }
  {
    std::lock_guard lock(ctl_mu_);
    st.controlled = static_cast<int64_t>(ctl_.size());
  }
  st.server = "memory (this process)";
  st.topology = "in process";
  return st;
}

TenantState MemoryStore::inspect(const AdmitOp &op) {
  TenantState st;
  {
    std::lock_guard lock(ctl_mu_);
    auto it = ctl_.find(op.tenant.view());
    if (it != ctl_.end()) st.control = it->second;
  }
  std::string_view key = op.tenant.view();
  uint64_t h = hash(key);
  Shard &s = shard_for(h);
  std::lock_guard lock(s.mu);
  int64_t now = clock_.now_us(), wall = clock_.wall_us();
  st.now_s = floor_div(wall, 1'000'000);
  Entry *e = find(s, h, key);
  if (op.rate) {
    int64_t rate_m = st.control.rate_m > 0 ? st.control.rate_m : op.rate_m;
    int64_t burst_m = st.control.rate_m > 0 ? st.control.burst_m : op.burst_m;
    st.tokens_m = bucket_tokens(rate_m, burst_m, bucket_debt_ns(e && e->has_bucket ? &e->bucket : nullptr, now));
  }
  if (e && op.conc) st.in_flight = live(e->slots, now, op.conc_ttl_us);
  for (size_t j = 0; j < op.rules.n; j++) {
    const RuleState *rs = nullptr;
    if (e)
      for (const auto &[id, state] : e->rules)
        if (id == op.rules.at[j].id) rs = &state;
    RuleCheck c = check_rule(op.rules.at[j], rs, now, wall, 0, 0);
    st.rule_left.push_back(c.left);
    st.rule_reset_s.push_back(op.rules.at[j].quota ? c.window.end_s - st.now_s : 0);
  }
  return st;
}

void MemoryStore::reset(const AdmitOp &op) {
  std::string_view key = op.tenant.view();
  uint64_t h = hash(key);
  Shard &s = shard_for(h);
  std::lock_guard lock(s.mu);
  size_t mask = s.table.size() - 1;
  for (size_t i = h & mask; !s.table[i].free(); i = (i + 1) & mask) {
    if (s.table[i].hash == h && s.table[i].key() == key) {
      erase_at(s, i);
      return;
    }
  }
}

[[gnu::always_inline]] inline AdmitResult MemoryStore::admit_tables(const AdmitOp &op) {
  AdmitResult r;
  r.decided = true;
  std::string_view key = op.tenant.view();
  uint64_t h = hash(key);
  Shard &s = shard_for(h);
  std::lock_guard lock(s.mu);
  // The Guard's reading when it handed one down (one clock read per decision), else the store's own.
  int64_t now = op.now_us != AdmitOp::kStoreClock ? op.now_us : clock_.now_us();
  Entry *e = find(s, h, key);

  int64_t tokens = 0, debt_ns = 0;
  if (op.rate) {
    debt_ns = bucket_debt_ns(e && e->has_bucket ? &e->bucket : nullptr, now);
    // A full bucket holds its burst (bucket_tokens' answer for no debt, without its floating-point division).
    tokens = debt_ns == 0 ? op.burst_m : bucket_tokens(op.rate_m, op.burst_m, debt_ns);
    r.rate_ok = tokens >= op.cost_m;
  }
  int64_t in_flight = 0;
  if (op.conc) {
    in_flight = e ? live(e->slots, now, op.conc_ttl_us) : 0;
    r.conc_ok = in_flight < op.conc_limit;
  }
  std::unique_lock<std::mutex> fleet_lock;
  if (op.fleet) {
    fleet_lock = std::unique_lock(fleet_mu_);
    r.fleet_ok = live(fleet_, now, op.fleet_ttl_us) < op.fleet_cap;
  }

  // The limits and quotas that apply: each its own state in the tenant's entry.
  RuleCheck checks[kMaxRules];
  int64_t wall = op.rules.n > 0 ? clock_.wall_us() : 0;
  RuleState *states[kMaxRules];
  auto state_of = [](Entry *x, uint64_t id) -> RuleState * {
    if (x)
      for (auto &[rid, st] : x->rules)
        if (rid == id) return &st;
    return nullptr;
  };
  for (size_t j = 0; j < op.rules.n; j++) {
    states[j] = state_of(e, op.rules.at[j].id);
    checks[j] = check_rule(op.rules.at[j], states[j], now, wall, op.cost_m, op.units);
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
  bool rules = r.committed && (op.rules.n > 0 && (~r.rules.failed & ((1u << op.rules.n) - 1)) != 0);
  if (spend || take_slot || rules) {
    if (!e) e = &insert(s, h, op.tenant);
    e->used_recently = true;
    if (spend && turn > 0) {
      int64_t debt = taken_debt_ns(op.rate_m, debt_ns, turn, op.cost_m);
      tokens = tokens_at_turn(op.rate_m, op.burst_m, debt, turn);
      e->has_bucket = true;
      e->bucket.full_at_ns = now * 1000 + debt;
    } else if (spend) {
      tokens -= op.cost_m;
      e->has_bucket = true;
      e->bucket.full_at_ns = now * 1000 + debt_ns + s.cost_of(op.rate_m, op.cost_m);
    }
    if (take_slot) {
      e->slots.push_back({op.slot, start});
      in_flight++;
    }
    for (size_t j = 0; rules && j < op.rules.n; j++) {
      if (!checks[j].ok) continue;
      RuleState st = commit_rule(op.rules.at[j], checks[j], now, op.cost_m, op.units, turn);
      if (RuleState *have = state_of(e, op.rules.at[j].id))
        *have = st;
      else
        e->rules.emplace_back(op.rules.at[j].id, st);
    }
  }
  r.rules.n = op.rules.n;
  for (size_t j = 0; j < op.rules.n; j++) report_rule(r, j, op.rules.at[j], checks[j], wall);
  if (r.committed && op.fleet && r.fleet_ok) {
    fleet_.push_back({op.slot, start});
  }
  r.tokens_m = tokens;
  r.conc_count = in_flight;
  return r;
}

void MemoryStore::admit_async(const AdmitOp &op, AdmitCompletion *done) {
  done->complete(admit(op));
}

void MemoryStore::release(const ReleaseOp &op) {
  if (op.conc || op.gives_back()) {
    std::string_view key = op.tenant.view();
    uint64_t h = hash(key);
    Shard &s = shard_for(h);
    std::lock_guard lock(s.mu);
    if (Entry *e = find(s, h, key)) {
      if (op.conc && std::erase_if(e->slots, [&](const Slot &x) { return x.id == op.slot; }) > 0)
        signals_.signals().bump(SlotSignals::hash(key));  // a waiting acquire of the tenant tries again
      // A reservation given back: only while the bucket is where it left it (no later turn moves).
      if (op.gives_back() && e->has_bucket && e->bucket.full_at_ns == op.give_back_full_at_ns)
        e->bucket.full_at_ns -= op.give_back_cost_ns;
    }
  }
  if (op.fleet) {
    std::lock_guard lock(fleet_mu_);
    std::erase_if(fleet_, [&](const Slot &x) { return x.id == op.slot; });
  }
}

StoreStats MemoryStore::stats() const {
  StoreStats st;
  st.evictions = evictions_.load(std::memory_order_relaxed);
  for (const auto &s : shards_) {
    std::lock_guard lock(s->mu);
    st.tenants += s->count;
  }
  return st;
}

}  // namespace floodwall
