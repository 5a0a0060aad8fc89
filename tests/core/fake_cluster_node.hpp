// A fake Redis Cluster node for the tests: a small RESP server on a free port of 127.0.0.1 that answers each
// command it was given a canned reply for (raw RESP, set or changed at any time), PING with PONG and
// anything else with an error, and counts what it was asked. It stands in for a node whose topology replies
// a real server would not give on demand (CLUSTER SHARDS with a shard listed without its slots, as Redis
// 7.2-7.4 after a second failover, redis/redis#13414; a reply that contradicts itself), pointing a client
// at the masters of a real cluster (cluster_redis.hpp) started beside it.
//
// Commands are read by hiredis' redisReader (a command is a RESP array of bulk strings); their words are
// upper-cased and joined by one space to find the reply ("CLUSTER SHARDS"). One thread, one poll loop
// (20 ms ticks); the destructor stops it and closes every socket. A listen failure fails the test loudly.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <hiredis/read.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace floodwall::testing {

// RESP by hand, for canned replies: a bulk string, an integer, an array (of RESP texts), an error.
namespace resp {
inline std::string bulk(std::string_view s) {
  return "$" + std::to_string(s.size()) + "\r\n" + std::string(s) + "\r\n";
}
inline std::string num(long long n) {
  return ":" + std::to_string(n) + "\r\n";
}
inline std::string arr(const std::vector<std::string> &elements) {
  std::string out = "*" + std::to_string(elements.size()) + "\r\n";
  for (const auto &e : elements) out += e;
  return out;
}
inline std::string err(std::string_view s) {
  return "-" + std::string(s) + "\r\n";
}
}  // namespace resp

class FakeClusterNode {
 public:
  FakeClusterNode() {
    listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int one = 1;
    setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    socklen_t len = sizeof a;
    if (listen_fd_ < 0 || bind(listen_fd_, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0 ||
        listen(listen_fd_, 64) != 0 || getsockname(listen_fd_, reinterpret_cast<sockaddr *>(&a), &len) != 0) {
      ADD_FAILURE() << "FakeClusterNode: cannot listen on 127.0.0.1";
      std::abort();
    }
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { run(); });
  }
  ~FakeClusterNode() {
    stop_ = true;
    thread_.join();
    for (Conn &c : conns_) {
      close(c.fd);
      redisReaderFree(c.reader);
    }
    close(listen_fd_);
  }
  FakeClusterNode(const FakeClusterNode &) = delete;
  FakeClusterNode &operator=(const FakeClusterNode &) = delete;

  int port() const { return port_; }
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(port_); }

  // `command` (words upper-cased, one space between) is answered with `reply` (raw RESP) from now on.
  void answer(const std::string &command, std::string reply) {
    std::lock_guard lock(mu_);
    replies_[command] = std::move(reply);
  }
  // How many times `command` was asked.
  int64_t asked(const std::string &command) const {
    std::lock_guard lock(mu_);
    auto it = asked_.find(command);
    return it == asked_.end() ? 0 : it->second;
  }

 private:
  struct Conn {
    int fd;
    redisReader *reader;
  };

  void run() {
    while (!stop_) {
      std::vector<pollfd> fds = {{listen_fd_, POLLIN, 0}};
      for (const Conn &c : conns_) fds.push_back({c.fd, POLLIN, 0});
      if (poll(fds.data(), fds.size(), 20) <= 0) continue;
      if (fds[0].revents & POLLIN) {
        int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);  // blocking: replies are written whole
        if (fd >= 0) conns_.push_back({fd, redisReaderCreate()});
      }
      for (size_t i = fds.size() - 1; i >= 1; i--) {
        if (fds[i].revents && !serve(conns_[i - 1])) {
          close(conns_[i - 1].fd);
          redisReaderFree(conns_[i - 1].reader);
          conns_.erase(conns_.begin() + static_cast<long>(i - 1));
        }
      }
    }
  }

  // Reads what came and answers each whole command; false when the connection is done.
  bool serve(Conn &c) {
    char buf[16384];
    ssize_t n = read(c.fd, buf, sizeof buf);
    if (n <= 0 || redisReaderFeed(c.reader, buf, static_cast<size_t>(n)) != REDIS_OK) return false;
    for (;;) {
      void *got = nullptr;
      if (redisReaderGetReply(c.reader, &got) != REDIS_OK) return false;
      if (!got) return true;
      auto *cmd = static_cast<redisReply *>(got);
      std::string words;
      if (cmd->type == REDIS_REPLY_ARRAY) {
        for (size_t k = 0; k < cmd->elements; k++) {
          const redisReply *w = cmd->element[k];
          if (!words.empty()) words += ' ';
          for (size_t j = 0; w->str && j < w->len; j++)
            words += static_cast<char>(std::toupper(static_cast<unsigned char>(w->str[j])));
        }
      }
      freeReplyObject(got);
      std::string out;
      {
        std::lock_guard lock(mu_);
        asked_[words]++;
        auto it = replies_.find(words);
        out = it != replies_.end() ? it->second
              : words == "PING"    ? "+PONG\r\n"
                                   : resp::err("ERR unknown command of the fake node '" + words + "'");
      }
      for (size_t sent = 0; sent < out.size();) {
        ssize_t w = send(c.fd, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
        if (w <= 0) return false;
        sent += static_cast<size_t>(w);
      }
    }
  }

  int listen_fd_ = -1, port_ = 0;
  std::atomic<bool> stop_{false};
  std::vector<Conn> conns_;  // the thread's
  mutable std::mutex mu_;
  std::map<std::string, std::string> replies_;
  std::map<std::string, int64_t> asked_;
  std::thread thread_;
};

}  // namespace floodwall::testing
