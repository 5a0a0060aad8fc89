// The Redis store's I/O thread: the loop, dispatch over lanes, deadlines, the breaker's view.
#include <hiredis/hiredis.h>
#include <poll.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "stores/redis/redis_store_internal.hpp"
#include "stores/redis/resp.hpp"

namespace floodwall {

void RedisIo::fail_call(Call *c, FailReason why) {
  if (c->kind == Kind::admit && c->done) {
    failures_[static_cast<size_t>(why)].fetch_add(1, std::memory_order_relaxed);
    AdmitResult r;
    r.reason = why;
    complete(c, std::move(r));
  } else if (c->kind == Kind::lease && c->lease_done) {
    failures_[static_cast<size_t>(why)].fetch_add(1, std::memory_order_relaxed);
    LeaseResult r;
    r.reason = why;
    complete_lease(c, std::move(r));
  } else if (c->kind == Kind::report && c->report_done) {
    FleetReportCompletion *done = c->report_done;
    c->report_done = nullptr;
    done->complete(FleetReportResult{});
  } else if (gives_back(c->kind)) {
    release_errors_.fetch_add(1, std::memory_order_relaxed);
  }
}

void RedisIo::complete(Call *c, AdmitResult &&r) {
  bp_.waiting.fetch_sub(1, std::memory_order_relaxed);
  AdmitCompletion *done = c->done;
  c->done = nullptr;
  done->complete(std::move(r));
}

void RedisIo::complete_lease(Call *c, LeaseResult &&r) {
  bp_.waiting.fetch_sub(1, std::memory_order_relaxed);
  LeaseCompletion *done = c->lease_done;
  c->lease_done = nullptr;
  done->complete(std::move(r));
}

void RedisIo::trip(FailReason why, int64_t now) {
  breaker_.trip(now);
  for (Conn &conn : conns_) {
    for (Call *c : conn.inflight) {
      if (c->abandoned || !(awaited(c->kind) || c->kind == Kind::report)) continue;
      c->abandoned = true;  // its reply, if it ever comes, is read and dropped
      fail_call(c, why);
    }
  }
}

bool RedisIo::any_ready() const {
  for (const Conn &conn : conns_)
    if (conn.state == Conn::State::ready) return true;
  return false;
}

bool RedisIo::any_answering(int64_t since_us) const {
  // The callers' own connections (the direct path) count too: while they get replies, Redis answers.
  if (direct_.read_since(since_us)) return true;
  for (const Conn &conn : conns_)
    if (conn.state == Conn::State::ready && conn.last_read_us > since_us) return true;
  return false;
}

void RedisIo::send_probe(int64_t now) {
  for (Conn &conn : conns_) {
    if (conn.state != Conn::State::ready) continue;
    if (!breaker_.probe_due(now)) return;
    tl_cmd = resp_format({"PING"});
    // The probe may take the whole open period: it asks whether Redis answers at all, not how fast.
    append(conn, take_call(Kind::probe, now + std::max<int64_t>(opt_.breaker_open_ms, opt_.deadline_ms) * 1000));
    return;
  }
}

void RedisIo::measure(int64_t now) {
  int64_t elapsed = now - bp_.rate_since_us;
  if (elapsed < Backpressure::kRateWindowUs) return;
  if (bp_.replies > 0 || bp_.waiting.load(std::memory_order_relaxed) > 0) {
    double sample = static_cast<double>(bp_.replies) * 1e6 / static_cast<double>(elapsed);
    bp_.reply_rate = bp_.reply_rate == 0 ? sample : 0.7 * bp_.reply_rate + 0.3 * sample;
  }
  bp_.replies = 0;
  bp_.rate_since_us = now;
  // Far from the deadline there is nothing to bound: a rate measured below saturation says what callers
  // asked for, not what Redis could answer.
  int64_t cap = INT64_MAX;
  if (bp_.latency_us >= static_cast<double>(deadline_us_) / 4)
    cap = std::max<int64_t>(Backpressure::kMinWaiting,
                            static_cast<int64_t>(bp_.reply_rate * static_cast<double>(deadline_us_) / 1e6));
  bp_.cap.store(cap, std::memory_order_relaxed);
}

void RedisIo::dispatch(Call *c, int64_t now) {
  // One tenant's calls always take the same connection (while it is up and the lanes stay), so that a
  // release followed by an admit of that tenant reaches Redis in that order.
  size_t first = c->affinity % lanes_;
  for (size_t i = 0; i < conns_.size(); i++) {
    Conn &conn = conns_[(first + i) % conns_.size()];
    if (conn.state == Conn::State::ready) {
      append(conn, c);
      return;
    }
  }
  if (c->kind == Kind::release) {
    keep_release(c);
    return;
  }
  // No connection is up: the breaker opens (unless the master just changed and the new one is being
  // connected to); a deployment the server refused says config.
  if (awaited(c->kind) && now >= switch_grace_until_us_) breaker_.trip(now);
  fail_call(c, refused_.load(std::memory_order_relaxed) ? FailReason::config : FailReason::connection);
  recycle(c);
}

void RedisIo::keep_release(Call *c) {
  if (unsent_.size() >= 65536) {
    release_errors_.fetch_add(1, std::memory_order_relaxed);
    recycle(c);
    return;
  }
  c->abandoned = false;
  unsent_.push_back(c);
}

RedisIo::Call *RedisIo::copy_release(const Call *c) {
  tl_cmd = c->cmd;
  Call *n = take_call(Kind::release, now_us() + patient_us());
  n->affinity = c->affinity;
  return n;
}

void RedisIo::choose_lanes(bool several, int64_t now) {
  next_lane_check_us_ = now + kLaneWindowUs;
  size_t want = lanes_;
  if (several) {
    single_windows_ = 0;
    want = conns_.size();
  } else {
    single_windows_ = std::min(single_windows_ + 1, kSingleWindows);
    if (single_windows_ == kSingleWindows) want = 1;
  }
  if (want == lanes_ || lanes_wanted_ != lanes_ || now < retry_lanes_at_us_) return;
  lanes_wanted_ = want;
  for (Conn &conn : conns_) conn.drain_to = conn.releases_sent;
  // The calls that move wait at most half their deadline for the releases ahead of them.
  switch_by_us_ = now + deadline_us_ / 2;
}

void RedisIo::settle_lanes(std::vector<Call *> &batch, int64_t now) {
  bool drained = true;
  for (const Conn &conn : conns_) drained = drained && conn.releases_done >= conn.drain_to;
  if (drained) {
    lanes_ = lanes_wanted_;
    lanes_in_use_.store(static_cast<uint32_t>(lanes_), std::memory_order_relaxed);
    give_ups_ = 0;
  } else if (now < switch_by_us_ && !stop_.load(std::memory_order_relaxed)) {
    return;  // still draining
  } else {
    // The releases did not come back in time (a stalled Redis, a deep pipeline): stay, and try again
    // after 2, 4, ... 64 windows, so that a change that cannot happen does not hold calls every window.
    lanes_wanted_ = lanes_;
    give_ups_ = std::min(give_ups_ + 1, 6);
    retry_lanes_at_us_ = now + (kLaneWindowUs << give_ups_);
  }
  batch.insert(batch.begin(), parked_.begin(), parked_.end());
  parked_.clear();
}

void RedisIo::expire(int64_t now) {
  bool silent_admit = false;
  int64_t silent_since = INT64_MAX;  // when the oldest call that got no byte back was sent
  for (Conn &conn : conns_) {
    if (conn.state == Conn::State::connecting && now >= conn.connect_deadline_us) {
      fail_conn(conn, FailReason::timeout, now);
      continue;
    }
    if (conn.state != Conn::State::ready) continue;
    bool due = false;
    for (const Call *c : conn.inflight) due = due || (!c->abandoned && c->deadline_us <= now);
    if (!due) continue;
    // Before judging, take what arrived while this loop was busy elsewhere: silence is Redis', not ours.
    {
      const size_t before = conn.inflight.size();
      read(conn, now);
      if (conn.state != Conn::State::ready) continue;
      if (conn.inflight.size() != before) conn.quiet_since_us = conn.last_read_us = now;
    }
    // A call that missed its deadline while replies kept arriving was late because of the queue; one
    // that got no reply byte on its connection since it was sent, for its whole deadline, was not
    // answered at all. (Per call: a call is sent a little after its deadline starts, at submit.)
    bool probe_lost = false;
    for (Call *c : conn.inflight) {
      if (c->abandoned || c->deadline_us > now) continue;
      c->abandoned = true;  // its reply, if it ever comes, is read and dropped
      bool quiet = conn.quiet_since_us <= c->appended_us;
      if (awaited(c->kind)) {
        if (quiet) {
          breaker_.record(true, now);
          silent_admit = true;
          silent_since = std::min(silent_since, c->appended_us);
        }
        fail_call(c, FailReason::timeout);
      } else if (c->kind == Kind::release) {
        keep_release(copy_release(c));
      } else if (gives_back(c->kind) || c->kind == Kind::report) {
        fail_call(c, FailReason::timeout);
      } else if (c->kind == Kind::probe) {
        breaker_.probe_result(false, now);
        probe_lost = true;
      }
    }
    // A connection that answers nothing for the whole open period, not even a probe, is dropped: a
    // half-open socket never recovers, and a new connection to a Redis that is back answers at once.
    if (probe_lost || silent(conn, now, std::max<int64_t>(opt_.breaker_open_ms, opt_.deadline_ms) * 1000))
      fail_conn(conn, FailReason::timeout, now);
  }
  // Redis answered nothing sent since: it went silent, and nobody waits for it any more.
  if (silent_admit && !any_answering(silent_since)) trip(FailReason::timeout, now);
}

bool RedisIo::closing_drained(int64_t now, int64_t &drain_until) {
  // Closing: send what callers already queued (releases above all) and wait briefly for the replies, so
  // that a process that exits cleanly leaves no slot held.
  if (drain_until == 0) drain_until = now + std::max<int64_t>(200, opt_.deadline_ms) * 1000;
  bool pending;
  {
    std::lock_guard lock(queue_mu_);
    (void)release_held();  // closing: a hold that was never flushed ends here
    pending = !queue_.empty() || !parked_.empty() || !try_again_.empty();
  }
  for (Conn &conn : conns_)
    for (Call *c : conn.inflight)
      pending = pending || (!c->abandoned && c->kind != Kind::flags && c->kind != Kind::probe);
  return !pending || now >= drain_until;
}

void RedisIo::reconnect_due(int64_t now) {
  if (sentinel_) drop_stale_masters(now);
  for (Conn &conn : conns_)
    if (conn.state == Conn::State::down && now >= conn.reconnect_at_us) start_connect(conn, now);
}

int64_t RedisIo::take_queue(std::vector<Call *> &batch, int64_t now) {
  bool window_over = now >= next_lane_check_us_, several = false, idle = false;
  int64_t held_until = INT64_MAX;  // when the calls held now must go out, flushed or not
  {
    std::lock_guard lock(queue_mu_);
    // A hold is a turn of an event loop, flushed at its end; calls held longer than redis.batch_window_us
    // go out without it (a long turn, a loop that stopped before its flush ran).
    if (!held_.empty() && now - held_.front()->held_us >= opt_.batch_window_us) (void)release_held();
    if (!held_.empty()) held_until = held_.front()->held_us + opt_.batch_window_us;
    batch.swap(queue_);
    if (window_over) {
      several = submitter_changes_ >= kSeveralChanges;
      idle = last_submitter_ == nullptr;
      submitter_changes_ = 0;
      last_submitter_ = nullptr;
    }
  }
  if (window_over) {
    if (idle)
      next_lane_check_us_ = now + kLaneWindowUs;  // no caller: the lanes stay as they are
    else
      choose_lanes(several, now);
  }
  return held_until;
}

void RedisIo::resend_waiting(std::vector<Call *> &batch, int64_t now) {
  if (!unsent_.empty() && breaker_.closed() && any_ready() && lanes_wanted_ == lanes_ && now >= unsent_at_us_) {
    std::deque<Call *> again;
    again.swap(unsent_);
    for (Call *c : again) {
      c->deadline_us = now + patient_us();
      dispatch(c, now);
    }
  }
  if (try_again_at_us_ && now >= try_again_at_us_) {
    try_again_at_us_ = 0;
    batch.insert(batch.begin(), try_again_.begin(), try_again_.end());
    try_again_.clear();
  }
}

void RedisIo::dispatch_batch(std::vector<Call *> &batch, int64_t now) {
  for (Call *c : batch) {
    if (c->kind == Kind::release && !breaker_.closed()) {
      keep_release(c);
    } else if ((awaited(c->kind) || c->kind == Kind::report) && !breaker_.closed()) {  // just before it opened
      fail_call(c, open_reason());
      recycle(c);
    } else if (lanes_wanted_ != lanes_ && moves(c))
      parked_.push_back(c);
    else
      dispatch(c, now);
  }
  batch.clear();
}

void RedisIo::read_flags_due(int64_t now) {
  if (cluster_ || now < next_flags_us_) return;
  next_flags_us_ = now + opt_.flags_poll_ms * 1000;
  if (breaker_.closed()) {
    tl_cmd = resp_format({"EVALSHA", scripts_.flags.sha, "1", flags_key()});
    dispatch(take_call(Kind::flags, now + patient_us()), now);
  }
}

int64_t RedisIo::wait_for_events(std::vector<pollfd> &fds, int64_t held_until, int64_t now) {
  // Sleep until something happens or the nearest deadline.
  int64_t wake_at = cluster_ ? now + 100'000 : std::min(next_flags_us_, now + 100'000);
  if (any_ready()) wake_at = std::min(wake_at, breaker_.next_probe_us());
  if (lanes_wanted_ != lanes_) wake_at = std::min(wake_at, switch_by_us_);
  if (try_again_at_us_) wake_at = std::min(wake_at, try_again_at_us_);
  wake_at = std::min(wake_at, held_until);
  fds.clear();
  fds.push_back({wake_fd_, POLLIN, 0});
  for (Conn &conn : conns_) {
    if (conn.state == Conn::State::down) {
      wake_at = std::min(wake_at, conn.reconnect_at_us);
      fds.push_back({-1, 0, 0});
      continue;
    }
    short ev = conn.link->events(conn.state == Conn::State::ready && should_flush(conn));
    fds.push_back({conn.link->fd(), ev, 0});
    if (conn.state == Conn::State::connecting) wake_at = std::min(wake_at, conn.connect_deadline_us);
    for (Call *c : conn.inflight)
      if (!c->abandoned) wake_at = std::min(wake_at, c->deadline_us);
  }
  int64_t wait_us = std::max<int64_t>(0, wake_at - now);
  timespec timeout{static_cast<time_t>(wait_us / 1'000'000), static_cast<long>(wait_us % 1'000'000) * 1000};
  ppoll(fds.data(), fds.size(), &timeout, nullptr);
  return now_us();
}

