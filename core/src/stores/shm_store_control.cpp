// shm://NAME's control records (the admin API: an override, a tier, a block, read by every admit of the
// machine's processes), and what the admin reads and resets of a tenant.
#include "util/platform.hpp"
// shm:// is built on Linux alone (util/platform.hpp); elsewhere the store factory refuses it.
#if FW_HAVE_SHM_STORE

#include <algorithm>
#include <cstring>

#include "stores/rule_state.hpp"
#include "stores/shm_store_internal.hpp"
#include "util/errors.hpp"
#include "util/token_bucket.hpp"

namespace floodwall {

using namespace shm;

// ---------------------------------------------------------------------------------- control records

CtlEntry *ShmStore::ctl_find(uint64_t h, std::string_view key) const {
  auto *t = reinterpret_cast<CtlEntry *>(static_cast<char *>(base_) + layout_->g.ctl_entries_off);
  for (size_t i = h & (kCtlSlots - 1), step = 0; step < kCtlSlots; i = (i + 1) & (kCtlSlots - 1), step++) {
    if (t[i].hash == 0) return nullptr;
    if (t[i].hash == h && t[i].len == key.size() && same_bytes(t[i].key, key.data(), key.size())) return &t[i];
  }
  return nullptr;
}

namespace {
TenantControl to_control(const CtlEntry &e) {
  TenantControl c;
  c.tier.assign(e.tier, std::min<size_t>(e.tier_len, sizeof e.tier));
  c.rate_m = e.rate_m;
  c.burst_m = e.burst_m;
  c.blocked = e.blocked != 0;
  c.blocked_until_s = e.blocked_until_s;
  return c;
}
}  // namespace

bool ShmStore::control_of(const TenantKey &tenant, TenantControl &out) const {
  auto *ctl = reinterpret_cast<Shard *>(static_cast<char *>(base_) + layout_->g.ctl_off);
  if (__atomic_load_n(&ctl->count, __ATOMIC_RELAXED) == 0) return false;
  Lock lock(ctl->mu, layout_->repairs);
  CtlEntry *e = ctl_find(hash(tenant.view()), tenant.view());
  if (!e) return false;
  out = to_control(*e);
  return true;
}

void ShmStore::control(const TenantKey &tenant, const ControlChange &change) {
  bump_ctl_epoch();
  if (change.set_tier && change.tier.size() > sizeof(CtlEntry::tier))
    throw StoreError("tier: at most 32 bytes on an shm:// store");
  auto *ctl = reinterpret_cast<Shard *>(static_cast<char *>(base_) + layout_->g.ctl_off);
  auto *t = reinterpret_cast<CtlEntry *>(static_cast<char *>(base_) + layout_->g.ctl_entries_off);
  std::string_view key = tenant.view();
  uint64_t h = hash(key);
  Lock lock(ctl->mu, layout_->repairs);
  CtlEntry *e = ctl_find(h, key);
  TenantControl c = e ? to_control(*e) : TenantControl{};
  apply_change(c, change);
  if (c.empty()) {
    if (!e) return;
    // Removed, and the run after it closed up (as the tenant tables do).
    size_t mask = kCtlSlots - 1, hole = static_cast<size_t>(e - t);
    for (size_t j = (hole + 1) & mask; t[j].hash != 0; j = (j + 1) & mask) {
      size_t home = t[j].hash & mask;
      if (((j - home) & mask) >= ((j - hole) & mask)) {
        t[hole] = t[j];
        hole = j;
      }
    }
    t[hole] = CtlEntry{};
    if (ctl->count) ctl->count--;
    return;
  }
  if (!e) {
    if (ctl->count * 4 >= kCtlSlots * 3)
      throw StoreError("store: the shm:// store holds control records of " + std::to_string(ctl->count) +
                       " tenants, its most; remove some (override rm, unblock) or use Redis");
    size_t i = h & (kCtlSlots - 1);
    while (t[i].hash != 0) i = (i + 1) & (kCtlSlots - 1);
    e = &t[i];
    e->len = static_cast<uint8_t>(key.size());
    std::memcpy(e->key, key.data(), key.size());
    ctl->count++;
  }
  e->rate_m = c.rate_m;
  e->burst_m = c.burst_m;
  e->blocked = c.blocked ? 1 : 0;
  e->blocked_until_s = c.blocked_until_s;
  e->tier_len = static_cast<uint8_t>(c.tier.size());
  std::memcpy(e->tier, c.tier.data(), c.tier.size());
  e->hash = h;
}

std::vector<std::pair<std::string, TenantControl>> ShmStore::controlled(size_t limit) {
  auto *ctl = reinterpret_cast<Shard *>(static_cast<char *>(base_) + layout_->g.ctl_off);
  auto *t = reinterpret_cast<CtlEntry *>(static_cast<char *>(base_) + layout_->g.ctl_entries_off);
  std::vector<std::pair<std::string, TenantControl>> out;
  Lock lock(ctl->mu, layout_->repairs);
  for (size_t i = 0; i < kCtlSlots && out.size() < limit; i++)
    if (t[i].hash != 0) out.emplace_back(std::string(t[i].key, t[i].len), to_control(t[i]));
  return out;
}

TenantState ShmStore::inspect(const AdmitOp &op) {
  TenantState st;
  control_of(op.tenant, st.control);
  std::string_view key = op.tenant.view();
  uint64_t h = hash(key);
  Shard &s = shard_of(h);
  Lock lock(s.mu, layout_->repairs, [&] { repair_shard(s); });
  int64_t now = clock_.now_us(), wall = clock_.wall_us();
  st.now_s = floor_div(wall, 1'000'000);
  Entry *e = find(s, h, key);
  if (op.rate) {
    BucketState b{e && e->has_bucket ? e->full_at_ns : 0};
    int64_t rate_m = st.control.rate_m > 0 ? st.control.rate_m : op.rate_m;
    int64_t burst_m = st.control.rate_m > 0 ? st.control.burst_m : op.burst_m;
    st.tokens_m = bucket_tokens(rate_m, burst_m, bucket_debt_ns(e && e->has_bucket ? &b : nullptr, now));
  }
  if (e && op.conc) st.in_flight = e->in_flight;
  for (size_t j = 0; j < op.rules.n; j++) {
    const RuleOp &ro = op.rules.at[j];
    Entry *x = find(s, rule_hash(h, ro.id), key, ro.id);
    RuleState rs;
    if (x && x->has_bucket) rs = {x->full_at_ns, x->quota_used};
    RuleCheck c = check_rule(ro, x && x->has_bucket ? &rs : nullptr, now, wall, 0, 0);
    st.rule_left.push_back(c.left);
    st.rule_reset_s.push_back(ro.quota ? c.window.end_s - st.now_s : 0);
  }
  return st;
}

// The tenant's bucket and rules forgotten (full again); its slots stay until they are released or expire.
void ShmStore::reset(const AdmitOp &op) {
  std::string_view key = op.tenant.view();
  uint64_t h = hash(key);
  Shard &s = shard_of(h);
  Lock lock(s.mu, layout_->repairs, [&] { repair_shard(s); });
  if (Entry *e = find(s, h, key)) {
    e->has_bucket = 0;
    e->full_at_ns = 0;
  }
  for (size_t j = 0; j < op.rules.n; j++) {
    Entry *x = find(s, rule_hash(h, op.rules.at[j].id), key, op.rules.at[j].id);
    if (x) erase_entry(s, static_cast<size_t>(x - entries_of(s)));
  }
}

}  // namespace floodwall

#endif  // FW_HAVE_SHM_STORE
