// Acquire (docs/concepts/acquire.md): the admit of a request that waits for its turn instead of being
// refused. The Guard's reserve, acquire and reserve_async, and what a reservation keeps to be given back.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>

#include "engine/guard.hpp"
#include "util/token_bucket.hpp"

namespace floodwall {

// ------------------------------------------------------------------------------------------ acquire

// The wait an acquire's op is given: max_wait_s, capped at the tenant's bucket's full refill (burst / rate,
// the policy's: a runtime override does not move it) and at kMaxWaitNs. 0 when the request-rate limiter
// does not enforce (only the tenant's bucket waits): it is then decided as an admit.
int64_t Guard::wait_cap_ns(const AdmitOp &op, double max_wait_s) {
  int64_t refill = op.rate && op.rate_enforce ? bucket_refill_ns(op.rate_m, op.burst_m) : 0;
  double ns = max_wait_s * 1e9;
  int64_t cap = std::min(refill, kMaxWaitNs);
  return ns >= static_cast<double>(cap) ? cap : static_cast<int64_t>(ns);
}

void Guard::check_max_wait(double max_wait_s) {
  if (!std::isfinite(max_wait_s) || max_wait_s < 0)
    throw BadRequest("max_wait: must be a finite number of seconds, 0 or more (got " + std::to_string(max_wait_s) +
                     ")");
}

Decision Guard::reserve(const Request &rq, double max_wait_s) {
  check_max_wait(max_wait_s);
  for (int attempt = 0;; attempt++) {
    Prepared p;
    prepare(rq, p);
    // Decided by the store, exactly: a hot tenant's lease never holds a reservation.
    p.op.max_wait_ns = wait_cap_ns(p.op, max_wait_s);
    bool asks = !p.shed && p.op.asks();
    AdmitResult r = asks ? store_->admit(p.op) : AdmitResult{};
    if (r.other_tier && attempt < kTierAttempts) {
      learn_tier(p.op.tenant, r.tier);  // nothing was consumed: decide again in that tier
      drop_adaptive(p);
      continue;
    }
    return finish(p, r);
  }
}

// Sleeps out the wait the store gave (never polls it): the caller goes at its turn, or a little after it
// (the decision's own time), never before. A request refused only for a concurrency slot waits for a
// release first (wait_for_slot), then takes its turn of the buckets with what is left of max_wait.
Decision Guard::acquire(const Request &rq, double max_wait_s) {
  check_max_wait(max_wait_s);
  const SlotSignals *signals = max_wait_s > 0 ? store_->slot_signals() : nullptr;
  Decision d;
  if (signals) {
    auto deadline = std::chrono::steady_clock::now() +
                    std::chrono::nanoseconds(static_cast<int64_t>(std::min(max_wait_s, kMaxWaitNs / 1e9) * 1e9));
    TenantKey key;
    key.assign(rq.tenant);
    std::string tenant(key.view());
    uint32_t seen = signals->seen(SlotSignals::hash(tenant));  // before the try: a release after it wakes
    // A line of this tenant in this process: behind it, first come, first served.
    d = slot_line_.has_line(tenant) ? Decision{} : reserve(rq, max_wait_s);
    if (!d.allowed && (d.status == 0 || refused_for_slot(d)))
      d = wait_for_slot(rq, *signals, tenant, deadline, seen, d);
  } else {
    d = reserve(rq, max_wait_s);
  }
  if (d.allowed && d.wait_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(d.wait_us));
  d.waiting = false;
  if (d.ticket) turn_came(d);
  return d;
}

// Refused by the concurrency limiter alone (the buckets and rules passed, nothing was taken): a slot's release
// may admit it. The store decided (not the fallback, whose table no other process releases into).
bool Guard::refused_for_slot(const Decision &d) {
  return !d.allowed && d.status == 429 && d.limiter == Limiter::concurrency && !d.degraded && !d.failed_open;
}

// Waits in this process's line of the tenant; its head tries the store, and between tries sleeps on the
// tenant's slot signal (moved by a release, in this process or another), until the deadline. Nothing is held
// while waiting: a try that is refused took nothing, so no token is reserved (and burnt) ahead of the slot.
// The try that gets the slot reserves its turn of the buckets with what is left of max_wait, as one admit.
// At most one try per kSlotRecheckUs without a release. A time-out answers the last refusal (or, for one that never was
// the head, a refusal by the concurrency limiter).
Decision Guard::wait_for_slot(const Request &rq, const SlotSignals &signals, const std::string &tenant,
                              std::chrono::steady_clock::time_point deadline, uint32_t seen, Decision last) {
  uint64_t h = SlotSignals::hash(tenant);
  SlotLine::Place place(slot_line_, tenant);
  struct Watch {  // subscribed (a Redis store) while this acquire waits
    Store &store;
    const std::string &tenant;
    ~Watch() { store.watch_slots(tenant, false); }
  } watch{*store_, tenant};
  store_->watch_slots(tenant, true);
  auto left = [&] {
    return std::chrono::duration_cast<std::chrono::microseconds>(deadline - std::chrono::steady_clock::now()).count();
  };
  for (bool tried = last.status != 0;;) {
    if (!place.wait_head(deadline)) break;
    // Asleep until a release of the tenant's slot moves its word (at once when one did since `seen`, read
    // before the last try); with no news for kSlotRecheckUs, one more try all the same (a lost notice: a
    // dropped subscriber, a failover, a slot that expired in a dead process). So a waiting process asks the
    // store at most once a second per tenant without a release.
    if (tried) (void)signals.wait(h, seen, std::min<int64_t>(left(), kSlotRecheckUs));
    seen = signals.seen(h);
    if (left() <= 0) break;
    last = reserve(rq, static_cast<double>(left()) / 1e6);
    tried = true;
    if (!refused_for_slot(last)) return last;
  }
  if (last.status == 0) {  // never tried: refused as the concurrency limiter refuses
    last = reserve(rq, 0);
    if (last.allowed) return last;  // a slot came free at the deadline
  }
  return last;
}

// Guard::acquire has waited out the turn: nothing is given back any more, and a ticket that held only the
// reservation holds nothing (0, as an admit's that holds no slot).
void Guard::turn_came(Decision &d) {
  auto &shard = tickets_[d.ticket % kTicketShards];
  std::lock_guard lock(shard.mu);
  auto it = shard.held.find(d.ticket);
  if (it == shard.held.end()) return;
  TicketHold &h = it->second;
  h.give_back_full_at_ns = 0;
  if (!(h.conc || h.fleet || h.in_flight || h.leased || h.fleet_in_process || h.adaptive_slot)) {
    shard.held.erase(it);
    d.ticket = 0;
  }
}

bool Guard::reserve_async(const Request &rq, double max_wait_s, AdmitDone done) {
  check_max_wait(max_wait_s);
  return submit_async(rq, std::move(done), max_wait_s);
}

// What an allowed reservation that waits keeps in its ticket, to give its tokens back when its caller
// releases it before its turn: the tenant's bucket's full instant as the reservation left it, and its cost.
// The store moved the bucket to max(debt, turn) + cost (taken_debt_ns), where turn = debt + cost - refill,
// so that instant is its now + turn + max(refill, cost). A turn the store rounded up to 1 ns does not match
// that, and is never given back (nothing breaks: the tokens are repaid by the refill before the turn).
void Guard::reservation(const AdmitOp &op, const AdmitResult &r, int64_t rate_m, int64_t burst_m, int64_t wait_us,
                        TicketHold &h) {
  int64_t cost_ns = bucket_cost_ns(rate_m, op.cost_m);
  h.give_back_full_at_ns = r.store_now_us * 1000 + r.wait_ns + std::max(bucket_refill_ns(rate_m, burst_m), cost_ns);
  h.give_back_cost_ns = cost_ns;
  // The caller's turn on this process's clock, from when the decision is made here (after the store's).
  h.turn_local_us = clock_.now_us() + wait_us;
}

}  // namespace floodwall
