// Redis Sentinel test fixtures: a real topology of redis-server processes on free ports, all on 127.0.0.1, in
// a temp dir of its own. A missing redis-server, a process that does not come up or a topology that does not
// settle fails the test loudly and aborts (after killing what it started); nothing skips.
//
//   SentinelOptions     what a topology is started with besides the master's name: a password for the data
//                       nodes (requirepass and masterauth; the sentinels get it as auth-pass), one for the
//                       sentinels themselves (requirepass and sentinel-pass), extra redis-server arguments for
//                       the data nodes, TLS (certificates, and whether clients must show one), and how long
//                       the start may take.
//   SentinelTopology    a master, one replica of it and three sentinels monitoring it under one name (quorum
//                       2, down-after 1000 ms, failover-timeout 3000 ms, parallel-syncs 1). The constructor
//                       returns once the replica's link to the master is up and every sentinel names the
//                       master, knows the replica (connected, its INFO read) and knows the other two
//                       sentinels. Then: who the master is now (as sentinel 0 says), a SENTINEL FAILOVER, a
//                       SIGKILL of the master, waits for the sentinels to agree on a new master and for a
//                       node to replicate from one, and a restart of killed nodes as replicas. Each process
//                       logs to a file in the temp dir (see log_tail()); failures quote the relevant ones.
//                       The destructor SIGKILLs every process it started and removes the temp dir.
//   sentinel_entries()  a SENTINEL command's list of instances (replicas, sentinels, masters) as maps of
//                       field to value, which command_at() cannot render.
//
// The data nodes run with --repl-diskless-sync-delay 0 (else a master waits 5 s for more replicas before
// the first full sync) and no config file (a sentinel's CONFIG REWRITE on them fails; it is ignored). The
// sentinels' config files are theirs to rewrite, as sentinels do on start and on every change (Redis 7.0
// writes auth-pass and sentinel-pass back unquoted, so a password with a space would not survive a restart
// of a sentinel; the harness never restarts one, but plain passwords are the safe kind).
//
// With TLS (SentinelOptions::tls) every process also listens on a TLS port of its own beside its plain one
// (tls-port and port both set), with the server certificate of the TlsCerts given (SAN 127.0.0.1) and its
// CA, and tls-replication yes: a replica replicates from its master's TLS port and announces its own TLS
// port, and the sentinels monitor the data nodes' TLS ports, talk TLS to them and to each other (each
// announces its TLS port in its hello messages). So every port a sentinel names (the master, the replicas,
// the other sentinels) is a TLS port, and so is every port this harness hands out as a node's address:
// master_port(), data_ports(), sentinel_ports(), wait_master_changed(). The harness' own commands (command(),
// and the waits) go to the plain port beside it (admin_port()); command_at() on a TLS port gets no answer.
// Every process shows the client certificate when it is the client (tls-client-cert-file: the server
// certificate is for serverAuth only); with tls_mutual every process also asks its clients for one of the
// CA (tls-auth-clients yes). To ask only on the data nodes, pass {"--tls-auth-clients", "yes"} in
// extra_args (they come after the harness' own, and the last one wins).
//
// Timings seen with the settings above on 127.0.0.1: the constructor takes about 2 s (the sentinels find
// each other through hello messages every 2 s); SENTINEL FAILOVER to all three agreeing about 1 s; a
// SIGKILLed master to all three agreeing about 2.3 s (down-after 1 s, then the vote, then the promoted
// replica's INFO). A demoted old master that is still running is made a replica only about 10 s after a
// failover: a sentinel waits 8 s of it reporting the wrong role, and reads its INFO every 10 s.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
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

