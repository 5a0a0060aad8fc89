// Preforking servers: a client made before fork() works in the child (its own connections and I/O
// thread, made lazily), the parent's tickets are never released by a child, a fork while other threads
// admit does not deadlock the child, memory:// says once that it is per process, and a process that
// exits without freeing its client still delivers its releases.
#include <fcntl.h>
#include <floodwall.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <floodwall.hpp>
#include <string>
#include <thread>
#include <vector>

#include "policy/tenant_key.hpp"
#include "redis_server.hpp"

using floodwall::testing::RedisServer;

namespace {

fw_decision admit(fw_client *c, const std::string &tenant, const char *route = nullptr) {
  fw_request r = FW_REQUEST_INIT;
  r.tenant = tenant.data();
  r.tenant_len = tenant.size();
  r.route = route;
  fw_decision d = FW_DECISION_INIT;
  if (fw_admit(c, &r, &d) != FW_OK) std::abort();
  return d;
}

bool by_store(const fw_decision &d) {
  return !d.failed_open && !d.degraded && d.fail_reason == FW_FAIL_NONE;
}

std::string conc_key(const std::string &tenant) {
  return "floodwall:{" + floodwall::TenantKey(tenant).encoded() + "}:conc";
}

// Waits for a child, killing it (and failing) if it has not exited within `seconds`: a hang is a failure,
// never a stuck suite.
int wait_child(pid_t pid, double seconds = 20) {
  auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
    if (std::chrono::steady_clock::now() - t0 > std::chrono::duration<double>(seconds)) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;  // hung
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace

TEST(Fork, AClientMadeBeforeForkDecidesByRedisInTheChild) {
  RedisServer redis;
  floodwall::Client fw(R"({"store": ")" + redis.url() + R"(", "request_rate": {"rate": 0.001, "burst": 10}})");
  for (int i = 0; i < 4; i++) ASSERT_TRUE(by_store(admit(fw.get(), "shared")));
  pid_t pid = fork();
  if (pid == 0) {
    // Same bucket, seen from the child's own connections: 6 tokens left, then 429s, all from Redis.
    int ok = 0;
    for (int i = 0; i < 8; i++) {
      fw_decision d = admit(fw.get(), "shared");
      if (!by_store(d)) _exit(10 + i);
      ok += d.allowed;
    }
    _exit(ok == 6 ? 0 : 2);
  }
  EXPECT_EQ(wait_child(pid), 0) << "the child decided on Redis, on the parent's bucket";
  EXPECT_TRUE(by_store(admit(fw.get(), "shared"))) << "the parent's client is untouched";
}

TEST(Fork, AChildNeverReleasesTheParentsTickets) {
  RedisServer redis;
  floodwall::Client fw(R"({"store": ")" + redis.url() + R"(", "concurrency": {"limit": 5}})");
  fw_decision held = admit(fw.get(), "slots");
  ASSERT_TRUE(by_store(held) && held.allowed && held.ticket);
  pid_t pid = fork();
  if (pid == 0) {
    fw_release(fw.get(), held.ticket);  // the parent's: a no-op here
    fw_decision mine = admit(fw.get(), "slots");
    bool ok = by_store(mine) && mine.allowed && mine.concurrency_remaining == 3;
    fw_release(fw.get(), mine.ticket);
    fw_client_free(fw.get());  // frees the child's own client; the parent's is left alone
    _exit(ok ? 0 : 1);
  }
  ASSERT_EQ(wait_child(pid), 0) << "the child's own admit saw the parent's slot still held";
  EXPECT_EQ(redis.command({"ZCARD", conc_key("slots")}), "1") << "the parent's slot is still held";
  fw_release(fw.get(), held.ticket);
  fw_decision after = admit(fw.get(), "slots");
  EXPECT_EQ(after.concurrency_remaining, 4);
  fw_release(fw.get(), after.ticket);
}

// Other threads are inside admits (holding the store's, the tickets' and the tables' locks at random
// moments) while the main thread forks: no child may deadlock on a lock a vanished thread held.
TEST(Fork, ForkingWhileOtherThreadsAdmitNeverDeadlocksTheChild) {
  RedisServer redis;
  for (const std::string &store : {std::string("memory://"), redis.url()}) {
    floodwall::Client fw(R"({"store": ")" + store + R"(", "request_rate": {"rate": 100000, "burst": 100000},
                             "concurrency": {"limit": 1000}, "utilization": {"workers": 8}})");
    std::atomic<bool> stop{false};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; t++) {
      threads.emplace_back([&, t] {
        for (int i = 0; !stop.load(); i++) {
          fw_decision d = admit(fw.get(), "busy-" + std::to_string((t * 7 + i) % 50));
          fw_release(fw.get(), d.ticket);
        }
      });
    }
    int hung = 0, failed = 0;
    for (int round = 0; round < 20; round++) {
      std::this_thread::sleep_for(std::chrono::milliseconds(3));
      pid_t pid = fork();
      if (pid == 0) {
        bool ok = true;
        for (int i = 0; i < 20; i++) {
          fw_decision d = admit(fw.get(), "child");
          ok = ok && d.allowed && !d.failed_open;
          fw_release(fw.get(), d.ticket);
        }
        fw_buf b = FW_BUF_INIT;
        ok = ok && fw_metrics_json(fw.get(), &b) == FW_OK;
        fw_buf_dispose(&b);
        _exit(ok ? 0 : 1);
      }
      int rc = wait_child(pid, 20);
      hung += rc == -1;
      failed += rc != 0 && rc != -1;
    }
    stop = true;
    for (auto &th : threads) th.join();
    EXPECT_EQ(hung, 0) << store << ": a child hung after a fork taken mid-admit";
    EXPECT_EQ(failed, 0) << store;
  }
}

