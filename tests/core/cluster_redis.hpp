// Redis Cluster test fixtures: a real cluster of redis-server processes on free ports, all on 127.0.0.1, in a
// temp dir of its own, made a cluster by `redis-cli --cluster create`. A missing redis-server or redis-cli, a
// process that does not come up or a cluster that does not settle fails the test loudly and aborts (after
// killing what it started); nothing skips.
//
//   ClusterOptions      what a cluster is started with: how many masters (at least 3, as redis-cli wants) and
//                       replicas of each, the node timeout, a password (requirepass and masterauth on every
//                       node), an ACL user made on every node (ACL SETUSER user on >password plus its rules,
//                       by default ~floodwall:* +@all), extra redis-server arguments, how long the start
//                       (and a restart) may take to settle, and TLS (the certificates; see below).
//   ClusterTopology     the nodes (3 masters and 3 replicas by default), the slots spread evenly over the
//                       masters by redis-cli. The constructor returns once the cluster has settled (see
//                       below). Then: the current view (masters, replicas, who serves a slot or a key, the
//                       slot ranges), a seed URL, commands to a node (password-aware) or to a key's master
//                       (following MOVED and ASK like redis-cli -c), a SIGKILL of a node or of a slot's
//                       master, a wait for the failover, a restart of a killed node from its nodes.conf, and
//                       a slot migration in steps (begin, move keys, finish). Each node logs to a file in the
//                       temp dir (see log_tail()); failures quote the relevant ones and what each node says
//                       (cluster_view()). The destructor SIGKILLs every process it started and removes the
//                       temp dir.
//   cluster_slots_at()  CLUSTER SLOTS on a node as slot ranges (command_at() cannot render nested replies).
//   cluster_nodes_at()  CLUSTER NODES on a node as one entry per node.
//
// Settled means, on every node that runs: CLUSTER INFO says cluster_state:ok; CLUSTER SLOTS names one master
// for each of the 16384 slots, the same on every node; CLUSTER NODES lists every running node without a
// fail, fail?, handshake or noaddr flag, with the same roles (and the same master for each replica) on every
// node; and ROLE on each replica says its link to that master is connected. The constructor also wants the
// shape asked for: `masters` masters with `replicas` replicas each.
//
// Each node runs with --cluster-port set to a free port of its own: the default bus port (the port + 10000)
// is not checked free, and for a port of the ephemeral range (32768-60999) it can pass 65535; in a trial, another
// job's redis-server on a node's port + 10000 made that node's restart fail ("Failed listening on port
// ... (cluster), aborting"). Each node has a data dir of its own (a replica's full sync renames its temp RDB to
// dump.rdb in its dir; replicas syncing at once in a shared dir could load each other's), while nodes.conf
// files are <dir>/nodes-<port>.conf, logs <dir>/node-<port>.log and redis-cli's output <dir>/create.log.
// redis-cli gets the password from REDISCLI_AUTH (with -a it warns on stderr). Replica reads need READONLY
// on the connection first; without it a replica answers MOVED to its master.
//
// With TLS (ClusterOptions::tls, a TlsCerts of tls_redis.hpp) every node speaks only TLS: --port 0 and
// --tls-port on the node's port, so that every port the cluster names (CLUSTER SLOTS, NODES, SHARDS'
// tls-port, MOVED and ASK) is a TLS port and nothing can reach a node in plain text; --tls-cluster yes (the
// bus) and --tls-replication yes, the server certificate (SAN DNS:localhost, IP:127.0.0.1: the store checks
// each node's own address) and its CA, --tls-auth-clients no (pass {"--tls-auth-clients", "yes"} in
// extra_args to ask clients for a certificate; they come after the harness' own), and the client
// certificate shown when a node is the client (the server certificate is for serverAuth only). redis-cli
// --cluster create runs with --tls --cacert --cert --key, and the harness' own commands (command(),
// commands(), the waits; access() for the free functions) go through AdminLink over TLS, verifying the CA
// and 127.0.0.1, showing the client certificate. url() is then rediss+cluster://. A plain command_at() on
// a node's port gets no answer.
//
// What was seen on 127.0.0.1 with the defaults (node timeout 1000 ms), on a loaded 2-core machine:
//  - redis-cli --cluster create returns after about 1 s; the masters say cluster_state:fail for up to about
//    0.7 s after it, and know the others' roles a little later: the constructor takes about 2.1 s.
//  - The masters (all on one host) are the first `masters` nodes in the order given; which replica goes to
//    which master is shuffled ("anti-affinity"), so ask (replicas_of()) rather than assume.
//  - CLUSTER SLOTS lists a replica only once its replication offset is not 0, i.e. after the first write
//    (or REPLCONF ping, every 10 s) on its master; the masters are there from the start.
//  - A SIGKILLed master's replica says ROLE master about 2.4-3 s later (PFAIL after the node timeout, FAIL
//    by the majority of masters, then 500-1000 ms of election delay), and every node agrees on it within
//    milliseconds (wait_failover() took 2.4-2.5 s).
//  - A killed node restarted with its nodes.conf (same ports, same id) rejoins at once: a killed master whose
//    replica was promoted comes back as a replica of the new master (it learns the higher config epoch),
//    full-syncs and is settled in 0.1-0.6 s (its ROLE says "handshake" for the first few ms).
//  - Replies: a key of a slot served elsewhere "MOVED <slot> 127.0.0.1:<port>"; during a migration, a key
//    already moved, at the source "ASK <slot> 127.0.0.1:<target>" (a key not yet moved is served), at the
//    target without ASKING "MOVED <slot> 127.0.0.1:<source>" and with ASKING the value; a multi-key command
//    on keys split between the two "TRYAGAIN Multiple keys request during rehashing of slot". CLUSTER
//    SETSLOT NODE to the target first (as the docs say) ends the migration at once: the target takes the slot
//    with a bumped config epoch and tells the others; every node named it within milliseconds here. A source
//    that still held keys of the slot dropped them silently (it learned of the new owner before its own
//    SETSLOT NODE came, which it then accepted; had it not, it would have refused "Can't assign hashslot ...
//    while I still hold keys for this hash slot"), so finish_migration() refuses while the source
//    (CLUSTER COUNTKEYSINSLOT) holds any.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "redis_server.hpp"
#include "tls_redis.hpp"

