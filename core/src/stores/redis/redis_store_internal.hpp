// The Redis store's machinery (redis_store.hpp is its interface): the calls, the I/O thread's connections, the
// direct path (direct_path.hpp), the queues, the breaker and the backpressure, which the store's files share
// (redis_store.cpp, io.cpp, io_connections.cpp, replies.cpp, direct.cpp, redis_admin.cpp) and the cluster store hands
// calls between. A RedisStore owns one RedisIo and passes every call to it.
#pragma once

#include <poll.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "stores/redis/breaker.hpp"
#include "stores/redis/connection.hpp"
#include "stores/redis/direct_path.hpp"
#include "stores/redis/redis_io_parts.hpp"
#include "stores/redis/redis_store.hpp"
#include "stores/redis/sentinel.hpp"
#include "stores/redis/slot_notices.hpp"
#include "util/fork.hpp"

struct redisReply;

namespace floodwall {

class RedisIo {
 public:
  using Call = RedisStore::Call;
  using Kind = Call::Kind;
  static bool awaited(Kind k) { return Call::awaited(k); }
  static bool gives_back(Kind k) { return Call::gives_back(k); }

  RedisIo(RedisStore &store, const Policy &p, RedisUrl url, ClusterHooks *cluster);
  ~RedisIo();

  // The store's calls, each of RedisStore's passed here (redis_store.hpp says what each does).
  AdmitResult admit(const AdmitOp &op);
  void admit_async(const AdmitOp &op, AdmitCompletion *done);
  void control(const TenantKey &tenant, const ControlChange &change);
  TenantState inspect(const AdmitOp &op);
  void reset(const AdmitOp &op);
  std::vector<std::pair<std::string, TenantControl>> controlled(size_t limit);
  StoreStatus status(int64_t fleet_ttl_us);
  void set_fleet_mode(Limiter l, int8_t mode);
  std::vector<ReplyPtr> admin_run(const std::vector<std::vector<std::string>> &cmds);
  std::vector<std::string> setup_commands() const;
  const SlotSignals *slot_signals() const;  // slot_notices.cpp
  void watch_slots(std::string_view tenant_key, bool on);
  void release(const ReleaseOp &op);
  StoreStats stats() const;
  void hold_writes();
  void flush_writes();
  void lease_async(const LeaseOp &op, LeaseCompletion *done);
  void end_lease(const LeaseOp &op);
  void fleet_report_async(const FleetReportOp &op, FleetReportCompletion *done);
  void abandon_after_fork();
  void flush_for_exit();
  std::string fleet_key() const { return fleet_key_; }
  std::string fleet_reports_key() const { return reports_key_; }
  std::string flags_key() const { return prefix_ + ":flags"; }
  void poll_flags();
  bool wait_connected(int64_t ms);
  bool ever_connected() const { return ever_connected_.load(); }
  const RedisEndpoint &endpoint() const { return url_.nodes.front(); }
  void adopt(Call *c, bool ask);

 private:
  RedisStore &store_;  // whose machinery this is: what the cluster's hooks are told

  using Conn = IoConn;

  void submit(Call *c);
  // Wakes the I/O thread (its eventfd; a pipe where there is none): a call queued, the master changed, stop.
  void wake_io() {
    uint64_t one = 1;
    (void)!::write(wake_write_fd_, &one, sizeof one);
  }
  // Ends the hold (hold_writes) when `only` holds it, or whoever does when null; wakes the I/O thread for
  // what was held.
  void end_hold(const void *only);
  // queue_mu_ held: moves the held calls to queue_; whether the I/O thread needs waking for them.
  bool release_held();
  // Sends the releases waiting for a ride (submit) now, when no hold keeps them.
  void send_riders();
  void format_admit(const AdmitOp &op, std::string &cmd) const;
  // A release's command: a plain ZREM of one slot, or release.lua for two.
  void format_release(const ReleaseOp &op, std::string &cmd) const;

  ErrorReply classify(std::string_view err) const;
  // What the caller of a call that failed with such an error is told (the fallback decides).
  static FailReason fail_reason(ErrorReply e);
  // redis+sentinel://: the check that the server a connection reached is the master (the sentinels' answer
  // may be stale, a failover in progress), sent by both paths; whether its reply says master.
  static constexpr std::string_view kRoleCommand = "ROLE";
  static bool says_master(const redisReply *role);

