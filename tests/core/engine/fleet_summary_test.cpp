// The fleet view (engine/fleet_summary.hpp): every client's summary in the store, read back through the C
// ABI (fw_admin_clients) as `floodwall top` reads it, on a real Redis (single node, Cluster, Sentinel) and on
// shm://: several clients appear with their counters adding up (admits from several threads each), a client
// that closes disappears at once, a process killed with SIGKILL disappears when its TTL runs out, and a
// store that cannot be reached is counted, never stopping a decision.
#include <floodwall.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cluster_redis.hpp"
#include "redis_server.hpp"
#include "sentinel_redis.hpp"
#include "stores/shm_store.hpp"

using floodwall::testing::ClusterTopology;
using floodwall::testing::RedisServer;
using floodwall::testing::SentinelTopology;
using nlohmann::json;

namespace {

constexpr int kThreads = 4, kAdmitsPerThread = 3, kBurst = 5;  // 12 admits of one tenant: 5 allowed, 7 refused

json policy(const std::string &store, double period_s = 0.2) {
  return {
      {"store", store}, {"request_rate", {{"rate", 0.001}, {"burst", kBurst}}}, {"summary", {{"period_s", period_s}}}};
}

struct Client {
  fw_client *c = nullptr;
  explicit Client(const json &p) {
    if (fw_client_new(&c, p.dump().c_str()) != FW_OK) ADD_FAILURE() << fw_error_last()->message;
  }
  ~Client() { fw_client_free(c); }
  void admit(const std::string &tenant) {
    fw_request r = FW_REQUEST_INIT;
    r.tenant = tenant.data();
    r.tenant_len = tenant.size();
    fw_decision d = FW_DECISION_INIT;
    ASSERT_EQ(fw_admit(c, &r, &d), FW_OK);
    fw_release(c, d.ticket);
  }
  // kThreads threads at once, each kAdmitsPerThread admits of `tenant`.
  void admit_from_threads(const std::string &tenant) {
    std::vector<std::thread> ts;
    for (int t = 0; t < kThreads; t++)
      ts.emplace_back([&] {
        for (int i = 0; i < kAdmitsPerThread; i++) admit(tenant);
      });
    for (auto &t : ts) t.join();
  }
  json clients() {
    fw_buf b = FW_BUF_INIT;
    if (fw_admin_clients(c, &b) != FW_OK) {
      ADD_FAILURE() << fw_error_last()->message;
      return json::array();
    }
    json j = json::parse(std::string(b.ptr, b.size));
    fw_buf_dispose(&b);
    return j;
  }
};

// Polls `read` until `done` holds (at most `seconds`); the last read.
json wait_for(const std::function<json()> &read, const std::function<bool(const json &)> &done, double seconds = 15) {
  auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  json j = read();
  while (!done(j) && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    j = read();
  }
  return j;
}

uint64_t count(const json &s, const char *limiter, const char *outcome) {
  return s["decisions"][limiter][outcome].get<uint64_t>();
}

// n clients of `store`, each with a tenant of its own admitted from several threads: every summary appears
// with its language, and the counters add up to what was decided.
void expect_clients_add_up(const std::string &store, int n) {
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < n; i++) clients.push_back(std::make_unique<Client>(policy(store)));
  ASSERT_EQ(fw_client_set_language(clients[0]->c, "python"), FW_OK);
  for (int i = 0; i < n; i++) clients[static_cast<size_t>(i)]->admit_from_threads("tenant-" + std::to_string(i));
  Client reader(policy(store, 0));  // writes no summary of its own
  const uint64_t per_client = kThreads * kAdmitsPerThread;
  json all = wait_for([&] { return reader.clients(); },
                      [&](const json &j) {
                        if (j.size() != static_cast<size_t>(n)) return false;
                        for (const json &s : j)
                          if (s["decisions_total"].get<uint64_t>() != per_client) return false;
                        return true;
                      });
  ASSERT_EQ(all.size(), static_cast<size_t>(n)) << all.dump(2);
  uint64_t allowed = 0, rejected = 0;
  int python = 0;
  for (const json &s : all) {
    EXPECT_EQ(s["decisions_total"].get<uint64_t>(), per_client) << s.dump(2);
    EXPECT_EQ(s["pid"].get<int64_t>(), getpid());
    EXPECT_EQ(s["version"].get<std::string>(), fw_version());
    EXPECT_EQ(s["breaker"].get<std::string>(), "closed");
    EXPECT_EQ(s["fallback_share"].get<double>(), 0.0);
    allowed += count(s, "request_rate", "allowed");
    rejected += count(s, "request_rate", "rejected");
    EXPECT_EQ(s["refused"]["request_rate"].get<uint64_t>(), per_client - kBurst);
    ASSERT_EQ(s["top_refused"].size(), 1u) << s.dump(2);
    EXPECT_EQ(s["top_refused"][0]["rejections"].get<uint64_t>(), per_client - kBurst);
    python += s["language"] == "python";
    if (s["language"] != "python") {
      EXPECT_EQ(s["language"], "c");
    }
  }
  EXPECT_EQ(python, 1);
  EXPECT_EQ(allowed, static_cast<uint64_t>(n) * kBurst);
  EXPECT_EQ(rejected, static_cast<uint64_t>(n) * (per_client - kBurst));
  // A client that closes takes its summary away at once (not after its TTL).
  fw_client_close(clients[0]->c);
  json after = wait_for([&] { return reader.clients(); }, [&](const json &j) { return j.size() == size_t(n - 1); }, 2);
  EXPECT_EQ(after.size(), static_cast<size_t>(n - 1)) << after.dump(2);
}

