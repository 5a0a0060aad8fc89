// The Redis store's direct path (direct.cpp), a part of its machinery (redis_store_internal.hpp): a blocking
// caller (a Puma or gunicorn worker thread) makes its round trip on a connection of its own, with no hop to
// the I/O thread and back (two wake-ups of another thread per admit), and writes its releases there too, so
// that they stay ahead of its next admit. Each thread keeps to one of redis.direct_connections connections
// (more threads share them; a busy one sends the caller to the I/O thread). Replies to releases are read
// before the next admit's.
//
// The client decides when to go direct: only while few blocking callers are in flight (no more than there
// are direct connections). Many callers share the I/O thread's pipeline instead, where one write and one of
// Redis' reads carry many commands; a direct call is one command per read for Redis and a system call pair
// for the client. A caller whose releases were written on its direct connection and whose next admit goes to
// the I/O thread reads their replies first, so that the admit cannot overtake them.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "stores/redis/redis_io_parts.hpp"

struct redisReply;

namespace floodwall {

class RedisIo;

class DirectPath {
 public:
  static constexpr size_t kConns = 8;  // at most (redis.direct_connections)
  explicit DirectPath(RedisIo &io) : io_(io) {}
  DirectPath(const DirectPath &) = delete;
  DirectPath &operator=(const DirectPath &) = delete;

  // A blocking admit in flight, counted from its start to its result (whichever path it took).
  class Caller {
   public:
    explicit Caller(DirectPath &p) : p_(p), in_flight_(p.callers_.fetch_add(1, std::memory_order_relaxed) + 1) {}
    ~Caller() { p_.callers_.fetch_sub(1, std::memory_order_relaxed); }
    Caller(const Caller &) = delete;
    Caller &operator=(const Caller &) = delete;
    int64_t in_flight() const { return in_flight_; }  // this caller and the others, when it began

   private:
    DirectPath &p_;
    const int64_t in_flight_;
  };

  // True when the admit was handled here: decided by Redis, or undecided with its reason (the fallback
  // decides, and the next admit takes the I/O thread). False: the I/O thread takes it (many callers, the
  // path off, a busy connection, a cluster's MOVED or ASK), with this thread's direct releases answered.
  bool admit(const AdmitOp &op, const Caller &me, AdmitResult &r);
  // True when the release was written on this thread's own connection.
  bool release(const ReleaseOp &op);

  // This thread holds its writes for an event loop (RedisIo::hold_writes): never direct.
  static thread_local bool tl_holds;
  // When this thread last handed a release (or a lease's return) to the I/O thread: its next admit does
  // not go direct while that may still be on its way, so that it overtakes none of them.
  static thread_local int64_t tl_io_release_us;

  // The I/O thread's side: Redis answered one of its admits (the path is on again); whether a direct
  // connection read a reply after since_us (Redis answers); when a direct call that got no byte back was
  // sent (0: none since the last look), which the I/O thread judges.
  void redis_answered() {
    if (!ok_.load(std::memory_order_relaxed)) ok_.store(true, std::memory_order_relaxed);
  }
  bool read_since(int64_t since_us) const { return read_us_.load(std::memory_order_relaxed) > since_us; }
  int64_t take_silent_since() { return silent_since_.exchange(0, std::memory_order_acquire); }

  // Closing: every connection's release replies read (until deadline_us), then freed. A socket closed with
  // replies unread is reset, and what Redis had not read yet of those releases is lost with it.
  void close_all(int64_t deadline_us);
  // The process exits: the release replies read on every connection no thread is using now.
  void drain_for_exit(int64_t deadline_us);

 private:
  RedisIo &io_;

  DirectConn &of_thread();
  // What both of a thread's calls need to go direct: the path on, Redis answering, a thread that does not
  // hold, few callers in flight.
  bool on(int64_t in_flight) const;
  bool allowed(const AdmitOp &op, int64_t in_flight) const;
  // The admit goes to the I/O thread: the replies to this thread's releases on its direct connection read
  // first, so that Redis has run them before the admit.
  void settle_releases();
  // d.mu held. False with r.reason set when Redis did not answer in time, or when the connection failed
  // (the direct path is then off until the I/O thread sees Redis answer an admit, so that the breaker judges
  // what follows); false with no reason for a cluster's redirection (the I/O thread follows it).
  bool run(DirectConn &d, const AdmitOp &op, AdmitResult &r);
  // Its steps, d.mu held. A new connection with its setup (AUTH, SELECT, the ROLE check): none, or why not.
  FailReason connect(DirectConn &d);
  // Sends cmd and reads the replies to this thread's releases, then cmd's; null when none came in time.
  redisReply *exchange(DirectConn &d, const std::string &cmd);
  // An error reply to the admit (rep freed): followed by the I/O thread (a cluster's redirection), or given up.
  bool refused(DirectConn &d, const AdmitOp &op, redisReply *rep, ErrorReply kind, int64_t sent_us, AdmitResult &r);
  // Undecided (r.reason = why), the connection dropped and the direct path off; a slot the admit may hold
  // (`may_hold_slot`) given back behind it. Always false.
  bool give_up(DirectConn &d, const AdmitOp &op, bool may_hold_slot, int64_t sent_us, FailReason why, AdmitResult &r);
  void give_back(DirectConn &d, const AdmitOp &op);
  // No reply on d: why (a time-out, a broken connection, the server refusing our TLS certificate).
  FailReason lost(DirectConn &d);
  // Each command has the whole deadline, as each call on the I/O thread has.
  int64_t deadline() const;
  void free_conn(DirectConn &d);
  // d.mu held: reads the replies to the releases written on d's connection, until `deadline_us`.
  void read_release_replies(DirectConn &d, int64_t deadline_us);
  // d.mu held: drops d's connection when Redis has closed it since it was last used (its idle time-out, a
  // restart), so that the next command goes on a new one instead of being lost with it.
  void drop_if_closed(DirectConn &d, int64_t now);
  int fd_slot(const DirectConn &d) const;

  std::array<DirectConn, kConns> conns_;
  std::atomic<bool> ok_{true};            // off after a direct call failed, until the I/O thread sees Redis
  std::atomic<int64_t> silent_since_{0};  // when a direct call that got no byte back was sent
  std::atomic<int64_t> read_us_{0};       // when a direct connection last read a reply
  std::atomic<int64_t> callers_{0};       // blocking admits in flight (Caller)
  // The connection this thread last wrote a release on whose reply it has not read (null: none).
  static thread_local DirectConn *tl_unread_on;
};

}  // namespace floodwall
