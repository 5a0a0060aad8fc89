// What wakes an acquire waiting for a concurrency slot on Redis, one node or through Sentinel
// (docs/concepts/acquire.md). A release of a tenant's slot publishes on the tenant's channel,
// <prefix>:{<tenant>}:freed (lua/release.lua). Each client has one subscriber connection, on a thread of its
// own, made when an acquire first waits: it is subscribed to the channels of the tenants this process's
// acquires wait for, and each message (and each confirmed subscription, after which a release cannot be
// missed) moves the tenant's slot signal (util/slot_signals.hpp), which wakes the head of that tenant's line.
// Nothing is polled: the thread sleeps on the socket and on an eventfd that a new subscription rings. A lost
// message (the connection dropped, a failover, a slot that expired in a dead process) is covered by the
// waiter's bounded re-check (Guard::wait_for_slot: one try after kRecheckMs without news).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "stores/redis/connection.hpp"
#include "stores/redis/url.hpp"
#include "util/slot_signals.hpp"
#include "util/wake_fds.hpp"

namespace floodwall {

class SlotNotices {
 public:
  // Where to connect (the master, and its generation); whether that generation is still the master's.
  using Target = std::function<bool(RedisEndpoint &to, uint64_t &generation)>;
  using Current = std::function<bool(uint64_t generation)>;
  SlotNotices(Target target, Current current, std::vector<std::string> setup, const TlsContext *tls,
              int64_t connect_timeout_ms);
  ~SlotNotices();
  SlotNotices(const SlotNotices &) = delete;
  SlotNotices &operator=(const SlotNotices &) = delete;

  const SlotSignals &signals() const { return words_.signals(); }
  // An acquire begins (on) or ends (off) waiting on `channel`; `hash` picks its word. Subscribed while any
  // waits; the thread starts with the first.
  void watch(const std::string &channel, uint64_t hash, bool on);
  // A forked child: the parent's thread is not here, and its socket is the parent's.
  void abandon_after_fork();

 private:
  void run();
  bool connect(uint64_t &generation);
  bool sync_subscriptions();  // mu_ held
  void on_reply(redisReply *r);
  void ring();

  Target target_;
  Current current_;
  std::vector<std::string> setup_;
  const TlsContext *tls_;
  int64_t connect_timeout_ms_;
  LocalSlotSignals words_;

  std::mutex mu_;
  struct Channel {
    uint64_t hash = 0;
    int waiters = 0;
  };
  std::map<std::string, Channel, std::less<>> wanted_;       // mu_
  std::map<std::string, uint64_t, std::less<>> subscribed_;  // the thread's: what the connection is subscribed to
  std::unique_ptr<Connection> conn_;                         // the thread's
  WakeFds wake_;
  bool stop_ = false;  // mu_
  std::thread thread_;
  bool abandoned_ = false;
};

}  // namespace floodwall
