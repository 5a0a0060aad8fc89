// A throwaway Redis Cluster node (one; cluster_redis.hpp makes a whole cluster): redis-server with
// --cluster-enabled yes on a free port of 127.0.0.1, its cluster bus on another free port (--cluster-port:
// the default, port + 10000, may be taken or past 65535), its nodes.conf and log in a temp dir of its own.
// It starts with no slots and knows no other node (CLUSTER ADDSLOTSRANGE, CLUSTER MEET and CLUSTER REPLICATE make a
// cluster of several). A missing redis-server or a node that does not answer PING fails the test loudly and aborts;
// nothing skips. The destructor SIGKILLs the process and removes the temp dir.
//
//   reply()       a command's whole reply as hiredis reads it (for the parsers of cluster_map.hpp)
//   command()     a command's reply as text (see command_at in redis_server.hpp)
//   wait_until()  polls a condition, then a failure quoting what was last seen and the log
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
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "redis_server.hpp"

namespace floodwall::testing {

struct ReplyFree {
  void operator()(redisReply *r) const {
    if (r) freeReplyObject(r);
  }
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyFree>;

class ClusterRedis {
 public:
  // `extra_args` go to redis-server after the harness' own (the last one wins).
  explicit ClusterRedis(std::vector<std::string> extra_args = {}) {
    char tmpl[] = "/tmp/floodwall-cluster-XXXXXX";
    if (!mkdtemp(tmpl)) {
      ADD_FAILURE() << "mkdtemp(/tmp/floodwall-cluster-XXXXXX) failed: " << std::strerror(errno);
      std::abort();
    }
    dir_ = tmpl;
    port_ = free_port();
    do bus_port_ = free_port();
    while (bus_port_ == port_);
    std::vector<std::string> argv = {"redis-server",
                                     "--port",
                                     std::to_string(port_),
                                     "--bind",
                                     "127.0.0.1",
                                     "--cluster-enabled",
                                     "yes",
                                     "--cluster-port",
                                     std::to_string(bus_port_),
                                     "--cluster-config-file",
                                     dir_ + "/nodes.conf",
                                     "--dir",
                                     dir_,
                                     "--logfile",
                                     log_path(),
                                     "--save",
                                     "",
                                     "--appendonly",
                                     "no",
                                     "--loglevel",
                                     "notice"};
    argv.insert(argv.end(), extra_args.begin(), extra_args.end());
    spawn(argv);
  }
  ~ClusterRedis() {
    if (getpid() != owner_) return;  // a forked child leaves the parent's process be
    stop();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  ClusterRedis(const ClusterRedis &) = delete;
  ClusterRedis &operator=(const ClusterRedis &) = delete;

  int port() const { return port_; }
  int bus_port() const { return bus_port_; }
  const std::string &dir() const { return dir_; }

  // The reply to one command (argv form, binary-safe); null, and a failure naming hiredis' error, when there
  // is none.
  ReplyPtr reply(const std::vector<std::string> &args, double timeout_s = 2.0) const {
    redisContext *c = connect_at(port_, {}, timeout_s);
    if (!c) {
      ADD_FAILURE() << "no connection to the cluster node on port " << port_;
      return nullptr;
    }
    std::vector<const char *> argv;
    std::vector<size_t> lens;
    for (const auto &a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    auto *r = static_cast<redisReply *>(redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data()));
    if (!r) ADD_FAILURE() << "no reply from the cluster node on port " << port_ << ": " << c->errstr;
    redisFree(c);
    return ReplyPtr(r);
  }
  // One command's reply as text (see command_at).
  std::string command(std::initializer_list<std::string> args) const { return command_at(port_, args, 2.0); }
  std::string id() const { return command({"CLUSTER", "MYID"}); }

  // Polls `done` every 20 ms until it is true (true) or timeout_s passed: then a failure saying `what`, what
  // `seen` says last (when given) and the log's tail (false).
  bool wait_until(const std::string &what, const std::function<bool()> &done, double timeout_s = 10.0,
                  const std::function<std::string()> &seen = nullptr) const {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while (!done()) {
      if (std::chrono::steady_clock::now() > deadline) {
        ADD_FAILURE() << "cluster node " << port_ << ": not within " << timeout_s << " s: " << what
                      << (seen ? "\nlast seen: " + seen() : std::string()) << "\nits log:\n"
                      << log_tail();
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return true;
  }

  std::string log_tail(size_t lines = 20) const {
    std::ifstream f(log_path());
    std::deque<std::string> tail;
    for (std::string line; std::getline(f, line);) {
      tail.push_back(line);
      if (tail.size() > lines) tail.pop_front();
    }
    std::string out;
    for (const auto &l : tail) out += l + "\n";
    return out;
  }

 private:
  std::string log_path() const { return dir_ + "/redis.log"; }

  void spawn(const std::vector<std::string> &argv) {
    std::string why;
    pid_ = spawn_redis(argv, port_, log_path(), {}, why);
    if (pid_ < 0) fail(why + " (7.0 or later is needed)\nits log:\n" + log_tail());
  }
  void stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  [[noreturn]] void fail(const std::string &what) {
    ADD_FAILURE() << "ClusterRedis: " << what;
    stop();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
    std::abort();
  }

  std::string dir_;
  int port_ = 0, bus_port_ = 0;
  pid_t pid_ = -1;
  pid_t owner_ = getpid();
};

}  // namespace floodwall::testing