namespace floodwall::testing {

// The elements of a SENTINEL command's reply that lists instances (SENTINEL replicas, sentinels, masters),
// each a map of field to value ("ip", "port", "flags", "info-refresh", ...), sent to the sentinel on
// 127.0.0.1:port after AUTH with `password` when it is not empty. Empty when the reply is no such list;
// `error` (when given) then holds the reply as text or why there is none.
inline std::vector<std::map<std::string, std::string>> sentinel_entries(int port, const std::string &password,
                                                                        std::initializer_list<std::string> args,
                                                                        std::string *error = nullptr,
                                                                        double timeout_s = 1.0) {
  std::vector<std::map<std::string, std::string>> out;
  std::string why;
  redisContext *c = connect_at(port, password, timeout_s, &why);
  if (!c) {
    if (error) *error = why;
    return out;
  }
  std::vector<const char *> argv;
  std::vector<size_t> lens;
  for (const auto &a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  auto *r = static_cast<redisReply *>(redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data()));
  if (!r) {
    if (error) *error = std::string("<") + c->errstr + ">";
  } else if (r->type != REDIS_REPLY_ARRAY) {
    if (error) *error = reply_text(r);
  } else {
    for (size_t i = 0; i < r->elements; i++) {
      const redisReply *e = r->element[i];
      std::map<std::string, std::string> entry;
      if (e->type == REDIS_REPLY_ARRAY) {
        for (size_t k = 0; k + 1 < e->elements; k += 2)
          entry[reply_text(e->element[k])] = reply_text(e->element[k + 1]);
      }
      out.push_back(std::move(entry));
    }
  }
  if (r) freeReplyObject(r);
  redisFree(c);
  return out;
}

struct SentinelOptions {
  std::string password;                 // data nodes: --requirepass and --masterauth; sentinels: auth-pass
  std::string sentinel_password;        // the sentinels' own: requirepass and sentinel sentinel-pass
  std::vector<std::string> extra_args;  // passed to both data nodes after the harness' own
  const TlsCerts *tls = nullptr;        // every process also listens with TLS, with these certificates (see
                                        // above); they must outlive the topology (TlsCerts::shared() does)
  bool tls_mutual = false;              // with tls: clients must show a certificate of tls' CA
  double ready_timeout_s = 20.0;        // for the constructor and restart_killed() to see everything settle
};

class SentinelTopology {
 public:
  using Options = SentinelOptions;