// A child process writes its summary and is killed (SIGKILL, nothing said): it disappears once the TTL
// (three periods) runs out.
void expect_killed_process_expires(const std::string &store) {
  // Forked before this process starts a thread (the reader's I/O thread): a child of a threaded process
  // that starts threads is refused by ThreadSanitizer ("starting new threads after multi-threaded fork").
  pid_t child = fork();
  if (child == 0) {
    fw_client *c = nullptr;
    if (fw_client_new(&c, policy(store).dump().c_str()) != FW_OK) _exit(3);
    for (;;) pause();
  }
  ASSERT_GT(child, 0);
  Client reader(policy(store, 0));
  auto has_child = [&](const json &j) {
    for (const json &s : j)
      if (s["pid"].get<int64_t>() == child) return true;
    return false;
  };
  json seen = wait_for([&] { return reader.clients(); }, has_child);
  EXPECT_TRUE(has_child(seen)) << seen.dump(2);
  kill(child, SIGKILL);
  int status = 0;
  waitpid(child, &status, 0);
  json after = wait_for([&] { return reader.clients(); }, [&](const json &j) { return !has_child(j); });
  EXPECT_FALSE(has_child(after)) << "a killed process' summary outlived its TTL: " << after.dump(2);
}

std::string shm_store() {
  static int n = 0;
  std::string name = "fwtest-fleet-" + std::to_string(getpid()) + "-" + std::to_string(n++);
  shm_unlink(floodwall::ShmStore::segment_name(name).c_str());
  return "shm://" + name;
}

TEST(FleetSummary, RedisClientsAppearAndAddUp) {
  RedisServer redis;
  expect_clients_add_up(redis.url(), 3);
  // One key per client with a TTL of three periods, indexed in one sorted set, under one hash tag.
  Client one(policy(redis.url()));
  json s = wait_for([&] { return one.clients(); }, [](const json &j) { return j.size() == 1; });
  ASSERT_EQ(s.size(), 1u);
  std::string key = "floodwall:{~fleetview}:client:" + s[0]["id"].get<std::string>();
  int64_t pttl = std::stoll(redis.command({"PTTL", key}));
  EXPECT_GT(pttl, 0);
  EXPECT_LE(pttl, 600);  // 3 x 0.2 s
  EXPECT_EQ(redis.command({"ZSCORE", "floodwall:{~fleetview}:clients", s[0]["id"].get<std::string>()}).empty(), false);
}

TEST(FleetSummary, RedisKilledProcessExpires) {
  RedisServer redis;
  expect_killed_process_expires(redis.url());
}

TEST(FleetSummary, ShmClientsAppearAddUpAndExpire) {
  std::string store = shm_store();
  expect_clients_add_up(store, 3);
  expect_killed_process_expires(store);
  shm_unlink(floodwall::ShmStore::segment_name(store.substr(6)).c_str());
}

TEST(FleetSummary, ClusterClientsAppearAndAddUp) {
  ClusterTopology::Options o;
  o.replicas = 0;
  ClusterTopology topo(o);
  // Every client's key and the index in one slot: a reader asks one master.
  EXPECT_EQ(topo.key_slot("floodwall:{~fleetview}:clients"), topo.key_slot("floodwall:{~fleetview}:client:0123"));
  expect_clients_add_up(topo.url(), 3);
  expect_killed_process_expires(topo.url());
}

TEST(FleetSummary, SentinelClientsAppearAndAddUp) {
  SentinelTopology topo;
  expect_clients_add_up(topo.sentinel_url(), 2);
}

TEST(FleetSummary, MemoryStoreShowsItsOwnClientOnly) {
  Client c(policy("memory://"));
  c.admit("acme");
  json j = wait_for([&] { return c.clients(); }, [](const json &all) { return all.size() == 1; });
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["pid"].get<int64_t>(), getpid());
}