  // The direct path (direct_path.hpp): a lone blocking caller's round trip on a connection of its own.
  friend class DirectPath;
  // What frees the slots an admit takes (given back when its reply came too late).
  static ReleaseOp release_of(const AdmitOp &op) { return ReleaseOp{op.tenant, op.slot, op.conc, op.fleet}; }
  void release_via_io(const ReleaseOp &op);
  // The I/O thread (io.cpp), a turn of its loop step by step.
  void run();
  // Stopping: whether what callers queued has been answered (or drain_until, set on the first call, passed).
  bool closing_drained(int64_t now, int64_t &drain_until);
  void reconnect_due(int64_t now);  // connects what is down and due (and drops a master that moved)
  // Takes the queued calls into `batch` (choosing the lanes once a window); when held calls must go out.
  int64_t take_queue(std::vector<Call *> &batch, int64_t now);
  // Sends the releases kept while Redis did not answer, and puts the calls due for a TRYAGAIN into `batch`.
  void resend_waiting(std::vector<Call *> &batch, int64_t now);
  void dispatch_batch(std::vector<Call *> &batch, int64_t now);  // to the lanes, parked, or failed (breaker)
  void read_flags_due(int64_t now);                              // the fleet-wide modes, every flags_poll_ms
  // Sleeps in ppoll until a descriptor is ready or the nearest deadline; the time after.
  int64_t wait_for_events(std::vector<pollfd> &fds, int64_t held_until, int64_t now);
  void serve_events(const std::vector<pollfd> &fds, int64_t now);  // connects, reads, writes what poll said
  void fail_everything_left();                                     // stopped: no caller waits forever
  void start_connect(Conn &conn, int64_t now);
  void on_connected(Conn &conn, int64_t now);
  void report_refused_setup(const Connection &link, std::string_view err);
  std::atomic<bool> refused_reported_{false};
  // Redis refuses the connections' setup (a wrong password): the breaker is open because the deployment
  // is wrong, not because Redis is down, and the decisions it sends to the fallback say config.
  std::atomic<bool> refused_{false};
  FailReason open_reason() const {
    return refused_.load(std::memory_order_relaxed) ? FailReason::config : FailReason::breaker;
  }
  void fail_conn(Conn &conn, FailReason why, int64_t now);
  void dispatch(Call *c, int64_t now);
  void append(Conn &conn, Call *c);
  static constexpr size_t kHoldMax = 32;
  bool should_flush(const Conn &conn) const {
    return conn.want_write && (conn.partial || conn.awaiting == 0 || conn.inflight.size() - conn.awaiting >= kHoldMax ||
                               stop_.load(std::memory_order_relaxed));
  }
  void flush(Conn &conn, int64_t now);
  // Lanes: the connections in use. Called once per window with whether several threads submitted.
  void choose_lanes(bool several, int64_t now);
  // Moves to lanes_wanted_ once every release sent before the change began is answered, so that a
  // tenant's release and its next admit never travel on two connections; meanwhile the calls of the
  // tenants that would move wait in parked_ (the others go on: their connection stays). Gives up by
  // switch_by_us_, and then tries again only after a back-off. Parked calls go first into `batch`.
  void settle_lanes(std::vector<Call *> &batch, int64_t now);
  bool moves(const Call *c) const { return c->affinity % lanes_ != c->affinity % lanes_wanted_; }
  void read(Conn &conn, int64_t now);
  // A reply, to the call it answers (replies.cpp); an error reply, a fleet report's, the flags' (the fleet-wide
  // modes and the control epoch).
  void handle(Conn &conn, Call *c, redisReply *r, int64_t now);
  void handle_error(Conn &conn, Call *c, std::string_view err, int64_t now);
  void finish_report(Call *c, const redisReply *r);
  void apply_flags(const redisReply *r);
  void expire(int64_t now);
  void fail_call(Call *c, FailReason why);
  void complete(Call *c, AdmitResult &&r);  // hands an admit's result to its caller
  void complete_lease(Call *c, LeaseResult &&r);
  void finish_admit(Call *c, redisReply *r, int64_t now);
  void finish_lease(Call *c, redisReply *r, int64_t now);
  void format_lease(const LeaseOp &op, std::string &cmd) const;
  // A script's first argument (its flags), followed with redis.clock "client" by '@' and wall_us().
  void resp_flags(std::string &cmd, std::string_view flags) const;
  static int64_t wall_us() { return system_now_us(); }
  // Redis refused a command inside our scripts (TIME on some managed services): said once, naming
  // redis.clock, and counted as config.
  void report_refused_script(const Connection &link, std::string_view err);
  std::atomic<bool> script_refusal_reported_{false};
  void answered(int64_t sent_us, int64_t now);  // Redis answered a call a caller waits on
  // Every connection failed, or none has answered within the deadline: open the breaker and answer
  // every waiting admit now (their callers' fallback decides), instead of at their deadlines.
  void trip(FailReason why, int64_t now);
  bool any_ready() const;
  // Some connection read reply bytes after since_us (when a call that got nothing back was sent): Redis is
  // answering, only not that call (a deep queue, or a broken connection). In a deep pipeline the replies
  // read are to calls sent long before; what counts is that bytes still come.
  bool any_answering(int64_t since_us) const;
  // Commands outstanding and no reply byte for `for_us`.
  static bool silent(const Conn &conn, int64_t now, int64_t for_us) {
    return !conn.inflight.empty() && now - conn.quiet_since_us >= for_us;
  }
  void send_probe(int64_t now);
  void measure(int64_t now);  // the reply rate and latency, and from them the cap on waiting admits
  Call *setup_call(std::initializer_list<std::string_view> args, int64_t now);
  // A view of <prefix>:{<tenant>}:<limiter> in a thread-local buffer, valid until the next call.
  std::string_view tenant_key(const TenantKey &t, std::string_view limiter) const;
  Call *take_call(Kind kind, int64_t deadline_us);
  void recycle(Call *c);  // I/O thread only
  void return_spent();    // I/O thread only

