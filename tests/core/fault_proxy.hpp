// A small TCP fault proxy for the tests: listens on a free 127.0.0.1 port and forwards every
// connection to 127.0.0.1:<upstream>, with faults that can be switched at run time, per direction
// where it matters. Up is client -> server (commands), down is server -> client (replies).
//
//   latency(ms)       each chunk read is forwarded ms later (order kept)
//   bandwidth(B/s)    each connection's flow is paced to that many bytes a second
//   reset_after(n)    a connection is reset (RST, SO_LINGER 0, both sides) once n more bytes went its way
//   blackhole()       both directions are read and dropped: nothing forwarded, nothing answered
//   half_open()       replies are read and dropped, commands still forwarded; the sockets stay open
//   half_close()      the client's socket has its write side shut (it reads EOF); commands still forwarded
//   heal()            back to pass-through: held chunks go at once; a connection that lost bytes to a
//                     drop cannot carry its stream any more (a reply would answer the wrong command) and
//                     is reset, as a stateful firewall does with a flow it forgot
//
// One thread, one poll loop; the only waiting it does is the latency it adds. Each setter returns once
// the proxy thread has put the fault in force for every connection, open and new. A fault applies from
// that moment on: bytes already forwarded are not touched, and chunks already held keep their time.
// Counters (connections accepted, bytes forwarded and dropped per direction, resets) are atomics that
// tests read at any time; each is counted before what it counts can be seen by a peer.
#pragma once

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <list>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace floodwall::testing {

class FaultProxy {
 public:
  enum Dir : int { kUp = 0, kDown = 1 };
  enum class Which { up, down, both };

  explicit FaultProxy(int upstream_port) : upstream_port_(upstream_port) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_in a = loopback(0);
    int one = 1;
    setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (listen_fd_ < 0 || bind(listen_fd_, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0 ||
        listen(listen_fd_, 128) != 0)
      throw std::runtime_error("fault proxy: cannot listen");
    socklen_t len = sizeof a;
    getsockname(listen_fd_, reinterpret_cast<sockaddr *>(&a), &len);
    port_ = ntohs(a.sin_port);
    wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    thread_ = std::thread([this] { run(); });
  }
  ~FaultProxy() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    wake();
    thread_.join();
    for (Conn &c : conns_) close_conn(c, false);
    close(listen_fd_);
    close(wake_fd_);
  }
  FaultProxy(const FaultProxy &) = delete;
  FaultProxy &operator=(const FaultProxy &) = delete;

  int port() const { return port_; }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_) + "/0"; }

  // ---- faults
  void latency(int ms, Which w = Which::both) {
    change([&](Faults &f) { each(f, w, [&](DirFaults &d) { d.latency_us = int64_t{ms} * 1000; }); });
  }
  void bandwidth(int64_t bytes_per_s, Which w = Which::both) {
    change([&](Faults &f) { each(f, w, [&](DirFaults &d) { d.bytes_per_s = bytes_per_s; }); });
  }
  void reset_after(int64_t bytes, Which w = Which::down) {
    change([&](Faults &f) {
      each(f, w, [&](DirFaults &d) { d.reset_after = bytes; });
      f.rearm_resets = true;
    });
  }
  void blackhole() {
    change([](Faults &f) { f.dir[kUp].drop = f.dir[kDown].drop = true; });
  }
  void half_open() {
    change([](Faults &f) { f.dir[kDown].drop = true; });
  }
  void half_close() {
    change([](Faults &f) { f.half_close = true; });
  }
  void heal() {
    change([](Faults &f) {
      f = Faults{};
      f.heal = true;
    });
  }

  // ---- counters
  uint64_t accepted() const { return accepted_.load(); }
  uint64_t forwarded(Dir d) const { return forwarded_[d].load(); }
  uint64_t dropped(Dir d) const { return dropped_[d].load(); }
  uint64_t resets() const { return resets_.load(); }  // by reset_after
  uint64_t reset_at_heal() const { return reset_at_heal_.load(); }
  uint64_t open_connections() const { return open_.load(); }

 private:
  struct DirFaults {
    int64_t latency_us = 0;
    int64_t bytes_per_s = 0;   // 0: unlimited
    int64_t reset_after = -1;  // -1: never
    bool drop = false;
  };
  struct Faults {
    std::array<DirFaults, 2> dir{};
    bool half_close = false;
    // One-shot requests carried by a change, cleared once applied.
    bool heal = false, rearm_resets = false;
  };
  struct Chunk {
    std::string data;
    size_t off = 0;
    int64_t due_us = 0;
  };
  struct Flow {
    std::deque<Chunk> q;
    bool eof = false;       // the source sent FIN
    bool shut = false;      // ... and it was passed on (or swallowed by a drop)
    bool blocked = false;   // the destination's buffer is full: wait for POLLOUT
    bool lost = false;      // bytes of this flow were dropped: the stream is broken
    bool fin_held = false;  // its FIN came through a drop: passed on at heal
    int64_t next_send_us = 0;
    int64_t reset_left = -1;
  };
  struct Conn {
    std::array<int, 2> fd{-1, -1};  // 0: the client, 1: the server
    std::array<Flow, 2> flow;       // flow[kUp]: fd[0] -> fd[1]; flow[kDown]: fd[1] -> fd[0]
    bool half_closed = false;
    bool dead = false;
  };

  template <class F>
  static void each(Faults &f, Which w, F &&fn) {
    if (w != Which::down) fn(f.dir[kUp]);
    if (w != Which::up) fn(f.dir[kDown]);
  }
  static sockaddr_in loopback(int port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port));
    return a;
  }
  static int64_t now_us() {
    using namespace std::chrono;
    return duration_cast<microseconds>(steady_clock::now().time_since_epoch()).count();
  }
  void wake() {
    uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof one);
  }

  // Caller side: edit the wanted faults, then wait until the proxy thread has applied them.
  template <class F>
  void change(F &&edit) {
    std::unique_lock lock(mu_);
    edit(wanted_);
    uint64_t gen = ++wanted_gen_;
    wake();
    applied_cv_.wait(lock, [&] { return applied_gen_ >= gen; });
  }

  // Proxy thread: take the wanted faults into force.
  void apply(int64_t now) {
    Faults f;
    uint64_t gen;
    {
      std::lock_guard lock(mu_);
      if (applied_gen_ == wanted_gen_) return;
      gen = wanted_gen_;  // a change made meanwhile is applied on the next turn
      f = wanted_;
      wanted_.heal = wanted_.rearm_resets = false;
    }
    for (Conn &c : conns_) {
      if (c.dead) continue;
      for (int d : {kUp, kDown}) {
        Flow &fl = c.flow[d];
        if (f.rearm_resets) fl.reset_left = f.dir[d].reset_after;
        if (f.dir[d].drop && !fl.q.empty()) drop_queue(fl, d);
        if (f.heal) {
          for (Chunk &ch : fl.q) ch.due_us = now;
          fl.next_send_us = 0;
          fl.reset_left = -1;
        }
      }
      if (f.half_close && !c.half_closed) half_close(c);
      if (f.heal && (c.flow[kUp].lost || c.flow[kDown].lost)) {
        reset_at_heal_++;
        close_conn(c, true);
        continue;
      }
      for (int d : {kUp, kDown}) {
        if (!f.heal || !c.flow[d].fin_held) continue;
        c.flow[d].fin_held = false;
        shutdown(c.fd[d == kUp ? 1 : 0], SHUT_WR);
      }
    }
    f.heal = f.rearm_resets = false;
    faults_ = f;
    std::lock_guard lock(mu_);
    applied_gen_ = gen;
    applied_cv_.notify_all();
  }

  void drop_queue(Flow &fl, int d) {
    for (const Chunk &ch : fl.q) dropped_[d] += ch.data.size() - ch.off;
    fl.q.clear();
    fl.lost = true;
    fl.blocked = false;
  }
  void half_close(Conn &c) {
    c.half_closed = true;
    shutdown(c.fd[0], SHUT_WR);
    Flow &down = c.flow[kDown];
    if (!down.q.empty()) drop_queue(down, kDown);
    down.shut = true;
  }

  void close_conn(Conn &c, bool reset) {
    if (c.dead) return;
    for (int &fd : c.fd) {
      if (fd < 0) continue;
      if (reset) {
        linger l{1, 0};
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
      }
      close(fd);
      fd = -1;
    }
    c.dead = true;
    open_--;
  }

  void accept_all(int64_t now) {
    for (;;) {
      int cfd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (cfd < 0) return;
      accepted_++;
      int sfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in a = loopback(upstream_port_);
      if (sfd < 0 || connect(sfd, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0) {
        // Nobody to forward to: refuse the way a dead server does.
        if (sfd >= 0) close(sfd);
        linger l{1, 0};
        setsockopt(cfd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
        close(cfd);
        continue;
      }
      fcntl(sfd, F_SETFL, fcntl(sfd, F_GETFL) | O_NONBLOCK);
      int one = 1;
      setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      setsockopt(sfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      conns_.emplace_back();
      Conn &c = conns_.back();
      c.fd = {cfd, sfd};
      open_++;
      for (int d : {kUp, kDown}) c.flow[d].reset_left = faults_.dir[d].reset_after;
      if (faults_.half_close) half_close(c);
      (void)now;
    }
  }

  // Reads what the source of flow d has; false when the connection died.
  bool pull(Conn &c, int d, int64_t now) {
    Flow &fl = c.flow[d];
    int src = c.fd[d == kUp ? 0 : 1];
    char buf[65536];
    for (;;) {
      ssize_t n = recv(src, buf, sizeof buf, 0);
      if (n > 0) {
        const DirFaults &f = faults_.dir[d];
        if (f.drop || (d == kDown && c.half_closed)) {
          dropped_[d] += static_cast<uint64_t>(n);
          fl.lost = true;
          continue;
        }
        fl.q.push_back(Chunk{std::string(buf, static_cast<size_t>(n)), 0, now + f.latency_us});
        continue;
      }
      if (n == 0) {
        fl.eof = true;
        return true;
      }
      if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
      if (errno == EINTR) continue;
      close_conn(c, true);  // the source reset: so does the other side
      return false;
    }
  }

  // Forwards what flow d may send now; false when the connection died.
  bool push(Conn &c, int d, int64_t now) {
    Flow &fl = c.flow[d];
    int dst = c.fd[d == kUp ? 1 : 0];
    const DirFaults &f = faults_.dir[d];
    while (!fl.q.empty() && !fl.blocked) {
      Chunk &ch = fl.q.front();
      if (ch.due_us > now || fl.next_send_us > now) break;
      size_t n = ch.data.size() - ch.off;
      if (f.bytes_per_s > 0) n = std::min<size_t>(n, static_cast<size_t>(std::max<int64_t>(1, f.bytes_per_s / 100)));
      if (fl.reset_left >= 0) n = std::min<size_t>(n, static_cast<size_t>(fl.reset_left));
      if (n > 0) {
        // Counted before the bytes can reach the peer, so that a test which has read them sees them counted.
        forwarded_[d] += n;
        ssize_t w = send(dst, ch.data.data() + ch.off, n, MSG_NOSIGNAL);
        forwarded_[d] -= n - static_cast<size_t>(std::max<ssize_t>(w, 0));
        if (w < 0) {
          if (errno == EAGAIN || errno == EWOULDBLOCK) {
            fl.blocked = true;
            break;
          }
          if (errno == EINTR) continue;
          close_conn(c, true);
          return false;
        }
        ch.off += static_cast<size_t>(w);
        if (fl.reset_left >= 0) fl.reset_left -= w;
        if (f.bytes_per_s > 0) fl.next_send_us = std::max(now, fl.next_send_us) + w * 1'000'000 / f.bytes_per_s;
        if (ch.off == ch.data.size()) fl.q.pop_front();
      }
      if (fl.reset_left == 0) {
        resets_++;
        close_conn(c, true);
        return false;
      }
    }
    if (fl.q.empty() && fl.eof && !fl.shut) {
      // FIN goes on after the data, except through a drop: nothing gets through a blackhole.
      if (faults_.dir[d].drop)
        fl.fin_held = true;
      else
        shutdown(dst, SHUT_WR);
      fl.shut = true;
    }
    return true;
  }

  // When the proxy thread next has something to do without an event: a held chunk's time.
  int64_t next_due() const {
    int64_t at = INT64_MAX;
    for (const Conn &c : conns_) {
      if (c.dead) continue;
      for (const Flow &fl : c.flow)
        if (!fl.q.empty() && !fl.blocked) at = std::min(at, std::max(fl.q.front().due_us, fl.next_send_us));
    }
    return at;
  }

  void run() {
    std::vector<pollfd> fds;
    std::vector<Conn *> polled;
    for (;;) {
      int64_t now = now_us();
      {
        std::lock_guard lock(mu_);
        if (stop_) return;
      }
      apply(now);
      fds.clear();
      polled.clear();
      fds.push_back({wake_fd_, POLLIN, 0});
      fds.push_back({listen_fd_, POLLIN, 0});
      for (Conn &c : conns_) {
        if (c.dead) continue;
        for (int side : {0, 1}) {
          // Side 0 is the source of up and the destination of down; side 1 the other way round.
          const Flow &out = c.flow[side == 0 ? kUp : kDown], &in = c.flow[side == 0 ? kDown : kUp];
          short ev = 0;
          if (!out.eof) ev |= POLLIN;
          if (in.blocked) ev |= POLLOUT;
          fds.push_back({ev ? c.fd[side] : -1, ev, 0});
        }
        polled.push_back(&c);
      }
      int64_t due = next_due();
      int64_t wait_us = due == INT64_MAX ? 1'000'000 : std::max<int64_t>(0, due - now);
      timespec ts{static_cast<time_t>(wait_us / 1'000'000), static_cast<long>(wait_us % 1'000'000) * 1000};
      ppoll(fds.data(), fds.size(), &ts, nullptr);
      now = now_us();
      if (fds[0].revents & POLLIN) {
        uint64_t n;
        (void)!read(wake_fd_, &n, sizeof n);
      }
      for (size_t i = 0; i < polled.size(); i++) {
        Conn &c = *polled[i];
        for (int side : {0, 1}) {
          if (c.dead) break;
          short rev = fds[2 + 2 * i + static_cast<size_t>(side)].revents;
          if (rev & POLLOUT) c.flow[side == 0 ? kDown : kUp].blocked = false;
          if (rev & (POLLIN | POLLHUP | POLLERR)) {
            if (!pull(c, side == 0 ? kUp : kDown, now)) break;
            // POLLERR/POLLHUP on a side we only write to: the next send says what happened.
            if (rev & (POLLERR | POLLHUP)) c.flow[side == 0 ? kDown : kUp].blocked = false;
          }
        }
      }
      for (Conn &c : conns_) {
        if (!c.dead && push(c, kUp, now) && !c.dead) push(c, kDown, now);
        if (!c.dead && c.flow[kUp].shut && c.flow[kDown].shut && c.flow[kUp].eof && c.flow[kDown].eof)
          close_conn(c, false);
      }
      conns_.remove_if([](const Conn &c) { return c.dead; });
      if (fds[1].revents & POLLIN) accept_all(now);
    }
  }

  const int upstream_port_;
  int port_ = 0;
  int listen_fd_ = -1, wake_fd_ = -1;
  std::thread thread_;

  std::mutex mu_;  // guards what callers and the proxy thread share: wanted_, the generations, stop_
  std::condition_variable applied_cv_;
  Faults wanted_;
  uint64_t wanted_gen_ = 0, applied_gen_ = 0;
  bool stop_ = false;

  Faults faults_;          // proxy thread: in force
  std::list<Conn> conns_;  // proxy thread

  std::atomic<uint64_t> accepted_{0}, resets_{0}, reset_at_heal_{0}, open_{0};
  std::array<std::atomic<uint64_t>, 2> forwarded_{}, dropped_{};
};

}  // namespace floodwall::testing