extern char **environ;

namespace floodwall::testing {

// One range of CLUSTER SLOTS: slots start..end (both included), the port of the master that serves them and
// the ports of the replicas the node asked lists for them (only those whose replication offset is not 0).
struct ClusterSlotRange {
  uint16_t start = 0;
  uint16_t end = 0;
  int master = -1;
  std::string master_id;
  std::vector<int> replicas;
};

// CLUSTER SLOTS on 127.0.0.1:port after AUTH with the password when there is one (over TLS when `access`
// says so), sorted by start. Empty when the reply is no such list; `error` (when given) then holds the
// reply as text or why there is none.
inline std::vector<ClusterSlotRange> cluster_slots_at(int port, const NodeAccess &access, std::string *error = nullptr,
                                                      double timeout_s = 1.0) {
  std::vector<ClusterSlotRange> out;
  AdminLink link(port, access, timeout_s);
  if (!link.ok()) {
    if (error) *error = link.error();
    return out;
  }
  redisReply *r = link.command({"CLUSTER", "SLOTS"});
  if (!r) {
    if (error) *error = link.error();
  } else if (r->type != REDIS_REPLY_ARRAY) {
    if (error) *error = reply_text(r);
  } else {
    // Each: start, end, then [ip, port, id, ...] for the master and for each replica listed.
    auto node_port = [](const redisReply *n) {
      return n->type == REDIS_REPLY_ARRAY && n->elements >= 2 && n->element[1]->type == REDIS_REPLY_INTEGER
                 ? static_cast<int>(n->element[1]->integer)
                 : -1;
    };
    for (size_t i = 0; i < r->elements; i++) {
      const redisReply *e = r->element[i];
      if (e->type != REDIS_REPLY_ARRAY || e->elements < 3) continue;
      ClusterSlotRange range;
      range.start = static_cast<uint16_t>(e->element[0]->integer);
      range.end = static_cast<uint16_t>(e->element[1]->integer);
      range.master = node_port(e->element[2]);
      if (e->element[2]->type == REDIS_REPLY_ARRAY && e->element[2]->elements >= 3)
        range.master_id = reply_text(e->element[2]->element[2]);
      for (size_t k = 3; k < e->elements; k++) range.replicas.push_back(node_port(e->element[k]));
      out.push_back(std::move(range));
    }
    std::sort(out.begin(), out.end(), [](const auto &a, const auto &b) { return a.start < b.start; });
  }
  if (r) freeReplyObject(r);
  return out;
}

// One line of CLUSTER NODES: "<id> <ip>:<port>@<bus>[,<hostname>] <flags> <master id or -> <ping sent>
// <pong received> <config epoch> <link state> <slot>...".
struct ClusterNodeEntry {
  std::string id;
  int port = -1;
  std::set<std::string> flags;     // myself, master, slave, fail?, fail, handshake, noaddr, nofailover, noflags
  std::string master_id;           // "-" for a master
  std::string link;                // connected or disconnected
  std::vector<std::string> slots;  // "0-5460", "7365", and on the node itself "[7365->-<id>]" or "[7365-<-<id>]"

  bool has(const std::string &flag) const { return flags.count(flag) > 0; }
  bool replica() const { return has("slave"); }
  // Down or not yet known: fail, fail?, handshake or noaddr.
  bool troubled() const { return has("fail") || has("fail?") || has("handshake") || has("noaddr"); }
};

// CLUSTER NODES on 127.0.0.1:port after AUTH with the password when there is one (over TLS when `access`
// says so). Empty when there is no such reply; `error` (when given) then holds the reply as text or why
// there is none.
inline std::vector<ClusterNodeEntry> cluster_nodes_at(int port, const NodeAccess &access, std::string *error = nullptr,
                                                      double timeout_s = 1.0) {
  std::vector<ClusterNodeEntry> out;
  std::string text = command_at_auth(port, access, {"CLUSTER", "NODES"}, timeout_s);
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    ClusterNodeEntry e;
    std::string addr, flags, ping, pong, epoch;
    if (!(words >> e.id >> addr >> flags >> e.master_id >> ping >> pong >> epoch >> e.link)) continue;
    size_t at = addr.find('@');
    size_t colon = addr.rfind(':', at);
    if (at == std::string::npos || colon == std::string::npos) continue;
    e.port = std::atoi(addr.substr(colon + 1, at - colon - 1).c_str());
    std::istringstream flag_words(flags);
    for (std::string f; std::getline(flag_words, f, ',');) e.flags.insert(f);
    for (std::string s; words >> s;) e.slots.push_back(s);
    out.push_back(std::move(e));
  }
  if (out.empty() && error) *error = text.empty() ? "<empty reply>" : text;
  return out;
}