  static constexpr size_t kPoolMax = 4096;
  // A call's command is formatted here first, then swapped into a pooled call's buffer: neither side
  // allocates once both have grown to a command's size.
  static thread_local std::string tl_cmd;
  // Its address names the submitting thread; tl_io_of, the store whose I/O thread this is (what an
  // I/O thread submits itself, a late slot's release or a callback's next admit, names no caller).
  static thread_local const char tl_submitter;
  static thread_local const void *tl_io_of;
  static int64_t now_us() { return steady_now_us(); }

  const RedisOptions opt_;
  const RedisUrl url_;
  const std::string prefix_;
  // The fork generation whose I/O thread this is (fork.hpp); in a forked child the store is abandoned.
  const uint64_t generation_;
  bool in_forked_child() const { return generation_ != fork_generation(); }
  // The descriptors a forked child closes when it abandons this store.
  InheritedFds fds_;
  static constexpr int kWakeFdSlot = 0, kFirstDirectFdSlot = 18;  // 2..17: the I/O thread's connections
  int conn_fd_slot(const Conn &conn) const { return 2 + static_cast<int>(&conn - conns_.data()); }
  const Scripts scripts_;
  // Cluster: the cluster store (null otherwise).
  ClusterHooks *const cluster_;
  const std::string fleet_key_, reports_key_;
  // Cluster: a MOVED, ASK, CLUSTERDOWN or TRYAGAIN reply to c, handled (c is recycled or handed over).
  bool cluster_reply(Call *c, std::string_view err, int64_t now);
  // Cluster: calls answered TRYAGAIN, sent again at try_again_at_us_ (I/O thread).
  static constexpr int64_t kTryAgainUs = 5'000;
  std::vector<Call *> try_again_;
  int64_t try_again_at_us_ = 0;
  // With leases, tenant_admit.lua also counts the fleet usage that clients report (fleet_report.lua).
  const bool fleet_reports_;
  // The fixed start of each command: EVALSHA, the script's SHA and the key count.
  std::string admit_head_rate_, admit_head_full_, admit_head_ctl_, release_head_;
  int64_t deadline_us_ = 0;  // how long the I/O thread waits for an admit's reply
  // How long a call that need not be quick may take (a release, a lease's return, a flags read, an admin
  // call): the deadline, and at least a second, so that a short deadline does not drop what frees slots.
  int64_t patient_us() const { return std::max<int64_t>(1000, opt_.deadline_ms) * 1000; }

