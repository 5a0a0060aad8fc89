// redis://host:port/db - the state of every tenant shared by a whole fleet, through the scripts in
// lua/ (embedded at build time, called by SHA, reloaded once on NOSCRIPT).
//
// One I/O thread owns a few non-blocking hiredis connections. Callers of every thread (and async
// callers) hand it calls through a queue; it appends all queued calls to the connections' output
// buffers and writes them with one syscall (auto-pipelining). How many of the connections it spreads
// calls over follows how the calls arrive: while one thread submits them all (an event loop's async
// admits: Node, asyncio) one connection carries everything, pipelined deepest; once several threads
// submit, all of them, so that Redis works on one connection's batch while the replies of another are
// read. A blocking caller (a thread of Puma, gunicorn) makes its round trips itself, on a connection of its
// own (the direct path, direct_path.hpp), with no hop to the I/O thread and back, while few callers are in
// flight; many share the I/O thread's pipeline. Replies come back in order, so each is
// matched to its own call: a call that timed out stays in its connection's queue, marked abandoned,
// and its late reply is read and dropped (a slot it took after all is released at once), never taken
// as the answer to a later command.
//
// When Redis cannot answer in time the caller gets an undecided result with its reason, and the Guard's
// fallback decides (redis.fallback). Three things keep that for real outages rather than for load:
// - The breaker (breaker.hpp) judges Redis, not our queue: a call that missed its deadline while
//   replies kept arriving is no failure of Redis. No reply byte within the deadline while commands were
//   outstanding, or no connection up, opens it at once; otherwise a failure rate over a window does.
//   While it is open no admit waits; the I/O thread itself sends one probe (PING) per open period, so
//   that no caller waits on it and it is not starved by callers that the fallback answers at once.
// - Backpressure: once Redis' replies take more than a quarter of the deadline, the admits waiting on
//   it are bounded by what it answers within the deadline (its observed reply rate x the deadline, and
//   never fewer than kMinWaiting); an admit beyond that is answered at once (reason overload) instead of
//   waiting for a deadline it would miss.
// - A late reply is matched to its own call and dropped (a slot it took after all is released at once).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "policy/policy.hpp"
#include "stores/redis/cluster_map.hpp"
#include "stores/redis/redis_admin.hpp"
#include "stores/redis/scripts.hpp"  // the reply parsers, which fuzz/resp_fuzz.cpp reaches through this header
#include "stores/redis/url.hpp"
#include "stores/store.hpp"

namespace floodwall {

class ClusterHooks;
class RedisIo;

class RedisStore final : public Store {
 public:
  // `cluster`: this store is one master's of a Redis Cluster (cluster_store.hpp), which outlives it. Then
  // admits never ask for the fleet set (the cluster store decides the fleet in process), the fleet reports
  // live under one hash tag, flags are read when the cluster store asks (poll_flags()), and MOVED, ASK,
  // CLUSTERDOWN and TRYAGAIN are the cluster's to answer (ClusterHooks).
  RedisStore(const Policy &p, RedisUrl url, ClusterHooks *cluster = nullptr);
  ~RedisStore() override;
  RedisStore(const RedisStore &) = delete;
  RedisStore &operator=(const RedisStore &) = delete;

  AdmitResult admit(const AdmitOp &op) override;
  void admit_async(const AdmitOp &op, AdmitCompletion *done) override;
  void control(const TenantKey &tenant, const ControlChange &change) override;
  TenantState inspect(const AdmitOp &op) override;
  void reset(const AdmitOp &op) override;
  std::vector<std::pair<std::string, TenantControl>> controlled(size_t limit) override;
  StoreStatus status(int64_t fleet_ttl_us) override;
  // The fleet view (redis_summaries.cpp): one key per client and their index, under one hash tag.
  void put_summary(const std::string &id, const std::string &text, int64_t ttl_ms) override;
  std::vector<std::string> summaries() override;
  void set_fleet_mode(Limiter l, int8_t mode) override;
  // The admin API's commands, over a blocking connection of their own (redis_admin.cpp); throws StoreError.
  std::vector<ReplyPtr> admin_run(const std::vector<std::vector<std::string>> &cmds);
  std::vector<std::string> setup_commands() const;  // AUTH, SELECT: a blocking connection's first commands
  void release(const ReleaseOp &op) override;
  // Acquires waiting for a slot (one node, Sentinel; none on a cluster): slot_notices.cpp.
  const SlotSignals *slot_signals() const override;
  void watch_slots(std::string_view tenant_key, bool on) override;
  StoreStats stats() const override;
  bool remote() const override { return true; }
  void hold_writes() override;
  void flush_writes() override;
  bool supports_leases() const override { return true; }
  void lease_async(const LeaseOp &op, LeaseCompletion *done) override;
  void end_lease(const LeaseOp &op) override;
  void fleet_report_async(const FleetReportOp &op, FleetReportCompletion *done) override;
  void abandon_after_fork() override;
  // At exit (atexit, for a store nobody freed): waits, briefly, until what callers queued, releases
  // above all, has been answered.
  void flush_for_exit();