struct ClusterOptions {
  int masters = 3;             // at least 3 (redis-cli --cluster create refuses fewer)
  int replicas = 1;            // of each master
  int node_timeout_ms = 1000;  // cluster-node-timeout
  std::string password;        // every node: --requirepass and --masterauth (the default user's)
  std::string acl_user;        // when not empty, made on every node: ACL SETUSER acl_user on
                               // >acl_password (nopass when it is empty) then acl_rules
  std::string acl_password;
  std::vector<std::string> acl_rules = {"~floodwall:*", "+@all"};
  std::vector<std::string> extra_args;  // passed to every node after the harness' own
  double ready_timeout_s = 20.0;        // for the constructor and restart() to see the cluster settle
  const TlsCerts *tls = nullptr;        // every node speaks only TLS, with these certificates (see the top);
                                        // they must outlive the topology (TlsCerts::shared() does)
};

class ClusterTopology {
 public:
  using Options = ClusterOptions;

  explicit ClusterTopology(Options options = {}) : options_(std::move(options)) {
    access_.password = options_.password;
    if (options_.tls) {
      access_.tls_ca = options_.tls->ca();
      access_.tls_cert = options_.tls->client_cert();
      access_.tls_key = options_.tls->client_key();
    }
    char tmpl[] = "/tmp/floodwall-cluster-XXXXXX";
    if (!mkdtemp(tmpl)) {
      ADD_FAILURE() << "mkdtemp(/tmp/floodwall-cluster-XXXXXX) failed: " << std::strerror(errno);
      std::abort();
    }
    dir_ = tmpl;
    if (options_.masters < 3) fail("masters must be at least 3 (redis-cli --cluster create wants 3)");
    if (options_.replicas < 0) fail("replicas must not be negative");
    std::set<int> taken;
    std::function<int()> port = [&] {
      int p = free_port();
      while (taken.count(p)) p = free_port();
      taken.insert(p);
      return p;
    };
    int count = options_.masters * (1 + options_.replicas);
    for (int i = 0; i < count; i++) {
      int p = port();
      nodes_.push_back(Node{p, port(), -1, false, {}});
    }

    auto deadline = after(options_.ready_timeout_s);
    for (auto &n : nodes_) {
      start_node(n, &port);
      n.id = command(n.port, {"CLUSTER", "MYID"});
      if (n.id.size() != 40) fail("CLUSTER MYID on " + std::to_string(n.port) + " answered " + n.id);
    }
    create_cluster(deadline);
    std::string why = wait_settled(deadline, /*shape=*/true);
    if (!why.empty()) {
      fail("the cluster did not settle in " + std::to_string(options_.ready_timeout_s) + " s; last seen: " + why +
           "\n" + cluster_view() + logs_of(ports()));
    }
  }
  ~ClusterTopology() {
    if (getpid() != owner_) return;  // a forked child leaving through exit() leaves the parent's processes be
    stop_all();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  ClusterTopology(const ClusterTopology &) = delete;
  ClusterTopology &operator=(const ClusterTopology &) = delete;

  const Options &options() const { return options_; }
  const std::string &dir() const { return dir_; }
  bool tls() const { return options_.tls != nullptr; }
  // How the harness reaches a node (the password, and with TLS the CA and the client certificate): for
  // command_at_auth(), cluster_slots_at() and the like on a port of this cluster.
  const NodeAccess &access() const { return access_; }

  // Every node's port, in the order started (running or killed): the first `masters` were made masters.
  std::vector<int> ports() const {
    std::vector<int> out;
    for (const auto &n : nodes_) out.push_back(n.port);
    return out;
  }
  // The nodes not killed (kill_node()) or restarted since, in the order started.
  std::vector<int> live_ports() const {
    std::vector<int> out;
    for (const auto &n : nodes_) {
      if (!n.killed) out.push_back(n.port);
    }
    return out;
  }
  // The slot ranges as CLUSTER SLOTS of the first running node that answers says now; empty, and a
  // failure, when none does.
  std::vector<ClusterSlotRange> slot_ranges() const {
    std::string seen;
    for (int p : live_ports()) {
      std::string error;
      auto ranges = cluster_slots_at(p, access_, &error);
      if (!ranges.empty()) return ranges;
      seen += "  " + std::to_string(p) + ": " + error + "\n";
    }
    ADD_FAILURE() << "no running node answered CLUSTER SLOTS:\n" << seen;
    return {};
  }
  // The masters as CLUSTER SLOTS of a running node says now (see slot_ranges()), in the order of their
  // first slot range.
  std::vector<int> master_ports() const {
    std::vector<int> out;
    for (const auto &r : slot_ranges()) {
      if (std::find(out.begin(), out.end(), r.master) == out.end()) out.push_back(r.master);
    }
    return out;
  }
  // The running replicas as CLUSTER NODES of a running node says now (flagged slave, not failing), in the
  // order started.
  std::vector<int> replica_ports() const {
    return replicas_where([](const ClusterNodeEntry &) { return true; });
  }
  // The running replicas of the master on `port`, as CLUSTER NODES of a running node says now.
  std::vector<int> replicas_of(int master_port) const {
    std::string id = node_id(master_port);
    return replicas_where([&](const ClusterNodeEntry &e) { return e.master_id == id; });
  }
  // The port of the master that serves `slot` as a running node's CLUSTER SLOTS says now; -1, and a
  // failure, when none does.
  int master_of_slot(uint16_t slot) const {
    auto ranges = slot_ranges();
    for (const auto &r : ranges) {
      if (r.start <= slot && slot <= r.end) return r.master;
    }
    if (!ranges.empty()) ADD_FAILURE() << "no master serves slot " << slot << "\n" << cluster_view();
    return -1;
  }
  // The slot of `key` (CLUSTER KEYSLOT on a running node); 0, and a failure, when none answers.
  uint16_t key_slot(const std::string &key) const {
    std::string seen;
    for (int p : live_ports()) {
      std::string reply = command(p, {"CLUSTER", "KEYSLOT", key});
      if (!reply.empty() && reply.find_first_not_of("0123456789") == std::string::npos)
        return static_cast<uint16_t>(std::stoi(reply));
      seen += "  " + std::to_string(p) + ": " + reply + "\n";
    }
    ADD_FAILURE() << "no running node answered CLUSTER KEYSLOT " << key << ":\n" << seen;
    return 0;
  }
  // The master that serves `key`'s slot now (see master_of_slot()).
  int master_of_key(const std::string &key) const { return master_of_slot(key_slot(key)); }
  // The node id of the node on `port` (read when it started; it keeps it across restart()); empty, and a
  // failure, for a port of no node.
  std::string node_id(int port) const {
    for (const auto &n : nodes_) {
      if (n.port == port) return n.id;
    }
    ADD_FAILURE() << "node_id(" << port << "): no node of the cluster";
    return {};
  }
  // Whether the node on `port` was killed (kill_node(), kill_master_of_slot()) and not restarted.
  bool killed(int port) const {
    for (const auto &n : nodes_) {
      if (n.port == port) return n.killed;
    }
    return false;
  }

  // `prefix` + "127.0.0.1:P1,127.0.0.1:P2,...": every node (running or not), or only `seeds`. prefix is the
  // scheme and any credentials, e.g. "redis+cluster://" or "redis+cluster://user:secret@"; an empty one is
  // "redis+cluster://", or "rediss+cluster://" with TLS.
  std::string url(const std::string &prefix = "") const { return url(prefix, ports()); }
  std::string url(const std::string &prefix, const std::vector<int> &seeds) const {
    std::string out = prefix.empty() ? (tls() ? "rediss+cluster://" : "redis+cluster://") : prefix;
    for (size_t i = 0; i < seeds.size(); i++) out += (i ? ",127.0.0.1:" : "127.0.0.1:") + std::to_string(seeds[i]);
    return out;
  }

  // One command to the node on `port` (argv form), after AUTH with the password when there is one (over TLS
  // with tls): the reply as text (see command_at).
  std::string command(int port, std::initializer_list<std::string> args, double timeout_s = 1.0) const {
    return command_at_auth(port, access_, args, timeout_s);
  }
  // Several commands in order on one connection to the node on `port` (see commands_at_auth), e.g. SET then
  // WAIT, or READONLY then a read on a replica.
  std::vector<std::string> commands(int port, const std::vector<std::vector<std::string>> &list,
                                    double timeout_s = 1.0) const {
    return commands_at_auth(port, access_, list, timeout_s);
  }
  // A command about `key` (argv form) sent to the master of its slot as a running node says now, then
  // wherever it is redirected, like redis-cli -c: after "MOVED <slot> <host>:<port>" again to that port,
  // after "ASK <slot> <host>:<port>" to that port with ASKING first on the same connection. At most 5
  // redirections; the last reply as text (a redirection still, after 5).
  std::string command_on_key(const std::string &key, const std::vector<std::string> &args,
                             double timeout_s = 1.0) const {
    int port = master_of_key(key);
    bool asking = false;
    std::string reply;
    for (int hop = 0; hop <= 5; hop++) {
      if (asking) {
        auto replies = commands(port, {{"ASKING"}, args}, timeout_s);
        reply = replies[0] == "OK" ? replies[1] : replies[0];
      } else {
        reply = commands(port, {args}, timeout_s)[0];
      }
      int to = redirect_port(reply, "MOVED ");
      asking = false;
      if (to < 0) {
        to = redirect_port(reply, "ASK ");
        asking = to > 0;
      }
      if (to < 0) break;
      port = to;
    }
    return reply;
  }

  // The last `lines` lines of the log of the node on `port`.
  std::string log_tail(int port, size_t lines = 20) const {
    std::ifstream f(log_path(port));
    std::deque<std::string> last;
    for (std::string line; std::getline(f, line);) {
      if (line.empty()) continue;
      last.push_back(line);
      if (last.size() > lines) last.pop_front();
    }
    std::string out;
    for (const auto &l : last) out += "  " + l + "\n";
    return out;
  }
  // What each running node says: cluster_state, ROLE, and its CLUSTER NODES in short (port, flags, the
  // master's port for a replica, the slots), one line each.
  std::string cluster_view() const {
    std::string out;
    for (int p : live_ports()) {
      std::string info = command(p, {"CLUSTER", "INFO"});
      size_t at = info.find("cluster_state:");
      std::string state = at == std::string::npos ? info : info.substr(at, info.find('\r', at) - at);
      out += "  node " + std::to_string(p) + ": " + state + "; ROLE " + command(p, {"ROLE"}) + "; knows";
      std::string error;
      auto entries = cluster_nodes_at(p, access_, &error);
      std::map<std::string, int> port_of_id;
      for (const auto &e : entries) port_of_id[e.id] = e.port;
      for (const auto &e : entries) {
        std::string flags;
        for (const auto &f : e.flags) flags += (flags.empty() ? "" : ",") + f;
        out += " " + std::to_string(e.port) + "(" + flags;
        if (e.replica()) out += " of " + std::to_string(port_of_id.count(e.master_id) ? port_of_id[e.master_id] : -1);
        for (const auto &s : e.slots) out += " " + s;
        out += ")";
      }
      out += error + "\n";
    }
    return out;
  }

  // SIGKILLs the node on `port` (a failure when it is no running node of the cluster).
  void kill_node(int port) {
    for (auto &n : nodes_) {
      if (n.port != port) continue;
      if (n.killed || n.pid <= 0) break;
      kill(n.pid, SIGCONT);
      kill(n.pid, SIGKILL);
      waitpid(n.pid, nullptr, 0);
      n.pid = -1;
      n.killed = true;
      return;
    }
    ADD_FAILURE() << "kill_node(" << port << "): no running node of the cluster";
  }
  // SIGKILLs the master of `slot` (as a running node says now) and returns its port; -1, and a failure, when
  // there is none.
  int kill_master_of_slot(uint16_t slot) {
    int port = master_of_slot(slot);
    if (port < 0) return -1;
    if (killed(port)) {
      ADD_FAILURE() << "the master of slot " << slot << ", " << port << ", was killed already";
      return -1;
    }
    kill_node(port);
    return port;
  }
  // Waits until every running node's CLUSTER SLOTS names one master for `slot` other than old_port, ROLE
  // on it says master and every running node says cluster_state:ok, and returns its port; -1, and a failure
  // (with what was last seen and logs), after timeout_s.
  int wait_failover(uint16_t slot, int old_port, double timeout_s = 15.0) {
    auto deadline = after(timeout_s);
    std::string seen;
    for (;;) {
      seen.clear();
      std::set<int> named;
      for (int p : live_ports()) {
        std::string error;
        int master = -1;
        for (const auto &r : cluster_slots_at(p, access_, &error)) {
          if (r.start <= slot && slot <= r.end) master = r.master;
        }
        named.insert(master);
        seen += "  " + std::to_string(p) + " names " + std::to_string(master) + error + " for slot " +
                std::to_string(slot) + "\n";
      }
      int port = *named.begin();
      if (named.size() == 1 && port > 0 && port != old_port) {
        std::string role = command(port, {"ROLE"});
        std::string state = all_state_ok();
        seen += "  ROLE on " + std::to_string(port) + ": " + role + (state.empty() ? "" : "; " + state) + "\n";
        if (role.rfind("master ", 0) == 0 && state.empty()) return port;
      }
      if (clock::now() > deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ADD_FAILURE() << "no failover of slot " << slot << " away from " << old_port << " in " << timeout_s
                  << " s; last seen:\n"
                  << seen << cluster_view() << logs_of(live_ports(), 8);
    return -1;
  }
  // Starts the killed node on `port` again, on its ports, with its nodes.conf (so it knows the cluster and
  // its id; a master that was failed over comes back as a replica of the new one) and the ACL user, and waits
  // (ready_timeout_s) for the cluster to settle with it (see the top). A failure when it does not.
  void restart(int port) {
    Node *node = nullptr;
    for (auto &n : nodes_) {
      if (n.port == port) node = &n;
    }
    if (!node || !node->killed) {
      ADD_FAILURE() << "restart(" << port << "): no killed node of the cluster";
      return;
    }
    start_node(*node);
    node->killed = false;
    std::string why = wait_settled(after(options_.ready_timeout_s), /*shape=*/false);
    if (!why.empty()) {
      ADD_FAILURE() << "the cluster did not settle in " << options_.ready_timeout_s << " s after restarting " << port
                    << "; last seen: " << why << "\n"
                    << cluster_view() << logs_of({port});
    }
  }

  // A slot migration in steps, as redis-cli --cluster reshard does it. begin_migration(): CLUSTER SETSLOT
  // slot IMPORTING <source id> on the target, then CLUSTER SETSLOT slot MIGRATING <target id> on the source.
  // Failures when either does not answer OK.
  void begin_migration(uint16_t slot, int from_port, int to_port) {
    expect_ok(to_port, {"CLUSTER", "SETSLOT", std::to_string(slot), "IMPORTING", node_id(from_port)});
    expect_ok(from_port, {"CLUSTER", "SETSLOT", std::to_string(slot), "MIGRATING", node_id(to_port)});
  }
  // MIGRATE 127.0.0.1 <to> "" 0 5000 [AUTH password] KEYS keys... on the source: the reply, "OK" (or "NOKEY"
  // when none of them is there). A failure when it is neither, or when a key is not of `slot`.
  std::string migrate_keys(uint16_t slot, int from_port, int to_port, const std::vector<std::string> &keys) {
    for (const auto &k : keys) {
      uint16_t s = key_slot(k);
      if (s != slot) ADD_FAILURE() << "migrate_keys: key " << k << " is of slot " << s << ", not " << slot;
    }
    std::vector<std::string> args = {"MIGRATE", "127.0.0.1", std::to_string(to_port), "", "0", "5000"};
    if (!options_.password.empty()) args.insert(args.end(), {"AUTH", options_.password});
    args.push_back("KEYS");
    args.insert(args.end(), keys.begin(), keys.end());
    std::string reply = commands(from_port, {args}, 6.0)[0];
    if (reply != "OK" && reply != "NOKEY") {
      ADD_FAILURE() << "MIGRATE of " << keys.size() << " key(s) of slot " << slot << " from " << from_port << " to "
                    << to_port << " answered " << reply;
    }
    return reply;
  }
  // CLUSTER SETSLOT slot NODE <target id> on the target, then on every other master (the source among them),
  // then waits (ready_timeout_s) until every running node's CLUSTER SLOTS names the target for the slot.
  // Failures when a master does not answer OK or the nodes do not agree in time; a failure, and nothing
  // sent, while the source (the master of the slot as a running node says) still holds keys of the slot:
  // they would be lost (see the top).
  void finish_migration(uint16_t slot, int to_port) {
    std::vector<int> masters = master_ports();
    std::string id = node_id(to_port);
    int from_port = master_of_slot(slot);
    if (from_port > 0 && from_port != to_port) {
      std::string left = command(from_port, {"CLUSTER", "COUNTKEYSINSLOT", std::to_string(slot)});
      if (left != "0") {
        ADD_FAILURE() << "finish_migration(" << slot << ", " << to_port << "): the source " << from_port
                      << " still holds keys of the slot (CLUSTER COUNTKEYSINSLOT: " << left
                      << "); migrate_keys() them first";
        return;
      }
    }
    expect_ok(to_port, {"CLUSTER", "SETSLOT", std::to_string(slot), "NODE", id});
    for (int m : masters) {
      if (m != to_port) expect_ok(m, {"CLUSTER", "SETSLOT", std::to_string(slot), "NODE", id});
    }
    auto deadline = after(options_.ready_timeout_s);
    std::string seen;
    for (;;) {
      seen.clear();
      for (int p : live_ports()) {
        std::string error;
        for (const auto &r : cluster_slots_at(p, access_, &error)) {
          if (r.start <= slot && slot <= r.end && r.master != to_port)
            seen += "  " + std::to_string(p) + " names " + std::to_string(r.master) + "\n";
        }
        if (!error.empty()) seen += "  " + std::to_string(p) + ": " + error + "\n";
      }
      if (seen.empty()) return;
      if (clock::now() > deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ADD_FAILURE() << "not every node names " << to_port << " for slot " << slot << " in " << options_.ready_timeout_s
                  << " s after CLUSTER SETSLOT NODE:\n"
                  << seen << cluster_view();
  }

 private:
  using clock = std::chrono::steady_clock;
  static clock::time_point after(double seconds) {
    return clock::now() + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(seconds));
  }

  struct Node {
    int port;
    int bus_port;  // --cluster-port
    pid_t pid;
    bool killed;
    std::string id;
  };

  std::string log_path(int port) const { return dir_ + "/node-" + std::to_string(port) + ".log"; }

  // The running replicas (in the order started) that CLUSTER NODES of the first running node that answers
  // lists as slave, not failing, and for which `pick` says yes.
  template <class Pick>
  std::vector<int> replicas_where(Pick pick) const {
    for (int p : live_ports()) {
      auto entries = cluster_nodes_at(p, access_);
      if (entries.empty()) continue;
      std::vector<int> out;
      for (int q : live_ports()) {
        for (const auto &e : entries) {
          if (e.port == q && e.replica() && !e.troubled() && pick(e)) out.push_back(q);
        }
      }
      return out;
    }
    ADD_FAILURE() << "no running node answered CLUSTER NODES";
    return {};
  }

  // The port of "MOVED 3999 127.0.0.1:6381" (or ASK, per `kind`), else -1.
  static int redirect_port(const std::string &reply, const std::string &kind) {
    if (reply.rfind(kind, 0) != 0) return -1;
    size_t colon = reply.rfind(':');
    if (colon == std::string::npos) return -1;
    return std::atoi(reply.c_str() + colon + 1);
  }

  void expect_ok(int port, std::initializer_list<std::string> args) {
    std::string reply = command(port, args);
    if (reply != "OK") {
      std::string line;
      for (const auto &a : args) line += (line.empty() ? "" : " ") + a;
      ADD_FAILURE() << line << " on " << port << " answered " << reply;
    }
  }

  // Forks and execs redis-server for `node`, waits for PING to answer PONG, then makes the ACL user; a
  // failure and abort when the process exits or does not answer in 5 s.
  // redraw (a node's first start only): another process took the node's port or bus port between its draw
  // and redis-server's bind ("Address already in use", once in make test's lanes): both drawn again, up to
  // three times. A restart keeps its ports: the cluster knows the node by them.
  void start_node(Node &node, const std::function<int()> *redraw = nullptr) {
    for (int attempt = 0;; attempt++) {
      std::string why;
      pid_t pid = spawn_redis(node_argv(node), node.port, log_path(node.port), access_, why);
      if (pid >= 0) {
        node.pid = pid;
        break;
      }
      std::string log = log_tail(node.port);
      if (!redraw || attempt == 2 || log.find("Address already in use") == std::string::npos)
        fail(why + "\nits log:\n" + log);
      node.port = (*redraw)();
      node.bus_port = (*redraw)();
    }
    if (!options_.acl_user.empty()) {
      std::vector<std::string> setuser = {"ACL", "SETUSER", options_.acl_user, "on"};
      setuser.push_back(options_.acl_password.empty() ? "nopass" : ">" + options_.acl_password);
      setuser.insert(setuser.end(), options_.acl_rules.begin(), options_.acl_rules.end());
      std::string reply = commands(node.port, {setuser})[0];
      if (reply != "OK")
        fail("ACL SETUSER " + options_.acl_user + " on " + std::to_string(node.port) + " answered " + reply);
    }
  }

  std::vector<std::string> node_argv(const Node &node) {
    std::string data_dir = dir_ + "/node-" + std::to_string(node.port);
    std::error_code ec;
    std::filesystem::create_directories(data_dir, ec);
    std::vector<std::string> argv = {"redis-server",
                                     "--port",
                                     options_.tls ? "0" : std::to_string(node.port),
                                     "--bind",
                                     "127.0.0.1",
                                     "--cluster-enabled",
                                     "yes",
                                     "--cluster-port",
                                     std::to_string(node.bus_port),
                                     "--cluster-config-file",
                                     dir_ + "/nodes-" + std::to_string(node.port) + ".conf",
                                     "--cluster-node-timeout",
                                     std::to_string(options_.node_timeout_ms),
                                     "--dir",
                                     data_dir,
                                     "--logfile",
                                     log_path(node.port),
                                     "--save",
                                     "",
                                     "--appendonly",
                                     "no",
                                     "--repl-diskless-sync-delay",
                                     "0"};
    if (!options_.password.empty()) {
      argv.insert(argv.end(), {"--requirepass", options_.password, "--masterauth", options_.password});
    }
    if (options_.tls) {
      const TlsCerts &certs = *options_.tls;
      argv.insert(argv.end(), {"--tls-port", std::to_string(node.port), "--tls-cluster", "yes", "--tls-replication",
                               "yes", "--tls-cert-file", certs.server_cert(), "--tls-key-file", certs.server_key(),
                               "--tls-ca-cert-file", certs.ca(), "--tls-auth-clients", "no", "--tls-client-cert-file",
                               certs.client_cert(), "--tls-client-key-file", certs.client_key()});
    }
    argv.insert(argv.end(), options_.extra_args.begin(), options_.extra_args.end());
    return argv;
  }

  // redis-cli [--tls --cacert CA --cert C --key K] --cluster create 127.0.0.1:P... --cluster-replicas R
  // --cluster-yes, with the password in REDISCLI_AUTH; its output goes to <dir>/create.log. A failure and
  // abort when it does not exit 0 by the deadline.
  void create_cluster(clock::time_point deadline) {
    std::vector<std::string> argv = {"redis-cli"};
    if (options_.tls) {
      argv.insert(argv.end(),
                  {"--tls", "--cacert", access_.tls_ca, "--cert", access_.tls_cert, "--key", access_.tls_key});
    }
    argv.insert(argv.end(), {"--cluster", "create"});
    for (const auto &n : nodes_) argv.push_back("127.0.0.1:" + std::to_string(n.port));
    argv.insert(argv.end(), {"--cluster-replicas", std::to_string(options_.replicas), "--cluster-yes"});
    std::vector<char *> args;
    for (const auto &a : argv) args.push_back(const_cast<char *>(a.c_str()));
    args.push_back(nullptr);
    std::vector<std::string> env_strings;
    for (char **e = environ; *e; e++) {
      if (std::strncmp(*e, "REDISCLI_AUTH=", 14) != 0) env_strings.push_back(*e);
    }
    if (!options_.password.empty()) env_strings.push_back("REDISCLI_AUTH=" + options_.password);
    std::vector<char *> env;
    for (auto &s : env_strings) env.push_back(s.data());
    env.push_back(nullptr);
    std::string log = dir_ + "/create.log";
    create_pid_ = fork();
    if (create_pid_ == 0) {
      int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
      }
      int null_fd = open("/dev/null", O_RDONLY);
      if (null_fd >= 0) {
        dup2(null_fd, 0);
        close(null_fd);
      }
      execvpe(args[0], args.data(), env.data());
      _exit(127);
    }
    if (create_pid_ < 0) fail("fork failed: " + std::string(std::strerror(errno)));
    for (;;) {
      int status;
      if (waitpid(create_pid_, &status, WNOHANG) == create_pid_) {
        create_pid_ = -1;
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return;
        fail(join_argv(argv) + " failed (" + exit_text(status) +
             (WIFEXITED(status) && WEXITSTATUS(status) == 127 ? "; is Debian's redis-tools installed?" : "") +
             "); its output:\n" + file_text(log) + cluster_view());
      }
      if (clock::now() > deadline) {
        fail(join_argv(argv) + " did not finish in " + std::to_string(options_.ready_timeout_s) + " s; its output:\n" +
             file_text(log) + cluster_view() + logs_of(ports(), 8));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
  }

  // "" when every running node says cluster_state:ok, else what the first one that does not says.
  std::string all_state_ok() const {
    for (int p : live_ports()) {
      std::string info = command(p, {"CLUSTER", "INFO"});
      if (info.find("cluster_state:ok") == std::string::npos) {
        size_t at = info.find("cluster_state:");
        return std::to_string(p) + " says " +
               (at == std::string::npos ? info : info.substr(at, info.find('\r', at) - at));
      }
    }
    return "";
  }

  // "" when the cluster has settled (see the top; with `shape`, also masters x replicas as asked), else why
  // not.
  std::string unsettled(bool shape) const {
    std::string state = all_state_ok();
    if (!state.empty()) return state;
    std::vector<int> live = live_ports();
    std::string first_slots;
    std::string first_view;
    std::map<int, int> master_of;  // replica port -> master port, as the first node says
    for (int p : live) {
      std::string error;
      auto ranges = cluster_slots_at(p, access_, &error);
      std::string slots;
      uint32_t next = 0;
      for (const auto &r : ranges) {
        if (r.start != next) return std::to_string(p) + "'s CLUSTER SLOTS leaves slot " + std::to_string(next) + " out";
        next = static_cast<uint32_t>(r.end) + 1;
        slots += std::to_string(r.start) + "-" + std::to_string(r.end) + ":" + std::to_string(r.master) + " ";
      }
      if (next != 16384)
        return std::to_string(p) + "'s CLUSTER SLOTS covers slots up to " + std::to_string(next) + error;
      if (first_slots.empty()) first_slots = slots;
      if (slots != first_slots) {
        return std::to_string(live[0]) + "'s CLUSTER SLOTS is " + first_slots + "but " + std::to_string(p) + "'s is " +
               slots;
      }

      auto entries = cluster_nodes_at(p, access_, &error);
      std::map<std::string, int> port_of_id;
      for (const auto &e : entries) port_of_id[e.id] = e.port;
      std::string view;
      std::map<int, int> roles;
      for (int q : live) {
        const ClusterNodeEntry *entry = nullptr;
        for (const auto &e : entries) {
          if (e.port == q) entry = &e;
        }
        if (!entry) return std::to_string(p) + "'s CLUSTER NODES does not list " + std::to_string(q) + error;
        if (entry->troubled())
          return std::to_string(p) + "'s CLUSTER NODES flags " + std::to_string(q) + " as troubled";
        int master = entry->replica() ? (port_of_id.count(entry->master_id) ? port_of_id[entry->master_id] : -1) : 0;
        roles[q] = master;
        view += std::to_string(q) + (master ? " replica of " + std::to_string(master) : " master") + "; ";
      }
      if (first_view.empty()) {
        first_view = view;
        master_of = roles;
      }
      if (view != first_view) {
        return std::to_string(live[0]) + "'s CLUSTER NODES says " + first_view + "but " + std::to_string(p) +
               "'s says " + view;
      }
    }
    std::map<int, int> replica_count;
    for (const auto &[port, master] : master_of) {
      if (!master) {
        replica_count[port] += 0;
        continue;
      }
      replica_count[master]++;
      std::string role = command(port, {"ROLE"});
      if (role.rfind("slave 127.0.0.1 " + std::to_string(master) + " connected ", 0) != 0)
        return "ROLE on replica " + std::to_string(port) + " says " + role;
    }
    if (shape) {
      int masters = 0;
      for (const auto &[port, count] : replica_count) {
        masters++;
        if (count != options_.replicas) {
          return std::to_string(port) + " has " + std::to_string(count) + " replica(s), not " +
                 std::to_string(options_.replicas);
        }
      }
      if (masters != options_.masters)
        return std::to_string(masters) + " masters, not " + std::to_string(options_.masters);
    }
    return "";
  }
  // Waits for unsettled() to say nothing until the deadline: "" then, else its last word.
  std::string wait_settled(clock::time_point deadline, bool shape) const {
    for (;;) {
      std::string why = unsettled(shape);
      if (why.empty() || clock::now() > deadline) return why;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

  std::string logs_of(const std::vector<int> &ports, size_t lines = 20) const {
    std::string out;
    for (int p : ports) out += "log of node " + std::to_string(p) + ":\n" + log_tail(p, lines);
    return out;
  }
  static std::string file_text(const std::string &path) {
    std::ifstream f(path);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
  }

  void stop_all() {
    for (auto &n : nodes_) {
      if (n.pid <= 0) continue;
      kill(n.pid, SIGCONT);
      kill(n.pid, SIGKILL);
      waitpid(n.pid, nullptr, 0);
      n.pid = -1;
    }
    if (create_pid_ > 0) {
      kill(create_pid_, SIGKILL);
      waitpid(create_pid_, nullptr, 0);
      create_pid_ = -1;
    }
  }
  // A failure, then everything started is killed and the temp dir removed, then abort.
  [[noreturn]] void fail(const std::string &what) {
    ADD_FAILURE() << "ClusterTopology: " << what;
    stop_all();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
    std::abort();
  }

  Options options_;
  NodeAccess access_;
  std::string dir_;
  std::vector<Node> nodes_;
  pid_t create_pid_ = -1;
  pid_t owner_ = getpid();
};

}  // namespace floodwall::testing
