// Which tenants are hot in this process: every admit that asks a limiter counts in its tenant's way of
// the table (kSets sets of kWays, by the key's hash) by kWindowUs windows; kHotAdmits in one window make
// the tenant hot (an entry: hot_tenants_parts.hpp), kCoolWindows windows without kCoolAdmits cold again.
#include <mutex>

#include "engine/hot_tenants_parts.hpp"
#include "util/fork.hpp"
#include "util/key_hash.hpp"

namespace floodwall {

HotTenants::EntryRef HotTenants::track(const AdmitOp &op, int64_t now) {
  if (generation_ != fork_generation()) return nullptr;  // a forked child never spends its parent's leases
  std::string_view key = op.tenant.view();
  uint64_t h = key_hash(key, seed_);
  Set &set = sets_[h & (kSets - 1)];
  int64_t window = now / kWindowUs;
  bool made = false;
  EntryRef entry;
  {
    std::lock_guard lock(set.mu);
    Way *way = nullptr;
    for (Way &w : set.ways)
      if (w.hash == h && w.key.view() == key) way = &w;
    if (!way) {
      // A free way, else the cold one seen least recently (a hot one with no busy window lately is cold);
      // when all four are hot, this tenant stays cold.
      for (Way &w : set.ways) {
        bool hot = w.hot && window - w.busy_window <= kCoolWindows;
        if (!hot && (!way || w.key.view().empty() || (!way->key.view().empty() && w.window < way->window))) way = &w;
      }
      if (!way) return nullptr;
      way->hash = h;
      way->key = op.tenant;
      way->window = window;
      way->busy_window = window - kCoolWindows - 1;
      way->count = 0;
      way->hot = false;
      way->entry.reset();
    }
    // A thread that read the clock before it was descheduled counts in the window that is current now.
    if (window > way->window) {
      way->window = window;
      way->count = 0;
    }
    if (way->count < UINT32_MAX) way->count++;
    if (way->count >= kCoolAdmits) way->busy_window = way->window;
    if (!way->hot && way->count >= kHotAdmits) way->hot = true;
    if (way->hot && way->window - way->busy_window > kCoolWindows) {
      // Cold again: the entry gives back what it holds and goes (maintain); a new one when it is hot again.
      way->hot = false;
      way->entry.reset();
    }
    if (!way->hot) return nullptr;
    if (!way->entry) {
      way->entry = std::make_shared<Entry>(*this, op.tenant);
      made = true;
    }
    entry = way->entry;
  }
  if (made) {
    {
      std::lock_guard lock(active_mu_);
      active_.push_back(entry);
    }
    run_cv_.notify_one();  // the first fleet report goes out now
  }
  return entry;
}

HotTenants::EntryRef HotTenants::find(const TenantKey &tenant) {
  std::string_view key = tenant.view();
  uint64_t h = key_hash(key, seed_);
  Set &set = sets_[h & (kSets - 1)];
  std::lock_guard lock(set.mu);
  for (Way &w : set.ways)
    if (w.hash == h && w.key.view() == key) return w.entry;
  return nullptr;
}

}  // namespace floodwall
