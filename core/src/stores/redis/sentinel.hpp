// redis+sentinel:// (and rediss+sentinel://): which server is the master now. A thread of its own asks the
// sentinels (SENTINEL get-master-addr-by-name, each in turn from the last one that answered), keeps a
// subscription to +switch-master on one of them, and asks again when the store suspects the master (a
// broken connection, a READONLY reply, a ROLE that is not master) and every few seconds regardless. The
// store reads master() when it connects and reconnects whenever the generation moves.
//
// During a failover the sentinels may not agree: one that has not heard of it yet names the old master
// (down, or a replica by now). So a master the store suspected is doubted: the next ask starts from the
// sentinel after the one that named it, and a sentinel naming the doubted master again is passed over
// while another names a different one (said once: a contradiction). When every sentinel that answers names
// it, it is kept (a restart, a broken connection). A reply that is no address is said once (the sentinel,
// the command, its first 200 bytes) and the next sentinel is asked.
//
// What can go wrong is said once on stderr: no sentinel reachable (connection: the fallback decides,
// retried in the background), sentinels that refuse the password or do not know the master's name
// (config, naming it).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "stores/redis/url.hpp"
#include "stores/store.hpp"

struct redisReply;  // hiredis

namespace floodwall {

class Connection;
class TlsContext;

class SentinelWatch {
 public:
  struct Options {
    std::string user, password;  // what the sentinels are asked with (none: empty)
    int64_t connect_timeout_ms = 200;
    int64_t reask_ms = 5000;  // asked again this often even when nothing happened
  };
  // `on_change` runs on the watch's thread whenever the master changes (the store wakes its I/O thread).
  SentinelWatch(RedisUrl url, const TlsContext *tls, Options opt, std::function<void()> on_change);
  ~SentinelWatch();
  SentinelWatch(const SentinelWatch &) = delete;
  SentinelWatch &operator=(const SentinelWatch &) = delete;

  // The master as last named, and the generation it belongs to (moves at every change); nullopt before
  // any sentinel named one.
  std::optional<RedisEndpoint> master(uint64_t *generation = nullptr) const;
  uint64_t generation() const { return generation_.load(std::memory_order_acquire); }
  // Why there is no master to connect to: connection (no sentinel answered yet), config (they do not know
  // the name), none once one was named.
  FailReason unknown_reason() const { return static_cast<FailReason>(unknown_.load(std::memory_order_relaxed)); }
  // The master of `generation` did not behave as one: ask again now. Harmless when repeated.
  void suspect(uint64_t generation);
  // Waits (up to timeout_ms) until a master is known; true when one is.
  bool wait_known(int64_t timeout_ms) const;
  // Stops the thread (no more on_change calls); master() still answers. The destructor calls it.
  void stop();
  // In a forked child: the thread is the parent's (never joined or detached), its socket closed; the
  // owner then leaks this object.
  void abandon_after_fork();
  uint64_t changes() const { return changes_.load(std::memory_order_relaxed); }
  uint64_t asks() const { return asks_.load(std::memory_order_relaxed); }

 private:
  void run();
  // Asks the sentinels in turn; true when one named the master (set_master() then ran).
  bool ask();
  // A connection to sentinel i, authenticated: null when it cannot be made in time (`tls_error`, when
  // given, then says why if TLS failed: verification, or the sentinel refused our certificate).
  std::unique_ptr<Connection> open(size_t i, int64_t deadline_us, std::string *tls_error = nullptr);
  // Sentinel i named m: the master from now on, and i the sentinel asked first.
  void take(const RedisEndpoint &m, size_t i);
  void set_master(const RedisEndpoint &m);
  // Said once per sentinel: a reply that is no address; a sentinel naming the doubted master while
  // another names `other`.
  void say_malformed(size_t i, const redisReply *reply);
  void say_contradiction(size_t doubting, const RedisEndpoint &doubted, size_t other, const RedisEndpoint &named);
  void listen(int64_t until_us);  // +switch-master on the subscribed sentinel, until the time or a wake-up
  bool stopping_or_asked();
  bool master_known() const;

  RedisUrl url_;
  const TlsContext *tls_;
  Options opt_;
  std::function<void()> on_change_;

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::optional<RedisEndpoint> master_;
  std::optional<RedisEndpoint> doubted_;  // the master the store suspected (no master, or unreachable)
  bool stop_ = false;
  bool asked_ = true;  // ask at once
  std::atomic<uint64_t> generation_{0};
  std::atomic<uint8_t> unknown_{static_cast<uint8_t>(FailReason::connection)};
  std::atomic<uint64_t> changes_{0}, asks_{0};
  std::atomic<bool> said_unreachable_{false}, said_unknown_{false}, said_refused_{false};
  std::atomic<bool> auth_refused_{false};  // a sentinel refused the password during the current ask
  size_t next_ = 0;                        // the sentinel to ask first: the last one that answered
  size_t named_by_ = 0;                    // the sentinel that named the master now (the thread's)
  std::set<std::string> said_;             // the thread's: what was said once ("malformed 127.0.0.1:26379")
  std::unique_ptr<Connection> sub_;        // subscribed to +switch-master
  size_t sub_at_ = 0;                      // on this sentinel
  std::thread thread_;
};

}  // namespace floodwall