  std::mutex pool_mu_;
  std::vector<Call *> pool_;
  std::vector<Call *> spent_;  // owned by the I/O thread

  std::mutex queue_mu_;
  std::vector<Call *> queue_;
  const void *last_submitter_ = nullptr;  // queue_mu_: the thread that submitted last in this window
  // queue_mu_: the thread whose calls wait for its flush_writes(), and those calls (oldest first): kept
  // apart from queue_, so that the I/O thread, woken by a reply, cannot take a turn's first calls and write
  // them alone. With no holder, held_ has the releases waiting to ride with the next call (submit).
  const void *held_by_ = nullptr;
  std::vector<Call *> held_;
  uint32_t submitter_changes_ = 0;  // queue_mu_: calls from another thread than the one before
  // Several threads submit when a window has this many changes of submitter: an event loop beside a
  // thread that admits now and then (a health check) keeps one connection, busy threads get them all.
  static constexpr uint32_t kSeveralChanges = 4;
  static constexpr int64_t kLaneWindowUs = 50'000;
  static constexpr int kSingleWindows = 4;  // windows of one submitter before calls move to one lane
  size_t lanes_ = 1, lanes_wanted_ = 1;     // I/O thread
  int single_windows_ = 0, give_ups_ = 0;   // I/O thread
  int64_t next_lane_check_us_ = 0, switch_by_us_ = 0, retry_lanes_at_us_ = 0;
  std::vector<Call *> parked_;  // I/O thread: calls held while the lanes change
  std::deque<Call *> unsent_;   // I/O thread: releases not applied yet, sent once Redis answers again
  void keep_release(Call *c);
  int64_t unsent_at_us_ = 0;
  Call *copy_release(const Call *c);
  std::atomic<uint32_t> lanes_in_use_{1};
  int wake_fd_ = -1, wake_write_fd_ = -1;  // read by the I/O thread; written by wake_io (one eventfd, or a pipe)
  std::atomic<bool> stop_{false};
  std::vector<Conn> conns_;  // owned by the I/O thread
  int64_t next_flags_us_ = 0;
  std::thread io_;

  // rediss://: the TLS context every connection's session is made from.
  std::unique_ptr<TlsContext> tls_;
  // redis+sentinel://: which server is the master (sentinel.hpp). After it changed, the connections to the
  // old one are closed without opening the breaker, for a connect time-out.
  std::unique_ptr<SentinelWatch> sentinel_;
  std::unique_ptr<SlotNotices> notices_;  // acquires waiting for a slot (slot_notices.hpp); none on a cluster
  int64_t switch_grace_until_us_ = 0;
  // Where connections go: the URL's server, or the master the sentinels named (false: none yet).
  bool target(RedisEndpoint &to, uint64_t &generation) const;
  void drop_stale_masters(int64_t now);
  // A TLS verification failure or a certificate the server refused: said once, like a refused setup.
  void report_tls_failure(const Connection &link);
  std::atomic<bool> tls_reported_{false};

  int64_t seen_ctl_epoch_ = 0;  // I/O thread: the flags' ctl_epoch last read
  std::mutex admin_mu_;
  std::unique_ptr<Connection> admin_;
  uint64_t admin_gen_ = 0;
  std::string store_url_;  // as the policy gave it (redacted when shown)
  DirectPath direct_{*this};
  std::atomic<int64_t> outstanding_{0};  // calls taken and not yet recycled, on the I/O thread's side

  // The breaker: its state is read by every caller, written by the I/O thread.
  Breaker breaker_;

  Backpressure bp_;  // waiting callers and their cap (redis_io_parts.hpp)

  std::array<std::atomic<uint64_t>, kFailReasonCount> failures_{};
  std::atomic<uint64_t> release_errors_{0}, reconnects_{0}, noscript_reloads_{0};
  std::atomic<bool> ever_connected_{false};
  std::mutex ready_mu_;
  std::condition_variable ready_cv_;
};

}  // namespace floodwall