  // Key names, for tests and operators: <prefix>:{<tenant>}:rate, ...:conc, <prefix>:fleet, where
  // <tenant> is the id itself when it is made of [A-Za-z0-9._:@-] only, else '~' and its base64url. On a
  // cluster the fleet's keys share one hash tag, {~fleet} (never a tenant's: "fleet" is no base64url):
  // <prefix>:{~fleet}:reports, and <prefix>:{~fleet}:set, which nothing writes (the fleet is decided in
  // process there) and fleet_report.lua counts as empty.
  std::string fleet_key() const;
  std::string fleet_reports_key() const;
  std::string flags_key() const;
  static std::string fleet_key_for(const std::string &prefix, bool cluster) {
    return prefix + (cluster ? ":{~fleet}:set" : ":fleet");
  }
  static std::string reports_key_for(const std::string &prefix, bool cluster) {
    return prefix + (cluster ? ":{~fleet}:reports" : ":fleet:reports");
  }
  // <prefix>:{<tenant>}:<limiter> into `key`.
  static void tenant_key_into(std::string &key, const std::string &prefix, const TenantKey &t,
                              std::string_view limiter);

  // On a cluster: reads the fleet-wide modes once (the cluster store asks the master of flags_key()).
  void poll_flags();
  // Waits (at most ms) until a connection came up once; whether one did.
  bool wait_connected(int64_t ms);
  bool ever_connected() const;
  const RedisEndpoint &endpoint() const;

  // A command on its way to Redis (redis_store_internal.hpp). Cluster: a call another master's store handed
  // over (MOVED, ASK) is submitted here with adopt(), its caller's deadline unchanged; ownership passes.
  struct Call;
  void adopt(Call *c, bool ask);
  // Cluster: a handed-over call that no store can take (its node cannot be reached): its caller, if any,
  // is answered `why` (the fallback decides), and the call freed.
  static void drop(Call *c, FailReason why);

 private:
  friend class RedisIo;  // the machinery: connections, the I/O thread, the direct path (redis_store_internal.hpp)
  std::unique_ptr<RedisIo> io_;
};

}  // namespace floodwall

namespace floodwall {

// What the stores of a Redis Cluster's masters tell the cluster store (cluster_store.hpp), from their I/O
// threads (flags, redirect, suspect) or a caller's (suspect).
class ClusterHooks {
 public:
  virtual ~ClusterHooks() = default;
  // MOVED or ASK (rd.to's host filled in): c goes there, and for MOVED the slot lives there now. Ownership
  // of c passes; `from` no longer counts it.
  virtual void redirect(RedisStore &from, RedisStore::Call *c, Redirect rd) = 0;
  // A connection to `from` broke or could not be made, or it answered for a slot it no longer serves: the
  // slot map may have changed.
  virtual void suspect(RedisStore &from) = 0;
  // The fleet-wide modes, read on the master of flags_key().
  virtual void flags(const FleetModes &m) = 0;
  virtual void ctl_changed() = 0;  // the flags' ctl_epoch moved
  // TRYAGAIN to an admit that names two keys (the request rate and the concurrency): a migration has them
  // on two nodes, or one missing, and Redis will not run them together until it ends. c->op is decided
  // another way and c->done answered; ownership of c passes, `from` no longer counts it.
  virtual void split(RedisStore &from, RedisStore::Call *c) = 0;
};

}  // namespace floodwall