TEST(Fork, MemoryStoreSaysOnceInAForkedChildThatItIsPerProcess) {
  floodwall::Client fw(R"({"request_rate": {"rate": 10, "burst": 10}})");
  admit(fw.get(), "t");
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(pipefd[1], 2);
    close(pipefd[0]);
    for (int i = 0; i < 5; i++) admit(fw.get(), "t");
    floodwall::Client another(R"({"request_rate": {"rate": 10, "burst": 10}})");
    admit(another.get(), "t");
    _exit(0);
  }
  close(pipefd[1]);
  std::string err;
  char buf[4096];
  for (ssize_t n; (n = read(pipefd[0], buf, sizeof buf)) > 0;) err.append(buf, static_cast<size_t>(n));
  close(pipefd[0]);
  ASSERT_EQ(wait_child(pid), 0);
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << "one line, once per process: " << err;
  EXPECT_NE(err.find("per process"), std::string::npos) << err;
  EXPECT_NE(err.find("shm://"), std::string::npos) << err;
  EXPECT_NE(err.find("redis://"), std::string::npos) << err;
}

// A worker that takes slots, releases them all and returns from main without freeing its client
// (gunicorn's max_requests, a Node worker ending): its releases still reach Redis.
TEST(Fork, AProcessThatExitsWithoutFreeingItsClientStillDeliversItsReleases) {
  RedisServer redis;
  for (int run = 0; run < 3; run++) {
    std::string tenant = "exit-" + std::to_string(run);
    pid_t pid = fork();
    if (pid == 0) {
      fw_client *c = nullptr;
      // A deadline no busy box misses: the test is about the releases at exit, and every admit must be
      // Redis' (at the default 50 ms it failed once beside the other suites, an admit decided by the fallback).
      std::string pol = R"({"store": ")" + redis.url() + R"(", "redis": {"deadline_ms": 5000},
                            "concurrency": {"limit": 100}})";
      if (fw_client_new(&c, pol.c_str()) != FW_OK) _exit(2);
      std::vector<fw_ticket> held;
      for (int i = 0; i < 40; i++) {
        fw_decision d = admit(c, tenant);
        if (!by_store(d) || !d.allowed) _exit(3);
        held.push_back(d.ticket);
      }
      for (fw_ticket t : held) fw_release(c, t);
      std::exit(0);  // not fw_client_free: the process just ends
    }
    ASSERT_EQ(wait_child(pid), 0);
    EXPECT_EQ(redis.command({"ZCARD", conc_key(tenant)}), "0") << "run " << run << ": releases were lost at exit";
  }
}
