// The subscriber of a Redis store's slot notices: see slot_notices.hpp.
#include "stores/redis/slot_notices.hpp"

#include <hiredis/hiredis.h>
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <string_view>

#include "stores/redis/redis_store_internal.hpp"
#include "stores/redis/resp.hpp"
#include "util/clock.hpp"
#include "util/errors.hpp"

namespace floodwall {

namespace {
int64_t steady_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
std::string_view str(const redisReply *r) {
  return r && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS) ? std::string_view(r->str, r->len)
                                                                               : std::string_view();
}
}  // namespace

SlotNotices::SlotNotices(Target target, Current current, std::vector<std::string> setup, const TlsContext *tls,
                         int64_t connect_timeout_ms)
    : target_(std::move(target)),
      current_(std::move(current)),
      setup_(std::move(setup)),
      tls_(tls),
      connect_timeout_ms_(connect_timeout_ms) {
  if (!wake_.open()) throw StoreError("store: no descriptor to wake the slot notices' thread (eventfd or pipe failed)");
}

SlotNotices::~SlotNotices() {
  if (abandoned_) return;
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  ring();
  if (thread_.joinable()) thread_.join();
  wake_.close();
}

void SlotNotices::abandon_after_fork() {
  abandoned_ = true;
  if (conn_) (void)conn_.release()->fd();  // the parent's socket: never touched (closed by the fd table)
  if (thread_.joinable()) thread_.detach();
}

void SlotNotices::ring() {
  wake_.ring();
}

void SlotNotices::watch(const std::string &channel, uint64_t hash, bool on) {
  {
    std::lock_guard lock(mu_);
    auto it = wanted_.find(channel);
    if (on) {
      if (it == wanted_.end()) it = wanted_.emplace(channel, Channel{hash, 0}).first;
      if (++it->second.waiters > 1) return;  // subscribed, or being subscribed, for another waiter
    } else {
      if (it == wanted_.end() || --it->second.waiters > 0) return;
      wanted_.erase(it);
    }
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  }
  ring();
}

bool SlotNotices::connect(uint64_t &generation) {
  RedisEndpoint to;
  if (!target_(to, generation)) return false;
  auto c = std::make_unique<Connection>();
  int64_t deadline = steady_us() + connect_timeout_ms_ * 1000;
  if (!c->connect_blocking(to, tls_, deadline)) return false;
  for (const std::string &cmd : setup_) {
    redisReply *r = c->roundtrip(cmd, deadline);
    bool ok = r && r->type != REDIS_REPLY_ERROR;
    if (r) freeReplyObject(r);
    if (!ok) return false;
  }
  conn_ = std::move(c);
  subscribed_.clear();
  return true;
}

// Subscribes to what is wanted and not subscribed, and unsubscribes from what is no longer wanted (the
// confirmations come as replies, read by the loop). False when the connection broke.
bool SlotNotices::sync_subscriptions() {
  std::vector<std::string> add, drop;
  for (const auto &[ch, c] : wanted_)
    if (subscribed_.emplace(ch, c.hash).second) add.push_back(ch);
  for (auto it = subscribed_.begin(); it != subscribed_.end();) {
    if (wanted_.count(it->first)) {
      ++it;
      continue;
    }
    drop.push_back(it->first);
    it = subscribed_.erase(it);
  }
  std::string cmd;
  for (auto [verb, names] : {std::pair{"SUBSCRIBE", &add}, std::pair{"UNSUBSCRIBE", &drop}}) {
    if (names->empty()) continue;
    std::vector<std::string_view> args{verb};
    args.insert(args.end(), names->begin(), names->end());
    cmd += resp_format(args);
  }
  return cmd.empty() || conn_->send_blocking(cmd, steady_us() + connect_timeout_ms_ * 1000);
}

// ["message", channel, ""]: a slot of the channel's tenant was freed. ["subscribe", channel, n]: from now on
// no release on it is missed, so the waiters try again (one may have come before).
void SlotNotices::on_reply(redisReply *r) {
  if (r->type != REDIS_REPLY_ARRAY) return;
  if (r->elements < 2) return;
  std::string_view kind = str(r->element[0]);
  if (kind != "message" && kind != "subscribe") return;
  auto it = subscribed_.find(str(r->element[1]));
  if (it != subscribed_.end()) words_.signals().bump(it->second);
}

void SlotNotices::run() {
  uint64_t generation = 0;
  int64_t retry_us = 100'000;
  std::unique_lock lock(mu_);
  while (!stop_) {
    if (conn_ && !current_(generation)) conn_.reset();  // the master moved: subscribe on the new one
    if (!conn_ && !wanted_.empty()) {
      lock.unlock();
      bool up = connect(generation);
      lock.lock();
      if (!up) {
        conn_.reset();
        lock.unlock();
        pollfd w{wake_.read_fd, POLLIN, 0};
        (void)poll(&w, 1, static_cast<int>(retry_us / 1000));  // a closing client rings
        lock.lock();
        retry_us = std::min<int64_t>(retry_us * 2, 1'000'000);
        continue;
      }
      retry_us = 100'000;
    }
    if (conn_ && !sync_subscriptions()) conn_.reset();
    // Asleep until a message, a new subscription (the eventfd), or a second (a failover's new master);
    // with no connection and nothing wanted, until the eventfd.
    int timeout_ms = conn_ || !wanted_.empty() ? 1000 : -1;
    lock.unlock();
    pollfd fds[2] = {{wake_.read_fd, POLLIN, 0}, {conn_ ? conn_->fd() : -1, POLLIN, 0}};
    int n = poll(fds, 2, timeout_ms);
    if (n > 0 && (fds[0].revents & POLLIN)) {
      uint64_t v;
      (void)!read(wake_.read_fd, &v, sizeof v);
    }
    bool broken = false;
    if (n > 0 && conn_ && fds[1].revents) {
      broken = !conn_->read();
      redisReply *r = nullptr;
      while (!broken && conn_->next_reply(&r) == 1) {
        on_reply(r);
        freeReplyObject(r);
      }
    }
    lock.lock();
    if (broken) conn_.reset();  // every waiter re-checks on its bound; the subscriptions are made again
  }
  conn_.reset();
}

// ------------------------------------------------------------------ the store's side

const SlotSignals *RedisIo::slot_signals() const {
  return notices_ ? &notices_->signals() : nullptr;
}

void RedisIo::watch_slots(std::string_view tenant_key, bool on) {
  if (!notices_ || in_forked_child()) return;
  std::string channel;
  RedisStore::tenant_key_into(channel, prefix_, TenantKey::from_canonical(tenant_key), "freed");
  notices_->watch(channel, SlotSignals::hash(tenant_key), on);
}

const SlotSignals *RedisStore::slot_signals() const {
  return io_->slot_signals();
}

void RedisStore::watch_slots(std::string_view tenant_key, bool on) {
  io_->watch_slots(tenant_key, on);
}

}  // namespace floodwall