TEST(FleetSummary, UnreachableStoreIsCountedAndNeverStopsDeciding) {
  int port = floodwall::testing::free_port();
  json p = policy("redis://127.0.0.1:" + std::to_string(port), 0.1);
  p["redis"] = {{"connect_timeout_ms", 20}, {"deadline_ms", 20}};
  Client c(p);
  auto failed = [&] {
    fw_buf b = FW_BUF_INIT;
    EXPECT_EQ(fw_metrics_json(c.c, &b), FW_OK);
    json m = json::parse(std::string(b.ptr, b.size));
    fw_buf_dispose(&b);
    return m;
  };
  json m = wait_for(failed,
                    [](const json &j) { return j.contains("summary_writes") && j["summary_writes"]["failed"] >= 2; });
  ASSERT_TRUE(m.contains("summary_writes")) << m.dump();
  EXPECT_GE(m["summary_writes"]["failed"].get<uint64_t>(), 2u);
  EXPECT_EQ(m["summary_writes"]["ok"].get<uint64_t>(), 0u);
  for (int i = 0; i < 10; i++) c.admit("acme");  // decided by the fallback all the while
  fw_buf b = FW_BUF_INIT;
  EXPECT_EQ(fw_admin_clients(c.c, &b), FW_ESTORE);
  EXPECT_NE(std::string(fw_error_last()->message).find("127.0.0.1:" + std::to_string(port)), std::string::npos)
      << fw_error_last()->message;
}

TEST(FleetSummary, PeriodIsCheckedAndZeroWritesNothing) {
  fw_client *c = nullptr;
  EXPECT_EQ(fw_client_new(&c, R"({"summary": {"period_s": -1}})"), FW_EPOLICY);
  EXPECT_NE(std::string(fw_error_last()->message).find("summary.period_s"), std::string::npos);
  EXPECT_EQ(fw_client_new(&c, R"({"summary": {"period_s": 0.01}})"), FW_EPOLICY);
  EXPECT_EQ(fw_client_new(&c, R"({"summary": {"every": 1}})"), FW_EPOLICY);
  EXPECT_NE(std::string(fw_error_last()->message).find("summary.every"), std::string::npos);
  Client off(policy("memory://", 0));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_TRUE(off.clients().empty());
  EXPECT_EQ(fw_client_set_language(off.c, "Py thon"), FW_EINVAL);
  EXPECT_NE(std::string(fw_error_last()->message).find("language"), std::string::npos);
}

}  // namespace

namespace {

// A preforking server: the client made in the parent, used in forked workers. Each worker makes its own
// Guard (process_guard.hpp) and writes a summary of its own, under its pid, with its own counters.
TEST(FleetSummary, ForkedWorkersWriteTheirOwnSummaries) {
  RedisServer redis;
  Client parent(policy(redis.url()));
  Client reader(policy(redis.url(), 0));
  constexpr int kWorkers = 3, kAdmits = 4;
  // The workers are forked right after the parent's summary thread wrote, while it sleeps for its period:
  // a child forked while another thread of the parent allocates can hang in its first malloc under ASan
  // (GCC 12's allocator takes no lock around fork), and two of three workers once wrote nothing in make
  // test's ASan stage.
  auto parent_written = [&] {
    for (const json &s : reader.clients())
      if (s["pid"].get<int64_t>() == getpid()) return s["written_at_ms"].get<int64_t>();
    return int64_t{0};
  };
  const int64_t before = parent_written();
  wait_for([&] { return json(parent_written()); }, [&](const json &j) { return j.get<int64_t>() != before; });
  std::vector<pid_t> workers;
  for (int w = 0; w < kWorkers; w++) {
    pid_t pid = fork();
    if (pid == 0) {
      for (int i = 0; i < kAdmits; i++) {
        std::string tenant = "worker-" + std::to_string(w);
        fw_request r = FW_REQUEST_INIT;
        r.tenant = tenant.data();
        r.tenant_len = tenant.size();
        fw_decision d = FW_DECISION_INIT;
        if (fw_admit(parent.c, &r, &d) != FW_OK) _exit(3);
        fw_release(parent.c, d.ticket);
      }
      for (;;) pause();
    }
    ASSERT_GT(pid, 0);
    workers.push_back(pid);
  }
  auto workers_seen = [&](const json &j) {
    int n = 0;
    for (const json &s : j)
      for (pid_t w : workers)
        n += s["pid"].get<int64_t>() == w && s["decisions_total"].get<uint64_t>() == static_cast<uint64_t>(kAdmits);
    return n;
  };
  json all = wait_for([&] { return reader.clients(); }, [&](const json &j) { return workers_seen(j) == kWorkers; });
  EXPECT_EQ(workers_seen(all), kWorkers) << all.dump(2);
  std::set<std::string> ids;
  for (const json &s : all) ids.insert(s["id"].get<std::string>());
  EXPECT_EQ(ids.size(), all.size()) << "every process its own id";
  for (pid_t w : workers) {
    kill(w, SIGKILL);
    waitpid(w, nullptr, 0);
  }
  json after = wait_for([&] { return reader.clients(); }, [&](const json &j) { return workers_seen(j) == 0; });
  EXPECT_EQ(workers_seen(after), 0) << after.dump(2);
}

}  // namespace