  explicit SentinelTopology(std::string name = "fwmaster", Options options = {})
      : name_(std::move(name)), options_(std::move(options)) {
    char tmpl[] = "/tmp/floodwall-sentinel-XXXXXX";
    if (!mkdtemp(tmpl)) {
      ADD_FAILURE() << "mkdtemp(/tmp/floodwall-sentinel-XXXXXX) failed: " << std::strerror(errno);
      std::abort();
    }
    dir_ = tmpl;
    std::set<int> taken;
    auto port = [&] {
      int p = free_port();
      while (taken.count(p)) p = free_port();
      taken.insert(p);
      return p;
    };
    if (options_.tls_mutual && !options_.tls) fail("tls_mutual needs tls (the certificates)");
    auto process = [&] {
      int plain = port();
      return Process{plain, options_.tls ? port() : 0, -1, false};
    };
    for (int i = 0; i < 2; i++) data_.push_back(process());
    for (int i = 0; i < 3; i++) sentinels_.push_back(process());

    auto deadline = after(options_.ready_timeout_s);
    start_data(data_[0], 0);
    start_data(data_[1], data_[0].addr());
    if (!wait_link_up(data_[1].port, deadline)) fail("the replica's link to the master never came up");
    for (auto &s : sentinels_) start_sentinel(s);
    wait_sentinels_ready(deadline);
  }
  ~SentinelTopology() {
    if (getpid() != owner_) return;  // a forked child leaving through exit() leaves the parent's processes be
    stop_all();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  SentinelTopology(const SentinelTopology &) = delete;
  SentinelTopology &operator=(const SentinelTopology &) = delete;

  const std::string &name() const { return name_; }
  const Options &options() const { return options_; }
  const std::string &dir() const { return dir_; }
  bool tls() const { return options_.tls != nullptr; }

  // The master as sentinel 0 says now (SENTINEL get-master-addr-by-name); -1, and a failure, when it says none.
  // With TLS, its TLS port.
  int master_port() const {
    std::string said = master_as_seen_by(sentinels_[0].port);
    int port = port_of(said);
    if (port < 0) ADD_FAILURE() << "sentinel " << sentinels_[0].port << " names no master " << name_ << ": " << said;
    return port;
  }
  // Both data nodes: the first master, then its first replica (the ports stay; the roles may not). With TLS,
  // their TLS ports, as the sentinels name them.
  std::vector<int> data_ports() const { return {data_[0].addr(), data_[1].addr()}; }
  // The sentinels' ports; with TLS, their TLS ports.
  std::vector<int> sentinel_ports() const {
    std::vector<int> ports;
    for (const auto &s : sentinels_) ports.push_back(s.addr());
    return ports;
  }
  // The plain port of the process that listens on `port` (its plain or its TLS port): where the harness'
  // own commands go. A port of no process of the topology is returned as it is.
  int admin_port(int port) const {
    for (const auto *group : {&data_, &sentinels_}) {
      for (const auto &p : *group) {
        if (p.port == port || (p.tls_port > 0 && p.tls_port == port)) return p.port;
      }
    }
    return port;
  }
  // `prefix` + "127.0.0.1:S1,127.0.0.1:S2,127.0.0.1:S3/" + name(): prefix is the scheme and any credentials,
  // e.g. "redis+sentinel://", "redis+sentinel://:secret@" or "rediss+sentinel://"; empty, the scheme of the
  // topology ("rediss+sentinel://" with TLS). A rediss scheme names the sentinels' TLS ports (a failure when
  // the topology has none), any other their plain ones.
  std::string sentinel_url(const std::string &prefix = "") const {
    std::string url = prefix.empty() ? (tls() ? "rediss+sentinel://" : "redis+sentinel://") : prefix;
    bool over_tls = url.rfind("rediss", 0) == 0;
    if (over_tls && !tls()) ADD_FAILURE() << "sentinel_url(\"" << url << "\"): the topology was started without TLS";
    for (size_t i = 0; i < sentinels_.size(); i++) {
      url +=
          (i ? ",127.0.0.1:" : "127.0.0.1:") + std::to_string(over_tls ? sentinels_[i].tls_port : sentinels_[i].port);
    }
    return url + "/" + name_;
  }

  // One command to a node of the topology (argv form), on its plain port (`port` may be its TLS port), with
  // AUTH by the password its kind needs (a sentinel's or a data node's): the reply as text (see command_at).
  std::string command(int port, std::initializer_list<std::string> args, double timeout_s = 1.0) const {
    return command_at_auth(admin_port(port), password_for(port), args, timeout_s);
  }
  // Whether the data node on `port` (either of its ports) was killed (kill_master()) and not restarted.
  bool killed(int port) const {
    for (const auto &d : data_) {
      if (d.port == port || d.addr() == port) return d.killed;
    }
    return false;
  }
  // The last `lines` lines of the log of the process on `port` (a data node or a sentinel, either port).
  std::string log_tail(int port, size_t lines = 20) const {
    std::ifstream f(log_path(port));
    std::deque<std::string> last;
    for (std::string line; std::getline(f, line);) {
      last.push_back(line);
      if (last.size() > lines) last.pop_front();
    }
    std::string out;
    for (const auto &l : last) out += "  " + l + "\n";
    return out;
  }

  // SENTINEL FAILOVER to sentinel `sentinel` (0, 1 or 2): a failover without asking the others; a failure
  // unless it answers OK. See wait_master_changed().
  void failover(size_t sentinel = 0) {
    std::string reply = command(sentinels_.at(sentinel).port, {"SENTINEL", "FAILOVER", name_});
    if (reply != "OK") {
      ADD_FAILURE() << "SENTINEL FAILOVER " << name_ << " to sentinel " << sentinels_[sentinel].port << " answered "
                    << reply << "\n"
                    << sentinel_view();
    }
  }
  // SIGKILLs the data node that is master as sentinel 0 says, and returns its port (-1, and a failure, when
  // there is no such node running).
  int kill_master() {
    int port = master_port();
    for (auto &d : data_) {
      if (d.addr() != port) continue;
      if (d.pid <= 0) break;
      kill(d.pid, SIGCONT);
      kill(d.pid, SIGKILL);
      waitpid(d.pid, nullptr, 0);
      d.pid = -1;
      d.killed = true;
      return port;
    }
    ADD_FAILURE() << "the master sentinel 0 names, " << port << ", is no running data node";
    return -1;
  }
  // Waits until all three sentinels name one master other than old_port and its ROLE says master, and
  // returns its port; -1 and a failure (with what was last seen and the sentinels' logs) after timeout_s.
  int wait_master_changed(int old_port, double timeout_s = 15.0) {
    auto deadline = after(timeout_s);
    std::string seen;
    for (;;) {
      std::set<int> named;
      seen.clear();
      for (const auto &s : sentinels_) {
        std::string said = master_as_seen_by(s.port);
        named.insert(port_of(said));
        seen += "  sentinel " + std::to_string(s.port) + " names " + said + "\n";
      }
      int port = *named.begin();
      if (named.size() == 1 && port > 0 && port != old_port) {
        std::string role = command(port, {"ROLE"});
        seen += "  ROLE on " + std::to_string(port) + ": " + role + "\n";
        if (role.rfind("master ", 0) == 0) return port;
      }
      if (clock::now() > deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ADD_FAILURE() << "the sentinels did not agree on a new master (not " << old_port << ") in " << timeout_s
                  << " s; last seen:\n"
                  << seen << sentinel_logs();
    return -1;
  }
  // Waits until ROLE on `port` says it is a replica of master with its link up ("slave 127.0.0.1
  // <master> connected ..."); false and a failure (with the last ROLE) after timeout_s.
  bool wait_replica_of(int port, int master, double timeout_s = 15.0) {
    auto deadline = after(timeout_s);
    std::string role;
    for (;;) {
      role = command(port, {"ROLE"});
      std::istringstream words(role);
      std::string kind, host, of, state;
      words >> kind >> host >> of >> state;
      if (kind == "slave" && of == std::to_string(master) && state == "connected") return true;
      if (clock::now() > deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ADD_FAILURE() << port << " did not become a connected replica of " << master << " in " << timeout_s
                  << " s; last ROLE: " << role << "\n"
                  << sentinel_view() << "log of " << port << ":\n"
                  << log_tail(port);
    return false;
  }
  // Starts every killed data node again on its port as a replica of the master sentinel 0 names (with an
  // empty data set until its full sync), and waits (ready_timeout_s) for its link to that master.
  void restart_killed() {
    int master = master_port();
    if (master < 0) return;
    for (auto &d : data_) {
      if (!d.killed) continue;
      start_data(d, master);
      d.killed = false;
      wait_replica_of(d.port, master, options_.ready_timeout_s);
    }
  }

 private:
  using clock = std::chrono::steady_clock;
  static clock::time_point after(double seconds) {
    return clock::now() + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(seconds));
  }

  struct Process {
    int port;      // plain: the harness' own commands
    int tls_port;  // 0 without TLS
    pid_t pid;
    bool killed;
    // Where the others (and clients) reach it: what the sentinels name.
    int addr() const { return tls_port > 0 ? tls_port : port; }
  };

  std::string log_path(int port) const {
    port = admin_port(port);
    for (const auto &s : sentinels_) {
      if (s.port == port) return dir_ + "/sentinel-" + std::to_string(port) + ".log";
    }
    return dir_ + "/node-" + std::to_string(port) + ".log";
  }
  const std::string &password_for(int port) const {
    port = admin_port(port);
    for (const auto &s : sentinels_) {
      if (s.port == port) return options_.sentinel_password;
    }
    return options_.password;
  }
  // The redis-server settings of TLS for every process: its TLS port, the server certificate, the CA it
  // checks peers against, whether it asks clients for a certificate, the client certificate it shows when
  // it is the client, and TLS for replication (and, on a sentinel, for every link it makes). As name-value
  // pairs.
  std::vector<std::pair<std::string, std::string>> tls_settings(const Process &p) const {
    const TlsCerts &certs = *options_.tls;
    return {{"tls-port", std::to_string(p.tls_port)},
            {"tls-cert-file", certs.server_cert()},
            {"tls-key-file", certs.server_key()},
            {"tls-ca-cert-file", certs.ca()},
            {"tls-auth-clients", options_.tls_mutual ? "yes" : "no"},
            {"tls-client-cert-file", certs.client_cert()},
            {"tls-client-key-file", certs.client_key()},
            {"tls-replication", "yes"}};
  }

  // Forks and execs redis-server with argv, then waits for PING on `port` to answer PONG; a failure and
  // abort when the process exits or does not answer in 5 s.
  pid_t spawn(const std::vector<std::string> &argv, int port) {
    std::string why;
    pid_t pid = spawn_redis(argv, port, log_path(port), password_for(port), why);
    if (pid < 0) fail(why + "\nits log:\n" + log_tail(port));
    return pid;
  }

  void start_data(Process &node, int replica_of) {
    std::string data_dir = dir_ + "/node-" + std::to_string(node.port);
    std::error_code ec;
    std::filesystem::create_directories(data_dir, ec);
    std::vector<std::string> argv = {"redis-server",
                                     "--port",
                                     std::to_string(node.port),
                                     "--bind",
                                     "127.0.0.1",
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
      for (const auto &[name, value] : tls_settings(node)) argv.insert(argv.end(), {"--" + name, value});
    }
    if (replica_of > 0) argv.insert(argv.end(), {"--replicaof", "127.0.0.1", std::to_string(replica_of)});
    argv.insert(argv.end(), options_.extra_args.begin(), options_.extra_args.end());
    node.pid = spawn(argv, node.port);
  }

  void start_sentinel(Process &sentinel) {
    std::string conf = dir_ + "/sentinel-" + std::to_string(sentinel.port) + ".conf";
    {
      std::ofstream f(conf);
      f << "port " << sentinel.port << "\n"
        << "bind 127.0.0.1\n"
        << "daemonize no\n"
        << "dir " << quoted(dir_) << "\n"
        << "logfile " << quoted(log_path(sentinel.port)) << "\n"
        << "sentinel resolve-hostnames no\n"
        << "sentinel monitor " << name_ << " 127.0.0.1 " << data_[0].addr() << " 2\n"
        << "sentinel down-after-milliseconds " << name_ << " 1000\n"
        << "sentinel failover-timeout " << name_ << " 3000\n"
        << "sentinel parallel-syncs " << name_ << " 1\n";
      if (!options_.password.empty()) f << "sentinel auth-pass " << name_ << " " << quoted(options_.password) << "\n";
      if (!options_.sentinel_password.empty()) {
        f << "requirepass " << quoted(options_.sentinel_password) << "\n"
          << "sentinel sentinel-pass " << quoted(options_.sentinel_password) << "\n";
      }
      if (options_.tls) {
        for (const auto &[name, value] : tls_settings(sentinel)) f << name << " " << quoted(value) << "\n";
      }
      f.close();
      if (!f) fail("cannot write " + conf);
    }
    sentinel.pid = spawn({"redis-server", conf, "--sentinel"}, sentinel.port);
  }

  bool wait_link_up(int port, clock::time_point deadline) {
    for (;;) {
      if (command(port, {"INFO", "replication"}).find("master_link_status:up") != std::string::npos) return true;
      if (clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

  // Every sentinel names the master, lists the replica as a plain, connected replica whose INFO it has read,
  // and lists the two other sentinels.
  void wait_sentinels_ready(clock::time_point deadline) {
    std::string master = "127.0.0.1 " + std::to_string(data_[0].addr());
    for (;;) {
      bool ready = true;
      for (const auto &s : sentinels_) {
        if (master_as_seen_by(s.port) != master) {
          ready = false;
          break;
        }
        auto replicas = sentinel_entries(s.port, options_.sentinel_password, {"SENTINEL", "REPLICAS", name_});
        bool replica_ok = replicas.size() == 1 && replicas[0]["port"] == std::to_string(data_[1].addr()) &&
                          replicas[0]["flags"] == "slave" && replicas[0]["role-reported"] == "slave" &&
                          replicas[0]["master-link-status"] == "ok";
        auto sentinels = sentinel_entries(s.port, options_.sentinel_password, {"SENTINEL", "SENTINELS", name_});
        if (!replica_ok || sentinels.size() != 2) {
          ready = false;
          break;
        }
      }
      if (ready) return;
      if (clock::now() > deadline) {
        fail("the sentinels did not settle in " + std::to_string(options_.ready_timeout_s) +
             " s (every one naming master " + master + ", knowing replica " + std::to_string(data_[1].addr()) +
             " and 2 other sentinels); last seen:\n" + sentinel_view() + sentinel_logs());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }

  std::string master_as_seen_by(int sentinel_port) const {
    return command_at_auth(sentinel_port, options_.sentinel_password, {"SENTINEL", "GET-MASTER-ADDR-BY-NAME", name_});
  }
  // The port of "127.0.0.1 6379", else -1.
  static int port_of(const std::string &addr) {
    size_t space = addr.find(' ');
    if (space == std::string::npos || space + 1 >= addr.size()) return -1;
    for (size_t i = space + 1; i < addr.size(); i++) {
      if (addr[i] < '0' || addr[i] > '9') return -1;
    }
    return std::stoi(addr.substr(space + 1));
  }

  // What each sentinel says of the master, the replicas and the other sentinels, one line each.
  std::string sentinel_view() const {
    std::string out;
    for (const auto &s : sentinels_) {
      std::string error;
      out += "  sentinel " + std::to_string(s.port) + ": master " + master_as_seen_by(s.port) + "; replicas";
      for (auto &r : sentinel_entries(s.port, options_.sentinel_password, {"SENTINEL", "REPLICAS", name_}, &error)) {
        out += " " + r["port"] + "(" + r["flags"] + ", link " + r["master-link-status"] + ", info " +
               r["info-refresh"] + " ms ago)";
      }
      out += error + "; sentinels";
      error.clear();
      for (auto &o : sentinel_entries(s.port, options_.sentinel_password, {"SENTINEL", "SENTINELS", name_}, &error)) {
        out += " " + o["port"] + "(" + o["flags"] + ")";
      }
      out += error + "\n";
    }
    return out;
  }
  std::string sentinel_logs() const {
    std::string out;
    for (const auto &s : sentinels_) out += "log of sentinel " + std::to_string(s.port) + ":\n" + log_tail(s.port);
    return out;
  }

  void stop_all() {
    for (auto *group : {&sentinels_, &data_}) {
      for (auto &p : *group) {
        if (p.pid <= 0) continue;
        kill(p.pid, SIGCONT);
        kill(p.pid, SIGKILL);
        waitpid(p.pid, nullptr, 0);
        p.pid = -1;
      }
    }
  }
  // A failure, then everything started is killed and the temp dir removed, then abort.
  [[noreturn]] void fail(const std::string &what) {
    ADD_FAILURE() << "SentinelTopology " << name_ << ": " << what;
    stop_all();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
    std::abort();
  }
  // A config file's value in double quotes, with its quotes and backslashes escaped (see sdssplitargs).
  static std::string quoted(const std::string &value) {
    std::string out = "\"";
    for (char ch : value) {
      if (ch == '"' || ch == '\\') out += '\\';
      out += ch;
    }
    return out + "\"";
  }

  std::string name_;
  Options options_;
  std::string dir_;
  std::vector<Process> data_;
  std::vector<Process> sentinels_;
  pid_t owner_ = getpid();
};

}  // namespace floodwall::testing