void RedisIo::serve_events(const std::vector<pollfd> &fds, int64_t now) {
  if (fds[0].revents & POLLIN) {
    uint64_t n;
    (void)!::read(wake_fd_, &n, sizeof n);
  }
  for (size_t i = 0; i < conns_.size(); i++) {
    Conn &conn = conns_[i];
    short rev = fds[i + 1].revents;
    if (conn.state == Conn::State::down || !rev) continue;
    if (conn.state == Conn::State::connecting) {
      // The TCP connect, then the TLS handshake: a step each time the socket is ready.
      Connection::Step step = conn.link->advance();
      if (step == Connection::Step::failed)
        fail_conn(conn, conn.link->failure(), now);
      else if (step == Connection::Step::done)
        on_connected(conn, now);
      continue;
    }
    if (rev & POLLIN) conn.quiet_since_us = conn.last_read_us = now;
    if (rev & (POLLIN | POLLERR | POLLHUP)) read(conn, now);
    if (conn.state == Conn::State::ready && (rev & POLLOUT)) flush(conn, now);
  }
}

void RedisIo::fail_everything_left() {
  // Shutting down: nobody may wait forever on a call of ours.
  std::vector<Call *> batch;
  {
    std::lock_guard lock(queue_mu_);
    (void)release_held();
    batch.swap(queue_);
  }
  batch.insert(batch.begin(), parked_.begin(), parked_.end());
  parked_.clear();
  batch.insert(batch.end(), unsent_.begin(), unsent_.end());
  unsent_.clear();
  batch.insert(batch.end(), try_again_.begin(), try_again_.end());
  try_again_.clear();
  for (Call *c : batch) {
    fail_call(c, FailReason::connection);
    recycle(c);
  }
  for (Conn &conn : conns_) {
    for (Call *c : conn.inflight) {
      if (!c->abandoned) fail_call(c, FailReason::connection);
      recycle(c);
    }
    conn.inflight.clear();
    fds_.clear(conn_fd_slot(conn));
    conn.link->close();
  }
  return_spent();
}

// The I/O thread: each turn takes the queued calls, sends them over the lanes, polls, reads the replies and
// judges the deadlines; once stopped, it drains briefly and fails what is left.
void RedisIo::run() {
#ifdef __linux__
  // Wake at the deadline itself, not up to the default 50 us timer slack after it.
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
#endif
  tl_io_of = this;
  std::vector<Call *> batch;
  std::vector<pollfd> fds;
  int64_t drain_until = 0;
  for (;;) {
    int64_t now = now_us();
    if (stop_.load() && closing_drained(now, drain_until)) break;
    reconnect_due(now);
    return_spent();
    int64_t held_until = take_queue(batch, now);
    if (int64_t since = direct_.take_silent_since(); since && !any_answering(since)) trip(FailReason::timeout, now);
    if (lanes_wanted_ != lanes_) settle_lanes(batch, now);
    resend_waiting(batch, now);
    dispatch_batch(batch, now);
    read_flags_due(now);
    send_probe(now);
    measure(now);
    for (Conn &conn : conns_)
      if (conn.state == Conn::State::ready && should_flush(conn)) flush(conn, now);
    now = wait_for_events(fds, held_until, now);
    serve_events(fds, now);
    expire(now);
  }
  fail_everything_left();
}

}  // namespace floodwall
