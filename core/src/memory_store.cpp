#include "memory_store.hpp"

#include <algorithm>

#include "token_bucket.hpp"

namespace floodwall {

MemoryStore::MemoryStore(const Clock &clock, int64_t max_tenants) : clock_(clock) {
  // Small bounds get one shard so that the bound is exact; large ones spread the lock.
  size_t n = max_tenants >= 4096 ? 64 : 1;
  per_shard_ = static_cast<size_t>((max_tenants + static_cast<int64_t>(n) - 1) / static_cast<int64_t>(n));
  for (size_t i = 0; i < n; i++) shards_.push_back(std::make_unique<Shard>());
}

MemoryStore::Shard &MemoryStore::shard_for(std::string_view key) {
  size_t h = Hash{}(key);
  return *shards_[(h >> 7) % shards_.size()];
}

// Drops the slots older than ttl (a crashed worker's slot heals itself) and counts the rest.
int64_t MemoryStore::live(std::vector<Slot> &slots, int64_t now_us, int64_t ttl_us) {
  int64_t horizon = now_us - ttl_us;
  std::erase_if(slots, [horizon](const Slot &s) { return s.start_us <= horizon; });
  return static_cast<int64_t>(slots.size());
}

MemoryStore::Entry &MemoryStore::insert(Shard &s, std::string_view key) {
  if (s.map.size() >= per_shard_) {
    // Evict the least recently used tenant, preferring one that holds no slot: evicting a tenant
    // with requests in flight would hand it fresh capacity.
    auto victim = std::prev(s.lru.end());
    auto candidate = victim;
    for (int tries = 0; tries < 8; tries++) {
      auto &e = s.map.find(*candidate)->second;
      if (e.slots.empty()) {
        victim = candidate;
        break;
      }
      if (candidate == s.lru.begin()) break;
      --candidate;
    }
    s.map.erase(s.map.find(*victim));
    s.lru.erase(victim);
    evictions_.fetch_add(1, std::memory_order_relaxed);
  }
  s.lru.emplace_front(key);
  auto [it, inserted] = s.map.try_emplace(s.lru.front());
  (void)inserted;
  it->second.lru = s.lru.begin();
  return it->second;
}

AdmitResult MemoryStore::admit(const AdmitOp &op) {
  AdmitResult r;
  r.decided = true;
  std::string_view key = op.tenant.view();
  Shard &s = shard_for(key);
  std::unique_lock lock(s.mu);
  int64_t now = clock_.now_us();
  auto it = s.map.find(key);
  Entry *e = it == s.map.end() ? nullptr : &it->second;

  int64_t tokens = 0, debt_ns = 0;
  if (op.rate) {
    debt_ns = bucket_debt_ns(e && e->has_bucket ? &e->bucket : nullptr, now);
    tokens = bucket_tokens(op.rate_m, op.burst_m, debt_ns);
    r.rate_ok = tokens >= op.cost_m;
  }
  int64_t in_flight = 0;
  if (op.conc) {
    in_flight = e ? live(e->slots, now, op.conc_ttl_us) : 0;
    r.conc_ok = in_flight < op.conc_limit;
  }
  std::unique_lock<std::mutex> fleet_lock;
  int64_t fleet_count = 0;
  if (op.fleet) {
    fleet_lock = std::unique_lock(fleet_mu_);
    fleet_count = live(fleet_, now, op.fleet_ttl_us);
    r.fleet_ok = fleet_count < op.fleet_cap;
  }

  r.committed = commits(op, r.rate_ok, r.conc_ok, r.fleet_ok);
  bool spend = r.committed && op.rate && r.rate_ok;
  bool take_slot = r.committed && op.conc && r.conc_ok;
  if (spend || take_slot) {
    if (!e)
      e = &insert(s, key);
    else
      s.lru.splice(s.lru.begin(), s.lru, e->lru);
    if (spend) {
      tokens -= op.cost_m;
      e->has_bucket = true;
      e->bucket.full_at_ns = now * 1000 + debt_ns + bucket_cost_ns(op.rate_m, op.cost_m);
    }
    if (take_slot) {
      e->slots.push_back({op.slot, now});
      in_flight++;
    }
  }
  if (r.committed && op.fleet && r.fleet_ok) {
    fleet_.push_back({op.slot, now});
    fleet_count++;
  }
  r.tokens_m = tokens;
  r.conc_count = in_flight;
  r.fleet_count = fleet_count;
  return r;
}

void MemoryStore::admit_async(const AdmitOp &op, AdmitCompletion *done) {
  done->complete(admit(op));
}

void MemoryStore::release(const ReleaseOp &op) {
  if (op.conc) {
    Shard &s = shard_for(op.tenant.view());
    std::lock_guard lock(s.mu);
    auto it = s.map.find(op.tenant.view());
    if (it != s.map.end()) std::erase_if(it->second.slots, [&](const Slot &x) { return x.id == op.slot; });
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
    st.tenants += s->map.size();
  }
  return st;
}

}  // namespace floodwall
