// Hot tenants' leases: a request decided from the token lease, the over-limit cache, the slot lease and
// the fleet's view (decide() and its steps); the one lease call per tenant in flight and its reply; what
// goes back without one (give_back(), release_slot()); and the offset of Redis' clock from this client's.
#include <algorithm>

#include "engine/hot_tenants_parts.hpp"

namespace floodwall {

// ------------------------------------------------------------------------------------- decisions

// What this process knows of one request's limiters, read under its entry's lock (decide()'s first
// step) and carried to its last.
struct HotTenants::Reading {
  int64_t now = 0;
  bool lease_valid = false;  // the token lease is spendable now
  int64_t in_hand = 0;       // its micro-tokens when it is, else none
  // A token lease's size, and what a lease call must find in the bucket (rate_verdict()).
  int64_t lease_m = 0, need_m = 0;
  int64_t fleet_now = 0;  // this client's in-process fleet count, as read
  Verdict rate = Verdict::ok, conc = Verdict::ok, fleet = Verdict::ok;
};

// One request of a hot tenant, under its entry's lock. What each limiter can say here is read (read());
// one that enforces and says no refuses the request; else one that needs Redis sends it to an exact round
// trip, or to wait for the tenant's one lease call (prepare_lease_call()); else it is decided here, its
// fleet share taken (take_fleet_share()) and the rest spent (answer()).
HotTenants::Handled HotTenants::decide(Entry &e, const AdmitOp &op, AdmitResult &r, bool &start_call, LeaseWaiter *w) {
  start_call = false;
  // A control record changed (here, or in the fleet at the last flags poll): what this entry believes is
  // asked again, by exact admits for a while (the next lease call says whether the tenant has one).
  if (int64_t epoch = store_.ctl_epoch(); epoch != e.ctl_epoch) {
    e.ctl_epoch = epoch;
    e.known = false;
    e.exact_until_us = clock_.now_us() + kControlledHoldUs;
  }
  if (e.exact_until_us != 0 && clock_.now_us() < e.exact_until_us) return Handled::exact;
  Reading v = read(e, op);
  auto rejects = [](bool on, bool enforce, Verdict x) { return on && enforce && x == Verdict::no; };
  auto asks = [](bool on, Verdict x, Verdict what) { return on && x == what; };
  bool rejected = rejects(op.rate, op.rate_enforce, v.rate) || rejects(op.conc, op.conc_enforce, v.conc) ||
                  rejects(op.fleet, op.fleet_enforce, v.fleet);
  if (!rejected) {
    bool exact = asks(op.rate, v.rate, Verdict::ask_exact) || asks(op.conc, v.conc, Verdict::ask_exact) ||
                 asks(op.fleet, v.fleet, Verdict::ask_exact);
    bool lease = asks(op.rate, v.rate, Verdict::ask_lease) || asks(op.conc, v.conc, Verdict::ask_lease);
    if (exact || (lease && !w)) return Handled::exact;
    if (lease) {
      w->next = e.waiters;
      e.waiters = w;
      if (!e.calling) {
        start_call = true;
        prepare_lease_call(e, op, v);
      }
      return Handled::waiting;
    }
    // Every limiter is known and none rejects: the fleet share is taken first, since it can still say no
    // (a report's count is shared by every tenant of this client).
    if (op.fleet && v.fleet == Verdict::ok && !take_fleet_share(op, v.fleet_now)) {
      v.fleet = Verdict::no;
      rejected = op.fleet_enforce;
    }
  }
  answer(e, op, v, rejected, r);
  return Handled::decided;
}

HotTenants::Reading HotTenants::read(Entry &e, const AdmitOp &op) const {
  Reading v;
  v.now = clock_.now_us();
  v.lease_valid = e.lease_m > 0 && v.now < e.lease_until_us;
  v.in_hand = v.lease_valid ? e.lease_m : 0;
  if (op.rate) v.rate = rate_verdict(e, op, v);
  if (op.conc) v.conc = conc_verdict(e, v.now);
  v.fleet_now = fleet_local_.load(std::memory_order_relaxed);
  if (op.fleet) v.fleet = fleet_verdict(op, v);
  return v;
}

// The token bucket: the lease in hand pays, or the over-limit cache refuses, or a lease call must say.
HotTenants::Verdict HotTenants::rate_verdict(const Entry &e, const AdmitOp &op, Reading &v) const {
  if (!token_leases_) return Verdict::ask_exact;
  // What a lease call must find in the bucket: half a lease (never less than this request's cost). Hot
  // processes that called for every token that refilled would call once a token (a token every 200 us at
  // 5,000/s, faster than a round trip under load, and the cache could never say no); waiting for half a
  // lease, they call about twice a lease. No token is ever admitted beyond the bucket; a request may be
  // refused while the bucket holds less than half a lease, which then goes to a later request (at most
  // half a lease of refill later, ttl_ms / 2, and half as much again for the random wait below).
  v.lease_m = lease_size_m(op);
  v.need_m = std::max(op.cost_m, (v.lease_m / 1'000'000 + 1) / 2 * 1'000'000);
  double wait_us =
      e.jitter * static_cast<double>(v.need_m) / 2 * 1e6 / static_cast<double>(std::max<int64_t>(1, op.rate_m));
  if (v.in_hand >= op.cost_m) return Verdict::ok;
  if (e.known && e.rate_m == op.rate_m && e.bucket_at(static_cast<double>(v.now) - wait_us) + v.in_hand < v.need_m)
    return Verdict::no;  // the over-limit cache: Redis would not grant it until the bucket refills
  return Verdict::ask_lease;
}

// The tenant's slots: an idle leased one, or a set found full lately, or a lease call must say.
HotTenants::Verdict HotTenants::conc_verdict(Entry &e, int64_t now) const {
  if (!slot_leases_) return Verdict::ask_exact;
  e.expire_free(now, false);  // slots whose lease ended go back
  return !e.free.empty() ? Verdict::ok : now < e.full_until_us ? Verdict::no : Verdict::ask_lease;
}

// The fleet: the other clients and the set as of the last report, plus this client's count now.
HotTenants::Verdict HotTenants::fleet_verdict(const AdmitOp &op, const Reading &v) const {
  if (!fleet_view_fresh(v.now)) return Verdict::ask_exact;
  return fleet_others_.load(std::memory_order_relaxed) + v.fleet_now < op.fleet_cap ? Verdict::ok : Verdict::no;
}

int64_t HotTenants::lease_size_m(const AdmitOp &op) const {
  // Never more than ttl_ms of the tenant's refill: what a killed process strands refills within ttl_ms.
  const TokenLeasePolicy &l = *policy_.request_rate->lease;
  int64_t by_ttl = op.rate_m * l.ttl_ms / 1'000'000'000;
  int64_t tokens = std::min({l.max_tokens, op.burst_m / 1'000'000, by_ttl});
  return std::max<int64_t>(tokens, 0) * 1'000'000;
}

// One lease call: it gives back what this process no longer needs (the rest of the previous token lease,
// expired slots), then asks for what the waiting requests lack. The caller starts it once the entry's
// lock is released (start_lease_call()).
void HotTenants::prepare_lease_call(Entry &e, const AdmitOp &op, const Reading &v) {
  e.calling = true;
  e.call_sent_us = v.now;
  LeaseOp &c = e.call;
  c = LeaseOp{};
  c.tenant = e.tenant;
  if (op.rate && (v.rate == Verdict::ask_lease || (e.lease_m > 0 && !v.lease_valid))) {
    e.rate_m = op.rate_m;
    e.burst_m = op.burst_m;
    c.rate_m = op.rate_m;
    c.burst_m = op.burst_m;
    c.give_back_m = e.lease_m;  // every token in hand was debited within its ttl_ms
    e.lease_m = 0;
    if (v.rate == Verdict::ask_lease) {
      c.tokens = true;
      c.min_m = v.need_m;
      c.want_m = std::max(v.lease_m, op.cost_m);
    }
  }
  if (op.conc && v.conc == Verdict::ask_lease) {
    c.slots = true;
    c.conc_limit = op.conc_limit;
    c.conc_ttl_us = op.conc_ttl_us;
    e.conc_limit = op.conc_limit;
    c.wanted.resize(static_cast<size_t>(policy_.concurrency->lease->max_slots));
    for (SlotId &id : c.wanted) id = {rng_.next_u64(), rng_.next_u64()};
  }
  c.released.swap(e.to_release);
  e.self = e.shared_from_this();
}

// One share of the fleet for this request; false when the fleet is full now.
bool HotTenants::take_fleet_share(const AdmitOp &op, int64_t &fleet_now) {
  // Taken by the one compare-and-swap that succeeds, against the view of that moment. (A second look at
  // the view after it, as this once did, could refuse a share it had already counted: a report landing
  // in between made the request a rejection whose share was never given back.)
  while (fleet_others_.load(std::memory_order_relaxed) + fleet_now < op.fleet_cap)
    if (fleet_local_.compare_exchange_weak(fleet_now, fleet_now + 1, std::memory_order_relaxed)) return true;
  return false;
}

// The decision: what each limiter said; a committed request spends from the token lease and takes an idle
// leased slot; the headers.
void HotTenants::answer(Entry &e, const AdmitOp &op, Reading &v, bool rejected, AdmitResult &r) {
  bool fleet_taken = op.fleet && v.fleet == Verdict::ok && !rejected;  // taken only when nothing rejected
  r = AdmitResult{};
  r.decided = true;
  r.in_process = true;
  r.rate_ok = v.rate != Verdict::no;
  r.conc_ok = v.conc != Verdict::no;
  r.fleet_ok = v.fleet != Verdict::no;
  r.rate_evaluated = v.rate == Verdict::ok || v.rate == Verdict::no;
  r.conc_evaluated = v.conc == Verdict::ok || v.conc == Verdict::no;
  r.fleet_evaluated = v.fleet == Verdict::ok || v.fleet == Verdict::no;
  r.committed = !rejected;
  if (r.committed) {
    if (op.rate && v.rate == Verdict::ok) {
      e.lease_m -= op.cost_m;
      v.in_hand -= op.cost_m;
    }
    if (op.conc && v.conc == Verdict::ok) {
      Entry::Leased s = e.free.back();
      e.free.pop_back();
      e.slots_in_use++;
      r.slot_leased = true;
      r.leased_slot = s.id;
      r.slot_lease_until_us = s.until_us;
    }
    r.fleet_in_process = fleet_taken;
  }
  // The headers: what this process knows of the bucket (Redis' last word refilled, plus its lease) and of
  // the tenant's slots (its idle leased ones, plus the ones Redis had free). A request refused while the
  // bucket holds less than half a lease sees the tokens it could have: less than its cost by what the
  // bucket still lacks, so that Retry-After says when the lease call will find enough (at least 1 s).
  if (op.rate) {
    r.tokens_m = std::min(op.burst_m, e.bucket_at(static_cast<double>(v.now)) + v.in_hand);
    if (v.rate == Verdict::no) r.tokens_m = std::max<int64_t>(0, r.tokens_m - (v.need_m - op.cost_m));
  }
  if (op.conc) {
    int64_t usable = static_cast<int64_t>(e.free.size()) + std::max<int64_t>(0, op.conc_limit - e.live_known);
    r.conc_count = std::clamp<int64_t>(op.conc_limit - usable, 0, op.conc_limit);
  }
}

// ------------------------------------------------------------------------- lease calls and replies

void HotTenants::start_lease_call(Entry &e) {
  // e.call is stable until the completion: no other call starts while this one is in flight.
  store_.lease_async(e.call, &e);
}

int64_t HotTenants::executed_at(int64_t store_us, int64_t sent_us, int64_t received_us) {
  std::lock_guard lock(offset_mu_);
  if (received_us - offset_epoch_us_ >= 1'000'000) {
    offset_hi_last_ = offset_hi_;
    offset_hi_ = INT64_MAX;
    offset_epoch_us_ = received_us;
  }
  int64_t hi = store_us - sent_us, lo = store_us - received_us;
  int64_t best = std::min(offset_hi_, offset_hi_last_);
  // The bounds contradict each other when Redis' clock stepped: start again from this call alone.
  if (best != INT64_MAX && lo > best) offset_hi_ = offset_hi_last_ = best = INT64_MAX;
  offset_hi_ = std::min(offset_hi_, hi);
  best = std::min(best, hi);
  // The call ran within its own round trip, whatever the clocks did.
  return std::clamp(store_us - best, sent_us, received_us);
}

void HotTenants::on_lease(Entry &e, LeaseResult &&res) {
  int64_t now = clock_.now_us();
  int64_t ran_at = res.decided ? executed_at(res.store_now_us, e.call_sent_us, now) : 0;
  LeaseWaiter *waiters;
  EntryRef keep;
  {
    std::lock_guard lock(e.mu);
    e.calling = false;
    const LeaseOp &c = e.call;
    // A failed call is taken to have given back what it carried: given back twice would credit tokens
    // that were spent; never given back, they stay debited (the tenant's loss) and slots heal after ttl_s.
    // Counted when it reached Redis (one refused at once, the breaker open or too many waiting, did not).
    if (res.decided || !(res.reason == FailReason::breaker || res.reason == FailReason::overload))
      metrics_.lease(LeaseCounter::lease_calls);
    if (res.decided) {
      if (c.give_back_m > 0) metrics_.lease(LeaseCounter::tokens_given_back, c.give_back_m / 1'000'000);
      if (!c.released.empty()) metrics_.lease(LeaseCounter::slots_given_back, c.released.size());
      if (res.controlled) {
        // The tenant has a control record (a block, a tier, an override) that each admit reads: exact.
        e.known = false;
        e.exact_until_us = now + kControlledHoldUs;
      } else if ((c.tokens || c.give_back_m > 0) && ran_at >= e.known_at_us) {
        e.known = true;
        e.known_at_us = ran_at;
        e.left_m = res.tokens_m;
        e.jitter = rng_.next_unit();
      }
      if (c.tokens && res.granted_m > 0) {
        e.lease_m += res.granted_m;
        e.lease_until_us = e.call_sent_us + policy_.request_rate->lease->ttl_ms * 1000;
        metrics_.lease(LeaseCounter::tokens_leased, res.granted_m / 1'000'000);
      }
      if (c.slots) {
        int64_t until = e.call_sent_us + policy_.concurrency->lease->ttl_ms * 1000;
        for (int64_t i = 0; i < res.slots && i < static_cast<int64_t>(c.wanted.size()); i++)
          e.add_free(c.wanted[static_cast<size_t>(i)], until);
        e.live_known = res.conc_count;
        if (res.conc_count >= c.conc_limit) e.full_until_us = now + kFullHoldUs;
        metrics_.lease(LeaseCounter::slots_leased, static_cast<uint64_t>(std::max<int64_t>(0, res.slots)));
      }
    }
    waiters = e.waiters;
    e.waiters = nullptr;
    keep = std::move(e.self);
  }
  FailReason failure = res.decided ? FailReason::none : res.reason == FailReason::none ? FailReason::error : res.reason;
  for (LeaseWaiter *w = waiters; w;) {
    LeaseWaiter *next = w->next;  // a woken waiter may wait again at once
    w->failure = failure;
    w->wake();
    w = next;
  }
}

void HotTenants::learn(Entry &e, const AdmitOp &op, const AdmitResult &r, int64_t sent_us) {
  if (!token_leases_ || !op.rate || !r.decided || r.in_process || r.blocked || r.other_tier || r.rate_m > 0) return;
  std::lock_guard lock(e.mu);
  if (sent_us < e.known_at_us) return;  // a lease call sent later said more recent things
  e.known = true;
  e.known_at_us = sent_us;
  e.left_m = r.tokens_m;
  e.rate_m = op.rate_m;
  e.burst_m = op.burst_m;
}

// ------------------------------------------------------------------------------- what goes back

void HotTenants::release_slot(const TenantKey &tenant, const SlotId &id, int64_t until_us) {
  int64_t now = clock_.now_us();
  EntryRef e = find(tenant);
  if (!e || stopped_.load(std::memory_order_relaxed)) {
    // Its tenant is cold here now (or the client is closing): an ordinary release.
    ReleaseOp op;
    op.tenant = tenant;
    op.slot = id;
    op.conc = true;
    store_.release(op);
    return;
  }
  {
    std::lock_guard lock(e->mu);
    if (e->slots_in_use > 0) e->slots_in_use--;
    if (now < until_us)
      e->add_free(id, until_us);
    else
      e->to_release.push_back(id);  // its lease ended: back to Redis with the next batch
  }
  metrics_.lease(LeaseCounter::releases_in_process);
}

// What an entry holds and no longer may (everything: all it holds) goes back in one call, answered by
// nobody.
void HotTenants::give_back(Entry &e, int64_t now, bool everything) {
  LeaseOp op;
  {
    std::lock_guard lock(e.mu);
    if (e.lease_m > 0 && (everything || now >= e.lease_until_us)) {
      op.give_back_m = e.lease_m;
      e.lease_m = 0;
    }
    e.expire_free(now, everything);
    if (!op.gives_back() && e.to_release.empty()) return;
    op.released.swap(e.to_release);
    op.tenant = e.tenant;
    op.rate_m = e.rate_m;
    op.burst_m = e.burst_m;
  }
  metrics_.lease(LeaseCounter::give_backs);
  if (op.give_back_m > 0) metrics_.lease(LeaseCounter::tokens_given_back, op.give_back_m / 1'000'000);
  if (!op.released.empty()) metrics_.lease(LeaseCounter::slots_given_back, op.released.size());
  store_.end_lease(op);
}

}  // namespace floodwall
