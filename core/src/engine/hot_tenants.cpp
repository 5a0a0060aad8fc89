// Hot tenants (hot_tenants.hpp): the maintenance thread that gives back what leases no longer hold and
// sends the fleet reports, shutdown, and the two admit paths (blocking, async) around one decision. Which
// tenants are hot: hot_tenants_tracker.cpp; the decision and the lease calls: hot_tenants_leases.cpp; the
// fleet reports: hot_tenants_fleet.cpp; what they share: hot_tenants_parts.hpp.
#include <chrono>
#include <cstdio>
#include <mutex>

#include "engine/hot_tenants_parts.hpp"
#include "util/fork.hpp"
#include "util/futex_event.hpp"

namespace floodwall {

namespace {

constexpr auto kTick = std::chrono::milliseconds(10);

// A blocking admit's wait for its tenant's lease call: one per thread, woken with no lock held.
class SyncLeaseWaiter final : public LeaseWaiter {
 public:
  void arm() {
    failure = FailReason::none;
    next = nullptr;
    done_.reset();
  }
  void wake() override { done_.set(); }
  void wait() { done_.wait(); }

 private:
  FutexEvent done_;
};

}  // namespace

// ------------------------------------------------------------------ life and the maintenance thread

HotTenants::HotTenants(const Policy &p, Store &store, const Clock &clock, Rng &rng, Metrics &metrics)
    : policy_(p),
      store_(store),
      clock_(clock),
      rng_(rng),
      metrics_(metrics),
      generation_(fork_generation()),
      seed_(rng.next_u64()),
      token_leases_(p.request_rate && p.request_rate->lease),
      slot_leases_(p.concurrency && p.concurrency->lease),
      fleet_(p.fleet.has_value()),
      sets_(new Set[kSets]),
      client_id_(random_id(rng)),
      report_(std::make_unique<FleetReport>(*this)) {
  thread_ = std::thread([this] { run(); });
}

HotTenants::~HotTenants() {
  if (generation_ != fork_generation()) {
    thread_.detach();  // the parent's thread: it does not exist in this child
    return;
  }
  shutdown();
}

void HotTenants::shutdown() {
  if (stopped_.load()) return;
  {
    std::lock_guard lock(run_mu_);
    stop_ = true;
  }
  run_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  {
    std::lock_guard lock(active_mu_);
    int64_t now = clock_.now_us();
    for (const EntryRef &e : active_) give_back(*e, now, true);
  }
  withdraw_report();
  stopped_.store(true);
}

void HotTenants::run() {
  for (;;) {
    {
      std::unique_lock lock(run_mu_);
      run_cv_.wait_for(lock, kTick, [this] { return stop_; });
      if (stop_) return;
    }
    maintain(clock_.now_us());
  }
}

void HotTenants::maintain(int64_t now) {
  bool any = false;
  {
    std::lock_guard lock(active_mu_);
    std::erase_if(active_, [&](const EntryRef &e) {
      // Only this list refers to it: its tenant went cold here, and it gives back everything now.
      bool orphan = e.use_count() == 1;
      give_back(*e, now, orphan);
      if (!orphan) return false;
      std::lock_guard entry_lock(e->mu);
      return e->holds_nothing();
    });
    any = !active_.empty();
  }
  report(now, any);
}

HotTenants::LeaseTotals HotTenants::lease_totals() {
  LeaseTotals h;
  std::lock_guard lock(active_mu_);
  for (const EntryRef &e : active_) {
    if (e.use_count() > 1) h.hot_tenants++;
    std::lock_guard entry_lock(e->mu);
    h.tokens += e->lease_m / 1'000'000;
    h.slots += static_cast<int64_t>(e->free.size()) + e->slots_in_use;
  }
  return h;
}

// ------------------------------------------------------------------------------- admit paths

HotTenants::Handled HotTenants::admit(Entry &e, const AdmitOp &op, AdmitResult &r) {
  thread_local SyncLeaseWaiter w;
  bool called = false;
  for (int round = 0;; round++) {
    bool start = false;
    Handled o;
    w.arm();
    {
      std::lock_guard lock(e.mu);
      o = decide(e, op, r, start, round < kMaxRounds ? &w : nullptr);
    }
    if (o == Handled::exact) {
      metrics_.lease(LeaseCounter::exact_admits);
      return o;
    }
    if (o == Handled::decided) {
      metrics_.lease(called ? LeaseCounter::decisions_after_lease_call : LeaseCounter::decisions_in_process);
      return o;
    }
    if (start) {
      called = true;
      start_lease_call(e);
    }
    w.wait();
    if (w.failure != FailReason::none) {
      r = AdmitResult{};
      r.reason = w.failure;  // Redis did not answer the lease call: redis.fallback decides
      return Handled::decided;
    }
  }
}

HotTenants::Handled HotTenants::admit_async(Entry &e, const AdmitOp &op, AdmitResult &r, LeaseWaiter &w,
                                            AsyncState &st) {
  if (w.failure != FailReason::none) {
    r = AdmitResult{};
    r.reason = w.failure;
    w.failure = FailReason::none;
    return Handled::decided;
  }
  bool start = false;
  Handled o;
  {
    std::lock_guard lock(e.mu);
    o = decide(e, op, r, start, st.rounds < kMaxRounds ? &w : nullptr);
    if (o == Handled::waiting) {
      // Counted before the lock goes: from then on the waiter may be woken (and gone) at any moment.
      st.rounds++;
      if (start) st.called = true;
    }
  }
  if (o == Handled::exact) metrics_.lease(LeaseCounter::exact_admits);
  if (o == Handled::decided)
    metrics_.lease(st.called ? LeaseCounter::decisions_after_lease_call : LeaseCounter::decisions_in_process);
  if (start) start_lease_call(e);  // touches neither w nor st
  return o;
}

}  // namespace floodwall
