// What the Redis store's machinery (redis_store_internal.hpp) is made of: a call (RedisStore::Call, pooled),
// one of the I/O thread's pipelined connections (IoConn), one of the direct path's (DirectConn), what an
// error reply says (ErrorReply), shared by the pipelined and the direct paths, and the backpressure's state.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>

#include "stores/redis/connection.hpp"
#include "stores/redis/redis_store.hpp"

namespace floodwall {

// Calls are pooled: a caller takes one (and its grown command buffer) from pool_, the I/O thread gathers the
// spent ones in spent_ and gives them back once per loop.
struct RedisStore::Call {
  // lease: a hot tenant's lease call, which callers wait on like an admit; lease_end: a lease given
  // back, answered by nobody like a release; report: this client's fleet report (hot_tenants.hpp);
  // asking: the ASKING sent just before a call redirected by ASK (a Redis Cluster's slot in migration).
  enum class Kind : uint8_t { admit, release, flags, setup, probe, lease, lease_end, report, asking };
  // Calls whose caller waits for the reply, which the breaker judges Redis by.
  static bool awaited(Kind k) { return k == Kind::admit || k == Kind::lease; }
  // Calls that give slots back: a tenant's next admit must not overtake them (settle_lanes).
  static bool gives_back(Kind k) { return k == Kind::release || k == Kind::lease_end; }
  Kind kind = Kind::setup;
  bool slot = false;          // admit: the 6-element reply (a concurrency or fleet slot was asked for)
  uint8_t rules = 0;          // admit: the limits and quotas asked for (four more integers each)
  bool rate_enforce = false;  // admit: an enforced bucket (its rejection is the call's)
  bool acquire = false;       // admit: an acquire (AdmitOp::max_wait_ns), answered with its turn too
  bool retried = false, abandoned = false;
  bool role_check = false;  // setup: the ROLE that must say master (redis+sentinel://)
  bool asking = false;      // cluster: sent after ASKING (an ASK redirection)
  uint8_t redirects = 0;    // cluster: MOVED or ASK followed so far
  std::string cmd;          // the RESP command
  int64_t deadline_us = 0;
  int64_t sent_us = 0;      // admit: when it was submitted (for the reply latency)
  int64_t appended_us = 0;  // when it went into a connection's output buffer
  int64_t held_us = 0;      // when a hold (hold_writes) kept it from the I/O thread
  AdmitCompletion *done = nullptr;
  LeaseCompletion *lease_done = nullptr;
  FleetReportCompletion *report_done = nullptr;
  ReleaseOp late_release;  // admit: what to free if the reply comes after the caller gave up
  AdmitOp op;              // cluster, admit: the request, for ClusterHooks::split
  LeaseOp lease;           // lease: what it asked for, given back if the reply comes after the caller gave up
  size_t affinity = 0;     // which connection: a hash of the tenant
};

struct IoConn {
  std::unique_ptr<Connection> link = std::make_unique<Connection>();
  // connecting: the TCP connect and the TLS handshake (both within connect_timeout_ms); ready: calls
  // may be appended, though while setup_left > 0 they wait behind the setup (Connection's barrier).
  enum class State : uint8_t { down, connecting, ready } state = State::down;
  std::deque<RedisStore::Call *> inflight;
  int setup_left = 0;       // setup calls (AUTH, SELECT, SCRIPT LOAD) not answered yet
  size_t setup_calls = 0;   // how many calls are in front of the barrier
  bool want_write = false;  // commands appended and not yet written
  // Writes are coalesced while commands are on the wire: a connection with unanswered commands
  // holds new ones until those replies arrive (or kHoldMax pile up), so that under load each write,
  // and each of Redis' reads, carries many commands. An idle connection writes at once.
  size_t awaiting = 0;   // commands written whose replies have not been read
  bool partial = false;  // the last write left bytes behind (socket full): keep writing
  int64_t reconnect_at_us = 0, connect_deadline_us = 0, backoff_ms = 50;
  bool was_ready = false;  // connected before: the next connect is a reconnect
  // Redis refused a setup command (AUTH with a wrong password, SELECT, SCRIPT LOAD without the ACL
  // permission): the connection is not what the URL asked for, and is closed once the reply is read.
  bool refused = false;
  // redis+sentinel://: the master generation this connection was made to, and whether the server said it
  // is no master (ROLE, READONLY): closed then, and the sentinels asked again.
  uint64_t master_gen = 0;
  bool not_master = false;
  // Since when the connection has had commands outstanding and no reply byte: the breaker's silence
  // test. Reset by every read, and by a command sent on an idle connection.
  int64_t quiet_since_us = 0;
  int64_t last_read_us = 0;  // when reply bytes were last read: Redis answered something then
  // Releases appended and answered (replies come in order; a broken connection answers them all),
  // and how many must be answered before the lanes may change.
  uint64_t releases_sent = 0, releases_done = 0, drain_to = 0;
};

// What an error reply says, for the pipelined calls (handle) and the direct path alike (replies.cpp).
enum class ErrorReply : uint8_t {
  redirect,        // cluster: MOVED or ASK, followed
  try_again,       // cluster: TRYAGAIN (keys a migration keeps apart)
  cluster_down,    // cluster: CLUSTERDOWN (a slot without a master)
  noscript,        // the script is not loaded (a restart, a failover, SCRIPT FLUSH): loaded, and sent again once
  readonly,        // redis+sentinel://: a replica refused a write, the master moved
  script_refused,  // Redis refused a command inside our scripts (TIME on some managed services)
  config,          // the deployment is wrong (resp_is_config_error), not down
  other,
};

// Backpressure: callers add themselves to `waiting` and are turned away beyond `cap`, which the I/O thread
// sets from what it measures (RedisIo::measure): the reply rate and an admit's latency.
struct Backpressure {
  static constexpr int64_t kMinWaiting = 128;
  static constexpr int64_t kRateWindowUs = 10'000;
  std::atomic<int64_t> waiting{0};
  std::atomic<int64_t> cap{INT64_MAX};
  uint64_t replies = 0;       // I/O thread: replies read in this rate window
  int64_t rate_since_us = 0;  // I/O thread: when the window began
  double reply_rate = 0;      // I/O thread: replies per second, smoothed
  double latency_us = 0;      // I/O thread: an admit's submit-to-reply time, smoothed
};

// The clocks of the store's machinery, in us: steady (deadlines, latencies) and the calendar's.
inline int64_t steady_now_us() {
  using namespace std::chrono;
  return duration_cast<microseconds>(steady_clock::now().time_since_epoch()).count();
}
inline int64_t system_now_us() {
  using namespace std::chrono;
  return duration_cast<microseconds>(system_clock::now().time_since_epoch()).count();
}

struct DirectConn {
  std::mutex mu;
  std::unique_ptr<Connection> conn;
  uint64_t gen = 0;     // redis+sentinel://: the master generation conn was made to
  int unread = 0;       // releases written on conn whose replies are not read yet
  int64_t used_us = 0;  // when a command was last written on conn
};

}  // namespace floodwall
