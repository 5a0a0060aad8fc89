// redis+cluster://[user:password@]h:p[,h:p...] (rediss+cluster:// over TLS): a Redis Cluster, from its seeds.
//
// One RedisStore per master (its own I/O thread, pipelined connections, breaker and direct path, the
// scripts loaded on each of its connections), and this store in front of them:
// - Routing: a tenant's keys share a hash tag ({<tenant>}), so an admit, a lease and a release of one tenant
//   each run as one script on the master of that slot, atomically, as on one server. Each slot's master is
//   a plain load from a table (owner_), filled from CLUSTER SHARDS, completed from CLUSTER SLOTS where SHARDS
//   leaves slots unowned (Redis 7.2-7.4 after a second failover, redis/redis#13414; SLOTS alone on
//   servers before 7), then from the other nodes' views. A slot no view assigns keeps the master it had
//   (a real CLUSTERDOWN: that master's CLUSTERDOWN, or the fallback, reason cluster, when it had none;
//   said once). A reply that is no slot map is said once (node, command, its first 200 bytes).
// - Redirections: a MOVED or ASK reply is handed here by the store that got it (ClusterHooks); the call
//   goes to the named master's store with its deadline unchanged (after ASKING for ASK), at most twice a
//   call, and MOVED also moves the slot in the table. A call to a node not known yet waits for the
//   maintenance thread to connect to it. CLUSTERDOWN and TRYAGAIN are the fallback's, reason cluster, but
//   for an admit of two keys (request rate and concurrency) that a migration keeps apart: that one is
//   decided as two one-key calls (Split, in cluster_store.cpp).
// - The map is read again every kRefreshUs, and every kSuspectRefreshUs for kSuspectUs after a
//   connection broke or a store was told MOVED (a failover: the promoted replica is found within one
//   of those after the cluster promoted it). A node that owns no slot any more keeps its store (idle).
// - The fleet shedder needs one count over the whole fleet, which no script can read across slots: it is
//   decided in process. Each client counts its non-critical requests in flight and reports the count every
//   kReportUs (lua/fleet_report.lua, under <prefix>:{~fleet}:reports); it admits while the others' last
//   reported sum plus its own count now is below the capacity. Within one client that is exact; across
//   clients the others' figure is up to one report period (plus a round trip) old, so the fleet can go
//   over by what the other clients admitted in that time. With no fresh view (no report answered for
//   kFleetViewUs) the fleet limiter's requests go to the fallback. So that clients acting on one view do not
//   all take the whole room left, each takes until the next report at most its part of it: the room over
//   (the other clients with a live report, busy or idle, + 1), rounded down, beyond its own count as
//   reported; a client holding nothing whose part is nothing (more clients than room) gets one slot with
//   the probability room / clients.
// - Flags (fleet-wide modes) are read every redis.flags_poll_ms on the master of <prefix>:flags.
// - Nothing found: a seed list with no node answering is said once and the fallback decides every
//   request (reason connection) while the maintenance thread keeps asking; a seed that is no cluster
//   node, or refuses the credentials, is said once and counted as config.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "stores/redis/cluster_map.hpp"
#include "stores/redis/connection.hpp"  // TlsContext
#include "stores/redis/redis_store.hpp"
#include "util/fork.hpp"

namespace floodwall {

class ClusterStore final : public Store, private ClusterHooks {
 public:
  ClusterStore(const Policy &p, RedisUrl url);
  ~ClusterStore() override;

  AdmitResult admit(const AdmitOp &op) override;
  void control(const TenantKey &tenant, const ControlChange &change) override;
  TenantState inspect(const AdmitOp &op) override;
  void reset(const AdmitOp &op) override;
  std::vector<std::pair<std::string, TenantControl>> controlled(size_t limit) override;
  StoreStatus status(int64_t fleet_ttl_us) override;
  void set_fleet_mode(Limiter l, int8_t mode) override;
  void admit_async(const AdmitOp &op, AdmitCompletion *done) override;
  void release(const ReleaseOp &op) override;
  StoreStats stats() const override;
  bool remote() const override { return true; }
  void hold_writes() override;
  void flush_writes() override;
  bool supports_leases() const override { return true; }
  void lease_async(const LeaseOp &op, LeaseCompletion *done) override;
  void end_lease(const LeaseOp &op) override;
  void fleet_report_async(const FleetReportOp &op, FleetReportCompletion *done) override;
  void abandon_after_fork() override;

  static constexpr int64_t kRefreshUs = 5'000'000;
  static constexpr int64_t kSuspectRefreshUs = 200'000, kSuspectUs = 10'000'000;
  static constexpr size_t kMostAsked = 16;            // nodes asked for their view in one refresh, at most
  static constexpr int64_t kReportUs = 100'000;       // this client's fleet count, reported
  static constexpr int64_t kReportTtlUs = 1'000'000;  // a report counts this long (a dead client's too)
  static constexpr int64_t kFleetViewUs = 1'000'000;  // an older view of the others decides nothing

 private:
  struct Node {
    RedisEndpoint at;
    std::unique_ptr<RedisStore> store;
  };
  class FleetAdmit;
  class Report;

  // The master of a tenant's slot, or null (reason says why: the map is unknown, or the slot unowned).
  RedisStore *owner_of(const TenantKey &t, FailReason &reason) const;
  RedisStore *owner_of_key(std::string_view key, FailReason &reason) const;
  // The admin API's runner on the master of a tenant's slot, or of a key's; throws StoreError when none
  // is known.
  AdminRunner runner_of(const TenantKey &t) const;
  AdminRunner runner_of_key(const std::string &key) const;
  // The stores that own at least one slot now, each once.
  std::vector<const RedisStore *> masters() const;
  AdmitResult undecided(FailReason why);
  // The fleet share: taken (ok), refused (no), or no fresh view (unknown).
  enum class Share : uint8_t { ok, no, unknown };
  Share take_share(const AdmitOp &op);
  void give_share() { fleet_local_.fetch_sub(1, std::memory_order_relaxed); }
  // The admit without its fleet part; the result with the fleet's verdict put back.
  static AdmitOp without_fleet(const AdmitOp &op);
  void with_fleet(const AdmitOp &op, Share share, AdmitResult &r);
  // Decided without a round trip: the fleet refuses, or no tenant limiter is asked.
  static bool decided_here(const AdmitOp &op, Share share) {
    return (share == Share::no && op.fleet_enforce) || !(op.rate || op.conc);
  }
  AdmitResult here(const AdmitOp &op, Share share);

  // ClusterHooks.
  void redirect(RedisStore &from, RedisStore::Call *c, Redirect rd) override;
  void suspect(RedisStore &from) override;
  void flags(const FleetModes &m) override;
  void ctl_changed() override { bump_ctl_epoch(); }
  void split(RedisStore &from, RedisStore::Call *c) override;
  class Split;

  // The maintenance thread: the map, nodes not known yet, flags, the fleet report.
  void run();
  bool refresh();  // reads the map from the nodes until every slot has a master; false when none answered
  bool read_map(const RedisEndpoint &at, ClusterMap &map, FailReason &why, std::string &what);
  // A topology reply that is no slot map, said once per node and command (its first 200 bytes, printable).
  void say_unreadable(const RedisEndpoint &at, std::string_view command, const redisReply *r);
  RedisStore *node_at(const RedisEndpoint &at, bool make);  // the node's store; made (and waited for) when `make`
  void report_fleet();
  void wake();
  static int64_t now_us();
  bool in_forked_child() const { return generation_ != fork_generation(); }

  const Policy policy_;
  const RedisUrl url_;
  const uint64_t generation_;
  std::unique_ptr<TlsContext> tls_;  // the map's connections (each node's store has its own)
  const std::string client_id_;

  mutable std::shared_mutex nodes_mu_;  // shared: a redirect using a node; exclusive: adding one, closing
  std::vector<std::unique_ptr<Node>> nodes_;
  bool closing_ = false;  // nodes_mu_: no call is handed to a node any more
  std::array<std::atomic<RedisStore *>, kClusterSlots> owner_{};
  std::atomic<bool> map_known_{false};
  std::atomic<FailReason> map_failure_{FailReason::connection};  // why there is no map (connection, config)
  std::atomic<bool> unreachable_said_{false}, refused_said_{false};
  // The maintenance thread's (and the constructor's, before it runs): what was said about the map.
  std::set<std::string> unreadable_said_;  // "host:port CLUSTER SHARDS"
  bool uncovered_said_ = false;            // slots no node assigns, until every slot has a master again

  // Calls redirected to a node not known yet: the maintenance thread connects, then hands them on.
  struct Handoff {
    RedisStore::Call *call;
    Redirect rd;
  };
  std::mutex handoffs_mu_;
  std::vector<Handoff> handoffs_;

  // The fleet in process.
  const bool fleet_;
  std::atomic<int64_t> fleet_local_{0};   // this client's shares held
  std::atomic<int64_t> fleet_others_{0};  // the others' reports as of the last one answered
  std::atomic<int64_t> fleet_view_at_{0};
  const int64_t fleet_cap_;
  std::atomic<int64_t> fleet_allowance_{0};  // what this client may hold until the next report
  std::unique_ptr<Report> report_;

  std::array<std::atomic<uint64_t>, kFailReasonCount> failures_{};
  std::atomic<int64_t> suspect_until_us_{0};

  std::mutex run_mu_;
  std::condition_variable run_cv_;
  bool stop_ = false, woken_ = false;
  std::unique_ptr<std::thread> thread_;
};

}  // namespace floodwall
