// redis+cluster:// against a real Redis Cluster the test starts (cluster_redis.hpp: 3 masters, each with a
// replica unless said, cluster-node-timeout 1000 ms, every node on 127.0.0.1). The client must find the
// slot map through any seed that answers, write each tenant's keys on the master of its slot, stay exact
// across threads and processes there, follow a slot migration (ASK, then MOVED) without a caller ever
// seeing it, follow a failover (the fallback deciding meanwhile, never failing open), and say CLUSTERDOWN
// and TRYAGAIN as their own fail reason (cluster). The fleet shedder is decided in process from the
// clients' reports: exact for one client, over its capacity by at most what the others admitted within a
// report period or two for several. A wrong password and a seed that is no cluster are config, said once;
// no seed reachable is said once. Over TLS (rediss+cluster://) each master is verified by its own address;
// a CA that did not sign the nodes, or another server name, is config, said once. A node whose CLUSTER SHARDS
// lists a shard without its slots (Redis 7.2-7.4 after a second failover, issue #60: a fake node of
// fake_cluster_node.hpp in front of the real cluster) or contradicts itself is completed from its CLUSTER
// SLOTS and the other nodes; slots no node assigns are the fallback's, reason cluster, said once; two
// failovers in a row are each followed.
//
// Suites: Cluster shares one healthy cluster (its tests read the slot map afresh: a migration moves a slot);
// ClusterSetup needs no cluster; ClusterAcl, ClusterDown, ClusterFailover and ClusterTls start clusters of
// their own (an ACL user, no replicas, a master killed, every node speaking only TLS). Under ctest every
// test is a process of its own, so each starts its suite's cluster (about 2 s here).
#include <floodwall.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <new>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "admits.hpp"
#include "capture_stderr.hpp"
#include "cluster_node.hpp"
#include "cluster_redis.hpp"
#include "cluster_tenants.hpp"
#include "fake_cluster_node.hpp"
#include "in_flight.hpp"
#include "redis_server.hpp"
#include "stores/redis/cluster_map.hpp"

using floodwall::testing::admit;
using floodwall::testing::admit_held;
using floodwall::testing::answered_within;
using floodwall::testing::by_store;
using floodwall::testing::CaptureStderr;
using floodwall::testing::client;
using floodwall::testing::ClusterRedis;
using floodwall::testing::ClusterSlotRange;
using floodwall::testing::ClusterTopology;
using floodwall::testing::count;
using floodwall::testing::every_tenant_by_its_master;
using floodwall::testing::FakeClusterNode;
using floodwall::testing::free_port;
using floodwall::testing::rate_key;
using floodwall::testing::reason_within;
using floodwall::testing::RedisServer;
using floodwall::testing::tenants_on_masters;
using floodwall::testing::TlsCerts;

namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

// The fleet shedder's reports on a cluster under `prefix`: a hash in a slot of its own (never a tenant's:
// `~` starts no plain tenant id, and the encoded ones are longer). Each fleet test has a prefix of its own,
// so that no report of another test's clients (counting until it expires) is among the others.
std::string reports_key(const std::string &prefix) {
  return prefix + ":{~fleet}:reports";
}

std::string policy(const std::string &url,
                   const std::string &sections = R"("request_rate": {"rate": 100000, "burst": 100000})",
                   int deadline_ms = 500, const std::string &redis = "") {
  return R"({"store": ")" + url + R"(", "redis": {"deadline_ms": )" + std::to_string(deadline_ms) + redis + "}, " +
         sections + "}";
}

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Redis' TIME on a node, in seconds: every node runs on this host, so any master's clock is the fleet's.
double redis_seconds(const ClusterTopology &t, int port) {
  return floodwall::testing::time_reply_seconds(t.command(port, {"TIME"}));
}

// The first tenant id stem-N whose keys hash to `slot` (about 16,384 tries, computed here).
std::string tenant_in_slot(const std::string &stem, uint16_t slot) {
  for (int i = 0;; i++) {
    std::string tenant = stem + "-" + std::to_string(i);
    if (floodwall::key_slot(rate_key(tenant)) == slot) return tenant;
  }
}

// Waits until every running node's CLUSTER INFO says cluster_state:<state>; false after timeout_s.
bool wait_cluster_state(const ClusterTopology &t, const std::string &state, double timeout_s) {
  auto t0 = Clock::now();
  while (seconds_since(t0) < timeout_s) {
    bool all = true;
    for (int p : t.live_ports())
      all = all && t.command(p, {"CLUSTER", "INFO"}).find("cluster_state:" + state) != std::string::npos;
    if (all) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

// The keys of `slot` on the node on `port` (CLUSTER GETKEYSINSLOT).
std::vector<std::string> keys_in_slot(const ClusterTopology &t, int port, uint16_t slot) {
  std::string keys = t.command(port, {"CLUSTER", "GETKEYSINSLOT", std::to_string(slot), "1000"});
  std::vector<std::string> out;
  for (size_t at = 0; at < keys.size();) {
    size_t space = keys.find(' ', at);
    out.push_back(keys.substr(at, space - at));
    at = space == std::string::npos ? keys.size() : space + 1;
  }
  return out;
}

// Seconds left until `deadline`, at least `floor_s` (so that one more try is made).
double left_until(Clock::time_point deadline, double floor_s = 0.2) {
  return std::max(floor_s, std::chrono::duration<double>(deadline - Clock::now()).count());
}

// Joins threads told to stop however the test ends (an ASSERT returning early included).
struct StopAndJoin {
  std::atomic<bool> &stop;
  std::vector<std::thread> &threads;
  ~StopAndJoin() {
    stop = true;
    for (auto &th : threads) {
      if (th.joinable()) th.join();
    }
  }
};

// Waits for a child up to timeout_s: its status, or -1 after killing it when it hung.
int wait_child(pid_t pid, double timeout_s) {
  int status = 0;
  auto t0 = Clock::now();
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (seconds_since(t0) > timeout_s) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return status;
}

bool exited_ok(int status) {
  return status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// What a child said: "exit N", "signal N" or "hung".
std::string child_text(int status) {
  return status < 0 ? "hung" : floodwall::testing::exit_text(status);
}

// One byte through a pipe, waiting at most timeout_s for it: false when none came.
bool read_byte(int fd, double timeout_s) {
  pollfd p{fd, POLLIN, 0};
  char ch = 0;
  return poll(&p, 1, static_cast<int>(timeout_s * 1000)) == 1 && read(fd, &ch, 1) == 1;
}
void write_byte(int fd) {
  char ch = 'x';
  (void)!write(fd, &ch, 1);
}

// A pipe closed at the end of the scope: r to read, w to write.
struct Pipe {
  int r = -1, w = -1;
  Pipe() {
    int fds[2];
    if (pipe(fds) == 0) {
      r = fds[0];
      w = fds[1];
    }
  }
  ~Pipe() {
    if (r >= 0) close(r);
    if (w >= 0) close(w);
  }
  Pipe(const Pipe &) = delete;
  Pipe &operator=(const Pipe &) = delete;
};

// One tenant's figures, shared by the processes of a test (placed in a MAP_SHARED mapping).
struct Counts {
  std::atomic<int64_t> decisions{0}, store{0}, allowed{0}, conc_refused{0};
  floodwall::testing::InFlight in_flight;
};

// An admit counted in `n`: an allowed one is held for `hold`, counted in flight meanwhile, then released.
void admit_counted(fw_client *c, const std::string &tenant, Counts &n, std::chrono::microseconds hold) {
  fw_decision d = admit_held(c, tenant);
  n.decisions++;
  n.store += by_store(d);
  if (d.allowed) {
    n.allowed++;
    n.in_flight.hold(hold);
  } else {
    n.conc_refused += d.limiter == FW_LIMITER_CONCURRENCY;
  }
  fw_release(c, d.ticket);
}

// The real cluster's topology as a fake node gives it (issue #60), from the ranges its nodes name: CLUSTER
// SLOTS (each master with its id; the ranges of the master on `left_out` left out), and CLUSTER SHARDS as
// Redis 7.2-7.4 give it after a second failover: the shard of the master on `emptied` listed with no slots,
// a failed old master (on a port nothing listens on) first.
std::string fake_slots(const std::vector<ClusterSlotRange> &ranges, int left_out = -1) {
  using namespace floodwall::testing::resp;
  std::vector<std::string> out;
  for (const ClusterSlotRange &r : ranges) {
    if (r.master == left_out) continue;
    out.push_back(arr({num(r.start), num(r.end), arr({bulk("127.0.0.1"), num(r.master), bulk(r.master_id), arr({})})}));
  }
  return arr(out);
}
std::string fake_shards_node(const std::string &id, int port, const std::string &role, const std::string &health) {
  using namespace floodwall::testing::resp;
  return arr({bulk("id"), bulk(id), bulk("port"), num(port), bulk("ip"), bulk("127.0.0.1"), bulk("endpoint"),
              bulk("127.0.0.1"), bulk("role"), bulk(role), bulk("replication-offset"), num(14), bulk("health"),
              bulk(health)});
}
std::string fake_shards(const std::vector<ClusterSlotRange> &ranges, int emptied) {
  using namespace floodwall::testing::resp;
  std::map<int, std::vector<std::string>> slots;
  std::map<int, std::string> ids;
  for (const ClusterSlotRange &r : ranges) {
    if (r.master != emptied) slots[r.master].insert(slots[r.master].end(), {num(r.start), num(r.end)});
    ids[r.master] = r.master_id;
  }
  std::vector<std::string> out;
  for (const auto &[port, id] : ids) {
    std::vector<std::string> nodes;
    if (port == emptied)
      nodes.push_back(fake_shards_node(std::string(40, 'd'), free_port(), "master", "fail"));  // the old master
    nodes.push_back(fake_shards_node(id, port, "master", "online"));
    out.push_back(arr({bulk("slots"), arr(slots[port]), bulk("nodes"), arr(nodes)}));
  }
  return arr(out);
}

// One shared healthy cluster for the tests that leave it so.
class Cluster : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { topo_ = new ClusterTopology(); }
  static void TearDownTestSuite() {
    delete topo_;
    topo_ = nullptr;
  }
  static ClusterTopology *topo_;
};
ClusterTopology *Cluster::topo_ = nullptr;

}  // namespace

// The first seed is down and the second is a replica: its CLUSTER SLOTS is the whole map, so the client
// finds every master and writes each tenant's bucket on the master of its slot (and nowhere else).
TEST_F(Cluster, OneReachableSeedIsEnoughAndEachTenantIsOnItsMaster) {
  ClusterTopology &t = *topo_;
  auto replicas = t.replica_ports();
  ASSERT_FALSE(replicas.empty());
  fw_client *c = client(policy(t.url("redis+cluster://", {free_port(), replicas[0]}),
                               R"("request_rate": {"rate": 0.001, "burst": 1000})"));
  ASSERT_NE(c, nullptr);
  auto on = tenants_on_masters(t, "seed", 2);
  ASSERT_EQ(on.size(), 3u);
  EXPECT_EQ(t.key_slot(rate_key("seed-0")), floodwall::key_slot(rate_key("seed-0"))) << "the slot computed here";
  for (const auto &[master, tenants] : on) {
    for (const auto &tenant : tenants) {
      ASSERT_TRUE(answered_within(c, tenant, 5)) << tenant << " of " << master;
      int store = 0;
      for (int i = 0; i < 20; i++) store += by_store(admit(c, tenant));
      EXPECT_EQ(store, 20) << tenant << ": every decision by its master";
      EXPECT_EQ(t.command(master, {"EXISTS", rate_key(tenant)}), "1") << tenant << " on its master " << master;
      for (int other : t.master_ports()) {
        if (other != master) {
          EXPECT_EQ(t.command(other, {"GET", rate_key(tenant)}).rfind("MOVED ", 0), 0u) << "not on " << other;
        }
      }
    }
  }
  fw_client_free(c);
}

// Limits and quotas on a cluster: a tenant's rule keys share its hash tag, so one script on the tenant's
// master checks them all; exact per tenant on every master, and the keys are on that master only.
TEST_F(Cluster, LimitsAndQuotasAreCheckedOnEachTenantsMaster) {
  ClusterTopology &t = *topo_;
  fw_client *c = client(policy(t.url(), R"("request_rate": {"rate": 0.001, "burst": 100, "limits": [
      {"name": "search", "routes": ["/search"], "rate": 0.001, "burst": 3}]},
      "quotas": [{"name": "daily", "limit": 5, "period": "day"}])"));
  ASSERT_NE(c, nullptr);
  auto on = tenants_on_masters(t, "rules", 1);
  ASSERT_EQ(on.size(), 3u);
  for (const auto &[master, tenants] : on) {
    const std::string &tenant = tenants[0];
    ASSERT_TRUE(answered_within(c, "warm-" + tenant, 5));
    int search = 0, any = 0, by_store_n = 0;
    for (int i = 0; i < 10; i++) {
      fw_request r = FW_REQUEST_INIT;
      r.tenant = tenant.data();
      r.tenant_len = tenant.size();
      r.route = i % 2 ? "/search" : "/other";
      fw_decision d = FW_DECISION_INIT;
      ASSERT_EQ(fw_admit(c, &r, &d), FW_OK);
      by_store_n += by_store(d);
      if (d.allowed) (i % 2 ? search : any)++;
    }
    EXPECT_EQ(by_store_n, 10) << tenant;
    EXPECT_EQ(search + any, 5) << tenant << ": the daily quota";
    EXPECT_LE(search, 3) << tenant;
    std::string prefix = "floodwall:{" + tenant + "}:";
    EXPECT_EQ(t.command(master, {"EXISTS", prefix + "quota:daily"}), "1") << tenant << " on " << master;
    EXPECT_EQ(t.command(master, {"EXISTS", prefix + "limit:search"}), "1") << tenant << " on " << master;
  }
  fw_client_free(c);
}

// The admin API on a cluster: each tenant's control record on its own master (the admit reads it in the
// same script), the index of records on the master of its own slot, the change seen by another client's
// next admit.
TEST_F(Cluster, ControlRecordsLiveOnEachTenantsMaster) {
  ClusterTopology &t = *topo_;
  std::string pol =
      policy(t.url(), R"("request_rate": {"rate": 0.001, "burst": 2}, "tiers": {"pro": {"rate": 0.001, "burst": 5}})");
  fw_client *app = client(pol), *ops = client(pol);
  ASSERT_NE(app, nullptr);
  ASSERT_NE(ops, nullptr);
  auto on = tenants_on_masters(t, "ctl", 1);
  ASSERT_EQ(on.size(), 3u);
  for (const auto &[master, tenants] : on) {
    const std::string &tenant = tenants[0];
    ASSERT_TRUE(answered_within(app, "warm-" + tenant, 5));
    ASSERT_EQ(fw_admin_block(ops, tenant.data(), tenant.size(), 0), FW_OK) << fw_error_last()->message;
    fw_decision d = admit(app, tenant);
    EXPECT_EQ(d.status, 403) << tenant;
    EXPECT_TRUE(by_store(d));
    EXPECT_EQ(t.command(master, {"HGET", "floodwall:{" + tenant + "}:ctl", "block"}), "0")
        << tenant << " on " << master;
    ASSERT_EQ(fw_admin_unblock(ops, tenant.data(), tenant.size()), FW_OK);
    ASSERT_EQ(fw_admin_set_tier(ops, tenant.data(), tenant.size(), "pro"), FW_OK);
    int ok = 0;
    for (int i = 0; i < 8; i++) ok += admit(app, tenant).allowed;
    EXPECT_EQ(ok, 5) << tenant << ": pro's bucket";
  }
  fw_buf b = FW_BUF_INIT;
  ASSERT_EQ(fw_admin_list(ops, 100, &b), FW_OK) << fw_error_last()->message;
  auto list = nlohmann::json::parse(b.ptr);
  fw_buf_dispose(&b);
  EXPECT_EQ(list.size(), 3u) << list.dump();
  fw_client_free(ops);
  fw_client_free(app);
}

// Four processes of three threads, one tenant per master, each thread holding its slot a moment: every
// tenant within burst + rate x elapsed (Redis' TIME: one clock on this host) and never above its
// concurrency limit, every decision by the tenant's master.
TEST_F(Cluster, FourProcessesStayExactOnEveryMaster) {
  ClusterTopology &t = *topo_;
  const double rate = 200;
  const int burst = 40, limit = 2, processes = 4;
  auto on = tenants_on_masters(t, "exact", 1);
  ASSERT_EQ(on.size(), 3u);
  std::vector<std::string> tenants;
  std::vector<int> masters;
  for (const auto &[master, ts] : on) {
    masters.push_back(master);
    tenants.push_back(ts[0]);
  }
  std::string pol =
      policy(t.url(), R"("request_rate": {"rate": 200, "burst": 40}, "concurrency": {"limit": 2, "ttl_s": 30})",
             /*deadline_ms=*/2000);
  // Per tenant: allowed, answered by the store, decisions, in flight now, the most ever in flight.
  void *mem = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  auto *counts = new (mem) Counts[3];
  double t0 = redis_seconds(t, masters[0]);
  auto start = Clock::now();
  std::vector<pid_t> kids;
  for (int p = 0; p < processes; p++) {
    pid_t pid = fork();
    if (pid == 0) {
      fw_client *c = nullptr;
      if (fw_client_new(&c, pol.c_str()) != FW_OK) _exit(2);
      std::vector<std::thread> ts;
      for (int k = 0; k < 3; k++)
        ts.emplace_back([&, k] {
          Counts &n = counts[k];
          while (Clock::now() - start < std::chrono::milliseconds(1200)) {
            admit_counted(c, tenants[k], n, std::chrono::microseconds(200));
          }
        });
      for (auto &th : ts) th.join();
      fw_client_free(c);  // the last releases go out before the process exits
      _exit(0);
    }
    kids.push_back(pid);
  }
  for (pid_t k : kids) {
    int status = wait_child(k, 60);
    EXPECT_TRUE(exited_ok(status)) << "a child: " << child_text(status);
  }
  double elapsed = redis_seconds(t, masters[0]) - t0;
  // Each bucket is on the master of its tenant: asked first, for every tenant, since a bucket expires once
  // full again (a fraction of a second after its last admit; the waits for the slots below took longer once
  // under load).
  for (int k = 0; k < 3; k++)
    EXPECT_EQ(t.command(masters[k], {"EXISTS", rate_key(tenants[k])}), "1") << tenants[k] << " on its master";
  for (int k = 0; k < 3; k++) {
    const Counts &n = counts[k];
    std::printf("%s on %d: %lld allowed of %lld in %.3f s (bound %.0f), at most %lld in flight (limit %d)\n",
                tenants[k].c_str(), masters[k], static_cast<long long>(n.allowed.load()),
                static_cast<long long>(n.decisions.load()), elapsed, burst + rate * elapsed,
                static_cast<long long>(n.in_flight.most.load()), limit);
    EXPECT_EQ(n.store.load(), n.decisions.load()) << tenants[k] << ": every decision by its master";
    EXPECT_LE(n.allowed.load(), static_cast<int64_t>(burst + rate * elapsed) + 1)
        << tenants[k] << ": " << elapsed << " s";
    EXPECT_GT(n.allowed.load(), burst) << tenants[k] << ": the bucket refilled and was used";
    EXPECT_LE(n.in_flight.most.load(), limit) << tenants[k] << ": the concurrency limit was exceeded at some instant";
    EXPECT_GE(n.in_flight.most.load(), 1);
    // Every slot was given back, on the master of the tenant.
    std::string conc = "floodwall:{" + tenants[k] + "}:conc";
    for (int i = 0; i < 100 && t.command(masters[k], {"ZCARD", conc}) != "0"; i++)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_EQ(t.command(masters[k], {"ZCARD", conc}), "0") << tenants[k];
  }
  munmap(mem, 4096);
}

// The issue's shape: four processes of four threads over 20 tenants spread over the three masters, each
// admit asking the tenant's request rate and concurrency (both keys in one script on its master), a thread
// picking its tenant at random each time and holding an admitted slot 2 ms. Every tenant within burst +
// rate x elapsed (Redis' TIME, read just before the admitting starts and after the children exited) and
// never above its concurrency limit at any instant, every decision by the store (any other counted, and a
// failure); the totals of each master printed.
TEST_F(Cluster, TwentyTenantsOverThreeMastersStayExactFromFourProcesses) {
  ClusterTopology &t = *topo_;
  const double rate = 100;
  const int burst = 20, limit = 2, processes = 4, threads = 4;
  constexpr size_t kTenants = 20;
  auto on = tenants_on_masters(t, "twenty", 7);
  ASSERT_EQ(on.size(), 3u);
  std::vector<std::string> tenants;
  std::vector<int> master_of;
  for (size_t i = 0; tenants.size() < kTenants; i++) {  // 7, 7 and 6: every master has its part
    for (const auto &[master, ts] : on) {
      if (i < ts.size() && tenants.size() < kTenants) {
        tenants.push_back(ts[i]);
        master_of.push_back(master);
      }
    }
  }
  for (const auto &[master, ts] : on) {
    ASSERT_GE(std::count(master_of.begin(), master_of.end(), master), 6) << "tenants on master " << master;
  }
  std::string pol =
      policy(t.url(), R"("request_rate": {"rate": 100, "burst": 20}, "concurrency": {"limit": 2, "ttl_s": 30})",
             /*deadline_ms=*/2000);
  // Per tenant: decisions, by the store, allowed, refused by the concurrency limit, in flight now, the most
  // ever in flight.
  const size_t size = sizeof(Counts) * kTenants;
  void *mem = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  auto *counts = new (mem) Counts[kTenants];
  // The test's process holds no client: the children are forked from a process with no thread of floodwall.
  auto go = Clock::now() + std::chrono::milliseconds(600);  // every child has its client by then
  auto end = go + std::chrono::milliseconds(2000);
  std::vector<pid_t> kids;
  for (int p = 0; p < processes; p++) {
    pid_t pid = fork();
    if (pid == 0) {
      fw_client *c = nullptr;
      if (fw_client_new(&c, pol.c_str()) != FW_OK) _exit(2);
      std::this_thread::sleep_until(go);
      std::vector<std::thread> ts;
      for (int k = 0; k < threads; k++)
        ts.emplace_back([&, k] {
          std::mt19937 rng(static_cast<unsigned>(p * threads + k + 1));
          while (Clock::now() < end) {
            size_t j = rng() % kTenants;
            Counts &n = counts[j];
            admit_counted(c, tenants[j], n, std::chrono::milliseconds(2));
          }
        });
      for (auto &th : ts) th.join();
      fw_client_free(c);  // the last releases go out before the process exits
      _exit(0);
    }
    kids.push_back(pid);
  }
  // Redis' TIME a little before the first admit (no admit can come before it: the bound is only looser by
  // rate x the 50 ms), and after every child is gone. A parent that got here late (forking four children
  // under a sanitizer on a busy machine can take longer than the 600 ms) takes off what it overslept, by
  // the steady clock read after TIME answered: Redis' t0 is then no later than its time at the go.
  const auto at = go - std::chrono::milliseconds(50);
  std::this_thread::sleep_until(at);
  double t0 = redis_seconds(t, master_of[0]);
  t0 -= std::max(0.0, std::chrono::duration<double>(Clock::now() - at).count());
  for (pid_t k : kids) {
    int status = wait_child(k, 60);
    EXPECT_TRUE(exited_ok(status)) << "a child: " << child_text(status);
  }
  double elapsed = redis_seconds(t, master_of[0]) - t0;
  const double bound = burst + rate * elapsed;

  struct Total {
    int tenants = 0;
    int64_t decisions = 0, store = 0, allowed = 0, conc_refused = 0, most = 0;
    double tightest = 1e9;  // the least bound - allowed of its tenants
  };
  std::map<int, Total> per_master;
  int64_t not_store = 0, most_anywhere = 0;
  for (size_t j = 0; j < kTenants; j++) {
    const Counts &n = counts[j];
    Total &m = per_master[master_of[j]];
    m.tenants++;
    m.decisions += n.decisions.load();
    m.store += n.store.load();
    m.allowed += n.allowed.load();
    m.conc_refused += n.conc_refused.load();
    m.most = std::max(m.most, n.in_flight.most.load());
    m.tightest = std::min(m.tightest, bound - static_cast<double>(n.allowed.load()));
    not_store += n.decisions.load() - n.store.load();
    most_anywhere = std::max(most_anywhere, n.in_flight.most.load());
    EXPECT_LE(n.allowed.load(), static_cast<int64_t>(bound) + 1)
        << tenants[j] << " on " << master_of[j] << ": " << elapsed << " s";
    EXPECT_GT(n.allowed.load(), burst) << tenants[j] << ": the bucket refilled and was used";
    EXPECT_LE(n.in_flight.most.load(), limit) << tenants[j] << ": the concurrency limit was exceeded at some instant";
    EXPECT_GE(n.in_flight.most.load(), 1) << tenants[j];
  }
  int64_t decisions = 0;
  for (const auto &[master, m] : per_master) {
    decisions += m.decisions;
    std::printf(
        "master %d: %d tenants, %lld decisions (%lld by the store), %lld allowed (bound %.0f each: %.0f for its "
        "tenants; the tightest tenant %.1f under), %lld refused by the concurrency limit, at most %lld in flight on "
        "a tenant (limit %d)\n",
        master, m.tenants, static_cast<long long>(m.decisions), static_cast<long long>(m.store),
        static_cast<long long>(m.allowed), bound, bound * m.tenants, m.tightest, static_cast<long long>(m.conc_refused),
        static_cast<long long>(m.most), limit);
  }
  std::printf(
      "%d processes x %d threads over %zu tenants: %lld decisions in %.3f s (Redis' TIME), %lld not by the "
      "store\n",
      processes, threads, kTenants, static_cast<long long>(decisions), elapsed, static_cast<long long>(not_store));
  RecordProperty("twenty_decisions", std::to_string(decisions));
  EXPECT_EQ(not_store, 0) << "decisions not by the store (the fallback's or failed open)";
  EXPECT_EQ(per_master.size(), 3u);
  EXPECT_EQ(most_anywhere, limit) << "some tenant held its whole concurrency limit at some instant";
  for (size_t j = 0; j < kTenants; j++) {
    // Every slot was given back, and each tenant's keys are on its master.
    std::string conc = "floodwall:{" + tenants[j] + "}:conc";
    for (int i = 0; i < 100 && t.command(master_of[j], {"ZCARD", conc}) != "0"; i++)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_EQ(t.command(master_of[j], {"ZCARD", conc}), "0") << tenants[j];
    EXPECT_EQ(t.command(master_of[j], {"EXISTS", rate_key(tenants[j])}), "1") << tenants[j] << " on its master";
  }
  munmap(mem, size);
}

// One client (one process, many threads): the fleet shedder decided in process is exact. Deterministic
// first: the capacity held, the next non-critical request is a fleet 503 that spends no token, a critical
// one passes; the client's count is reported to the reports hash. Then sixteen threads on six tenants
// (two per master) never hold more than the capacity.
TEST_F(Cluster, TheFleetCapacityIsExactForOneClient) {
  ClusterTopology &t = *topo_;
  const int cap = 8;
  fw_client *c = client(policy(
      t.url(), R"("prefix": "fleet1", "request_rate": {"rate": 0.1, "burst": 100000}, "fleet": {"capacity": 8})"));
  ASSERT_NE(c, nullptr);
  auto on = tenants_on_masters(t, "fleet1", 2);
  std::vector<std::string> tenants;
  for (const auto &[master, ts] : on) tenants.insert(tenants.end(), ts.begin(), ts.end());
  ASSERT_EQ(tenants.size(), 6u);
  for (const auto &tenant : tenants) ASSERT_TRUE(answered_within(c, tenant, 5)) << tenant;

  const std::string x = tenants[0];
  int64_t before = admit(c, x).remaining;  // by the store, as answered_within() saw
  std::vector<fw_ticket> held;
  for (int i = 0; i < cap; i++) {
    fw_decision d = admit_held(c, x);
    EXPECT_TRUE(d.allowed && by_store(d)) << i;
    held.push_back(d.ticket);
  }
  for (int i = 0; i < 5; i++) {
    fw_decision d = admit_held(c, tenants[static_cast<size_t>(i) % tenants.size()]);
    EXPECT_FALSE(d.allowed) << "the capacity is held";
    EXPECT_EQ(d.limiter, FW_LIMITER_FLEET);
    EXPECT_EQ(d.status, 503);
    EXPECT_TRUE(by_store(d)) << "the fleet decided in process is no fallback";
    fw_release(c, d.ticket);
  }
  fw_decision critical = admit_held(c, x, /*critical=*/true);
  EXPECT_TRUE(critical.allowed) << "critical requests are never counted";
  EXPECT_TRUE(by_store(critical));
  EXPECT_EQ(critical.remaining, before - cap - 1) << "the fleet's rejections of " << x << " spent no token";
  fw_release(c, critical.ticket);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // two reports at least
  const std::string reports = reports_key("fleet1");
  EXPECT_EQ(t.command_on_key(reports, {"TYPE", reports}), "hash") << "the client reports to " << reports;
  EXPECT_NE(t.command_on_key(reports, {"HLEN", reports}), "0");
  for (fw_ticket ticket : held) fw_release(c, ticket);
  fw_decision again = admit_held(c, x);
  EXPECT_TRUE(again.allowed) << "released: the client's own count is now";
  fw_release(c, again.ticket);

  std::atomic<int64_t> allowed{0}, rejected{0}, not_fleet{0}, not_store{0};
  floodwall::testing::InFlight in_flight;
  auto start = Clock::now();
  std::vector<std::thread> threads;
  for (int k = 0; k < 16; k++)
    threads.emplace_back([&, k] {
      const std::string &tenant = tenants[static_cast<size_t>(k) % tenants.size()];
      while (Clock::now() - start < std::chrono::milliseconds(1500)) {
        fw_decision d = admit_held(c, tenant);
        not_store += !by_store(d);
        if (d.allowed) {
          allowed++;
          in_flight.hold(std::chrono::milliseconds(2));
        } else {
          rejected++;
          not_fleet += d.limiter != FW_LIMITER_FLEET || d.status != 503;
          std::this_thread::sleep_for(std::chrono::microseconds(200));
        }
        fw_release(c, d.ticket);
      }
    });
  for (auto &th : threads) th.join();
  std::printf("one client, 16 threads, capacity %d: %lld allowed, %lld shed, at most %lld in flight\n", cap,
              static_cast<long long>(allowed.load()), static_cast<long long>(rejected.load()),
              static_cast<long long>(in_flight.most.load()));
  RecordProperty("one_client_most_in_flight", std::to_string(in_flight.most.load()));
  EXPECT_LE(in_flight.most.load(), cap) << "one client is exact";
  EXPECT_GE(in_flight.most.load(), cap / 2) << "the capacity was used";
  EXPECT_GT(rejected.load(), 0) << "and shed beyond it";
  EXPECT_EQ(not_fleet.load(), 0) << "every rejection the fleet's (503)";
  EXPECT_EQ(not_store.load(), 0) << "no decision the fallback's";
  fw_client_free(c);
}

// Several clients: each decides from the others' reports (at most a report period or two old) and its own
// count now. First, deterministically: a client in one process sees another's held capacity once the
// reports went round, and sees it released the same way. Then four processes of eight threads, requests
// held 0.8-1.2 s: the measured in-flight count may pass the capacity only by what the other processes
// admitted within the 400 ms before (a report period of the one that admitted, one of the one deciding, a
// round trip, and slack for a loaded 2-core machine). Requests are held longer than that window on
// purpose: what the others admitted before it must be in their reports, so a client that ignored them
// (each holding the whole capacity) would break the bound; with shorter holds every request in flight
// would be in the window and the bound would say nothing. The overshoot, and how the count swings (every
// client acting on the same stale view), are printed.
TEST_F(Cluster, TheFleetCapacityIsPassedOnlyByWhatOthersAdmittedWithinAReport) {
  ClusterTopology &t = *topo_;
  const int cap = 8, processes = 4, threads = 8;
  std::string pol =
      policy(t.url(), R"("prefix": "fleetN", "request_rate": {"rate": 1, "burst": 1000000}, "fleet": {"capacity": 8})");
  auto on = tenants_on_masters(t, "fleetN", 3);
  std::vector<std::string> tenants;
  for (const auto &[master, ts] : on) tenants.insert(tenants.end(), ts.begin(), ts.end());
  ASSERT_EQ(tenants.size(), 9u);

  {
    // Both clients in processes of their own, the test's process holding none: a process forked while a
    // client's threads run must not start threads of its own (see the Makefile's sanitizer notes).
    Pipe a_held, a_go, a_released, b_checked, b_go;
    pid_t a = fork();
    if (a == 0) {
      fw_client *c = nullptr;
      if (fw_client_new(&c, pol.c_str()) != FW_OK) _exit(2);
      if (!answered_within(c, tenants[0], 5)) _exit(8);  // its first view of the fleet
      std::vector<fw_ticket> held;
      for (int i = 0; i < cap; i++) {
        fw_decision d = admit_held(c, tenants[static_cast<size_t>(i) % tenants.size()]);
        if (!d.allowed || !by_store(d)) _exit(3);
        held.push_back(d.ticket);
      }
      write_byte(a_held.w);
      if (!read_byte(a_go.r, 20)) _exit(6);
      for (fw_ticket ticket : held) fw_release(c, ticket);
      write_byte(a_released.w);
      if (!read_byte(a_go.r, 20)) _exit(6);
      fw_client_free(c);
      _exit(0);
    }
    ASSERT_GT(a, 0);
    EXPECT_TRUE(read_byte(a_held.r, 15)) << "the first client holds the capacity";
    pid_t b = fork();
    if (b == 0) {
      fw_client *c = nullptr;
      if (fw_client_new(&c, pol.c_str()) != FW_OK) _exit(2);
      fw_release(c, admit_held(c, tenants[0], /*critical=*/true).ticket);  // counted by no fleet: starts it up
      std::this_thread::sleep_for(std::chrono::milliseconds(350));
      fw_decision d = admit_held(c, tenants[1]);
      if (d.allowed) _exit(3);
      if (d.limiter != FW_LIMITER_FLEET) _exit(4);
      fw_decision crit = admit_held(c, tenants[1], /*critical=*/true);
      if (!crit.allowed) _exit(5);
      fw_release(c, crit.ticket);
      write_byte(b_checked.w);
      if (!read_byte(b_go.r, 20)) _exit(6);
      std::this_thread::sleep_for(std::chrono::milliseconds(350));
      fw_decision after = admit_held(c, tenants[1]);
      if (!after.allowed || !by_store(after)) _exit(7);
      fw_release(c, after.ticket);
      fw_client_free(c);
      _exit(0);
    }
    ASSERT_GT(b, 0);
    EXPECT_TRUE(read_byte(b_checked.r, 15)) << "the second client checked the held capacity";
    write_byte(a_go.w);
    EXPECT_TRUE(read_byte(a_released.r, 15)) << "the first client released the capacity";
    write_byte(b_go.w);
    int b_status = wait_child(b, 15);
    write_byte(a_go.w);
    int a_status = wait_child(a, 15);
    // 2: no client; 3: the first could not take the capacity, or the second admitted beyond what the first
    // held; 4: refused by another limiter; 5: a critical request was refused; 6: not told on; 7: still
    // refused (or by the fallback) after the capacity was released; 8: no store answer.
    EXPECT_TRUE(exited_ok(a_status)) << "the client holding the capacity: " << child_text(a_status);
    EXPECT_TRUE(exited_ok(b_status)) << "the other client: " << child_text(b_status);
  }

  // Each admit: when (steady clock, the same in every process), by which process, and the in-flight count
  // (every process's) just after it. Counted, timed and logged under one lock, so that the log's order is
  // the count's and an admit counted before another is never timed after it.
  struct Entry {
    int64_t ns;
    int32_t proc;
    int32_t in_flight;
  };
  constexpr size_t kEntries = 200000;
  struct Shared {
    std::atomic<int64_t> in_flight{0}, next{0}, rejected{0}, not_fleet{0}, not_store{0};
    std::atomic_flag lock;  // clear (C++20)
    Entry log[kEntries];
  };
  size_t size = sizeof(Shared);
  void *mem = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  auto *shared = new (mem) Shared;
  // Every client is made and has reported before the load starts, all at once.
  auto start = Clock::now() + std::chrono::milliseconds(1500);
  auto end = start + std::chrono::milliseconds(4000);
  std::vector<pid_t> kids;
  for (int p = 0; p < processes; p++) {
    pid_t pid = fork();
    if (pid == 0) {
      fw_client *c = nullptr;
      if (fw_client_new(&c, pol.c_str()) != FW_OK) _exit(2);
      fw_release(c, admit_held(c, tenants[0], /*critical=*/true).ticket);
      std::this_thread::sleep_until(start);
      std::vector<std::thread> ts;
      for (int k = 0; k < threads; k++)
        ts.emplace_back([&, k] {
          std::mt19937 rng(static_cast<unsigned>(p * 100 + k));
          const std::string &tenant = tenants[static_cast<size_t>(p * threads + k) % tenants.size()];
          while (Clock::now() < end) {
            fw_decision d = admit_held(c, tenant);
            shared->not_store += !by_store(d);
            if (d.allowed) {
              while (shared->lock.test_and_set(std::memory_order_acquire)) {
              }
              int32_t now = static_cast<int32_t>(++shared->in_flight);
              size_t i = static_cast<size_t>(shared->next++);
              if (i < kEntries) shared->log[i] = {Clock::now().time_since_epoch().count(), p, now};
              shared->lock.clear(std::memory_order_release);
              std::this_thread::sleep_for(std::chrono::milliseconds(800 + rng() % 400));
              shared->in_flight--;  // before the release: never more than the clients count
              fw_release(c, d.ticket);
              std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 10));
            } else {
              shared->rejected++;
              shared->not_fleet += d.limiter != FW_LIMITER_FLEET || d.status != 503;
              std::this_thread::sleep_for(std::chrono::milliseconds(3));
            }
          }
        });
      for (auto &th : ts) th.join();
      fw_client_free(c);
      _exit(0);
    }
    kids.push_back(pid);
  }
  // The in-flight count as sampled every millisecond, once the start's rush (every client seeing the
  // others at 0) has been held and released.
  int64_t samples = 0, sum = 0, above = 0;
  std::this_thread::sleep_until(start + std::chrono::milliseconds(1500));
  while (Clock::now() < end) {
    int64_t v = shared->in_flight.load();
    samples++;
    sum += v;
    above += v > cap;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  for (pid_t k : kids) {
    int status = wait_child(k, 60);
    EXPECT_TRUE(exited_ok(status)) << "a child: " << child_text(status);
  }

  size_t n = std::min<size_t>(static_cast<size_t>(shared->next.load()), kEntries);
  std::vector<Entry> log(shared->log, shared->log + n);  // in the order counted, and of time
  const int64_t window_ns = 400'000'000;
  const int64_t steady_ns = (start + std::chrono::milliseconds(1500)).time_since_epoch().count();
  std::array<int64_t, 4> in_window{};  // admits of each process within the window before the current one
  size_t lo = 0;
  int most = 0, most_steady = 0, beyond_bound = 0, worst_over = 0, worst_others = 0;
  int64_t tightest = 1 << 30;  // the least, over admits beyond the capacity, of (the others' admits - the excess)
  for (size_t i = 0; i < log.size(); i++) {
    in_window[static_cast<size_t>(log[i].proc)]++;
    while (log[lo].ns <= log[i].ns - window_ns) in_window[static_cast<size_t>(log[lo++].proc)]--;
    int over = log[i].in_flight - cap;
    most = std::max(most, log[i].in_flight);
    if (log[i].ns >= steady_ns) most_steady = std::max(most_steady, log[i].in_flight);
    if (over <= 0) continue;
    int64_t others = 0;
    for (size_t q = 0; q < in_window.size(); q++) others += q == static_cast<size_t>(log[i].proc) ? 0 : in_window[q];
    if (over > others) beyond_bound++;
    tightest = std::min<int64_t>(tightest, others - over);
    if (over > worst_over) {
      worst_over = over;
      worst_others = static_cast<int>(others);
    }
  }
  double mean = samples ? static_cast<double>(sum) / static_cast<double>(samples) : 0;
  std::printf(
      "fleet, %d processes x %d threads, capacity %d: %zu admitted, %lld shed; at most %d in flight (%d after the "
      "first 1.5 s; the most over the capacity, %d, with %d admits by the others in the 400 ms before; the bound's "
      "tightest margin %lld); after 1.5 s %.1f in flight on average, %.0f%% of the time above the capacity\n",
      processes, threads, cap, n, static_cast<long long>(shared->rejected.load()), most, most_steady, worst_over,
      worst_others, static_cast<long long>(tightest == 1 << 30 ? -1 : tightest), mean,
      samples ? 100.0 * static_cast<double>(above) / static_cast<double>(samples) : 0.0);
  RecordProperty("fleet_most_in_flight", std::to_string(most));
  RecordProperty("fleet_most_in_flight_after_1_5s", std::to_string(most_steady));
  RecordProperty("fleet_mean_in_flight", std::to_string(mean));
  EXPECT_LT(n, kEntries);
  EXPECT_GT(n, static_cast<size_t>(cap)) << "the capacity was used";
  EXPECT_GT(shared->rejected.load(), 0) << "and shed beyond it";
  EXPECT_EQ(beyond_bound, 0) << "admits that passed the capacity by more than the others admitted within 400 ms";
  EXPECT_EQ(shared->not_fleet.load(), 0) << "every rejection the fleet's (503)";
  EXPECT_EQ(shared->not_store.load(), 0) << "no decision the fallback's";
  munmap(mem, size);
}

// A client closed while its last report still counts some requests in flight (taken before they ended):
// it withdraws its count as it closes, so another client does not take it for in flight until the report
// expires a second later.
TEST_F(Cluster, AClosedClientsCountIsWithdrawn) {
  ClusterTopology &t = *topo_;
  const int cap = 8;
  std::string pol = policy(
      t.url(), R"("prefix": "fleetclose", "request_rate": {"rate": 1, "burst": 1000000}, "fleet": {"capacity": 8})");
  auto on = tenants_on_masters(t, "fleetclose", 1);
  std::vector<std::string> tenants;
  for (const auto &[master, ts] : on) tenants.push_back(ts[0]);
  ASSERT_EQ(tenants.size(), 3u);
  fw_client *a = client(pol);
  ASSERT_NE(a, nullptr);
  ASSERT_TRUE(answered_within(a, tenants[0], 5)) << "once the client has its first view of the fleet";
  std::vector<fw_ticket> held;
  for (int i = 0; i < cap; i++) {
    fw_decision d = admit_held(a, tenants[static_cast<size_t>(i) % tenants.size()]);
    EXPECT_TRUE(d.allowed) << i;
    held.push_back(d.ticket);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // reported: 8 in flight
  const std::string reports = reports_key("fleetclose");
  for (fw_ticket ticket : held) fw_release(a, ticket);
  fw_client_free(a);  // at once, before a report says 0
  auto closed = Clock::now();

  fw_client *b = client(pol);
  ASSERT_NE(b, nullptr);
  ASSERT_TRUE(answered_within(b, tenants[1], 5)) << "once the client has its first view of the fleet";
  std::this_thread::sleep_for(std::chrono::milliseconds(250));  // two reports of its own
  double after_s = seconds_since(closed);
  int allowed = 0;
  std::vector<fw_ticket> taken;
  for (int i = 0; i < cap; i++) {
    fw_decision d = admit_held(b, tenants[static_cast<size_t>(i) % tenants.size()]);
    allowed += d.allowed;
    taken.push_back(d.ticket);
  }
  std::string left = t.command_on_key(reports, {"HGETALL", reports});
  for (fw_ticket ticket : taken) fw_release(b, ticket);
  fw_client_free(b);
  std::printf("%.2f s after a client closed: %d of %d admitted by another; the reports: %s\n", after_s, allowed, cap,
              left.c_str());
  EXPECT_EQ(allowed, cap) << "the closed client's count was withdrawn (reports: " << left << ")";
}

// A slot migration in steps while a tenant is admitted (request rate only: one key per admit, which a
// migrating slot always serves somewhere): before its key moved the source serves it; a new tenant of the
// slot is created at the target (ASK); after the key moved, ASK; once finished, MOVED. The store follows
// each, no caller sees any of it, and the bucket carries on: remaining counts every admit of the whole run.
TEST_F(Cluster, ASlotMigrationIsFollowedAndTheBucketCarriesOn) {
  ClusterTopology &t = *topo_;
  fw_client *c = client(policy(t.url(), R"("request_rate": {"rate": 0.001, "burst": 100})"));
  ASSERT_NE(c, nullptr);
  const std::string old_tenant = "migrating";
  uint16_t slot = floodwall::key_slot(rate_key(old_tenant));
  const std::string new_tenant = tenant_in_slot("migrating-new", slot);
  int from = t.master_of_slot(slot);
  int to = -1;
  for (int m : t.master_ports()) {
    if (m != from && to < 0) to = m;
  }
  ASSERT_GT(to, 0);
  int64_t expect_old = 100, expect_new = 100;
  int not_store = 0;
  auto run = [&](const std::string &tenant, int64_t &expect, int times, const char *phase) {
    for (int i = 0; i < times; i++) {
      fw_decision d = admit(c, tenant);
      if (!by_store(d)) {
        not_store++;
        ADD_FAILURE() << phase << ": " << tenant << " admit " << i << " not by the store (degraded " << d.degraded
                      << ", reason " << fw_fail_reason_name(d.fail_reason) << ")";
        continue;  // the fallback's: nothing spent in Redis
      }
      expect--;
      EXPECT_TRUE(d.allowed) << phase << ": " << tenant << " admit " << i;
      EXPECT_EQ(d.remaining, expect) << phase << ": " << tenant << " admit " << i << ": the bucket carries on";
    }
  };
  run(old_tenant, expect_old, 30, "before");
  EXPECT_EQ(t.command(from, {"EXISTS", rate_key(old_tenant)}), "1");

  t.begin_migration(slot, from, to);
  run(old_tenant, expect_old, 10, "migrating, key at the source");
  run(new_tenant, expect_new, 5, "migrating, a new key (ASK)");
  EXPECT_EQ(t.commands(to, {{"ASKING"}, {"EXISTS", rate_key(new_tenant)}}), (std::vector<std::string>{"OK", "1"}))
      << "the new tenant's bucket was made at the target";

  std::vector<std::string> keys = keys_in_slot(t, from, slot);
  ASSERT_FALSE(keys.empty()) << "the old tenant's bucket is at the source";
  EXPECT_EQ(t.migrate_keys(slot, from, to, keys), "OK");
  run(old_tenant, expect_old, 10, "migrating, key moved (ASK)");
  run(new_tenant, expect_new, 5, "migrating, key moved (ASK)");

  t.finish_migration(slot, to);
  run(old_tenant, expect_old, 10, "finished (MOVED)");
  run(new_tenant, expect_new, 5, "finished (MOVED)");
  EXPECT_EQ(t.command(to, {"EXISTS", rate_key(old_tenant)}), "1") << "the bucket is on the new owner";
  EXPECT_EQ(not_store, 0);
  json m = floodwall::testing::metrics_json(c);
  std::printf("migration of slot %u from %d to %d: %d of %d admits not by the store; metrics: sources %s\n", slot, from,
              to, not_store, 75, m["sources"].dump().c_str());
  fw_client_free(c);
}

// The same migration with a concurrency limit too: an admit then touches two keys of the slot (the bucket
// and the slot set, empty between admits so absent), and Redis answers TRYAGAIN while they are split
// between source and target. Such an admit is decided as two one-key calls (cluster_migration_test.cpp
// follows that step by step); whatever decides it, it never fails open, never is said as config (no MOVED
// or ASK reaches the caller), spends in Redis only what the store decided, and once the migration is
// finished the store decides again on the same bucket.
TEST_F(Cluster, ATwoKeyAdmitDuringAMigrationSpendsOnlyWhatTheStoreDecided) {
  ClusterTopology &t = *topo_;
  fw_client *c =
      client(policy(t.url(), R"("request_rate": {"rate": 0.001, "burst": 100}, "concurrency": {"limit": 2})"));
  ASSERT_NE(c, nullptr);
  const std::string tenant = "migrating-two-keys";
  uint16_t slot = floodwall::key_slot(rate_key(tenant));
  int from = t.master_of_slot(slot);
  int to = -1;
  for (int m : t.master_ports()) {
    if (m != from && to < 0) to = m;
  }
  ASSERT_GT(to, 0);
  int64_t store = 0, cluster = 0, other = 0, last_remaining = -1;
  auto run = [&](int times, const char *phase) {
    for (int i = 0; i < times; i++) {
      fw_decision d = admit(c, tenant);
      EXPECT_FALSE(d.failed_open) << phase;
      if (by_store(d)) {
        store++;
        last_remaining = d.remaining;
      } else if (d.degraded && d.fail_reason == FW_FAIL_CLUSTER) {
        cluster++;
      } else {
        other++;
        ADD_FAILURE() << phase << ": admit " << i << " neither the store's nor a cluster fallback (degraded "
                      << d.degraded << ", reason " << fw_fail_reason_name(d.fail_reason) << ")";
      }
    }
  };
  run(10, "before");
  EXPECT_EQ(store, 10);
  t.begin_migration(slot, from, to);
  run(5, "migrating, bucket at the source");
  std::vector<std::string> keys = keys_in_slot(t, from, slot);  // the bucket (and a slot set not yet released)
  ASSERT_FALSE(keys.empty()) << "the bucket is at the source";
  EXPECT_EQ(t.migrate_keys(slot, from, to, keys), "OK");
  run(5, "migrating, bucket moved");
  int64_t during_store = store - 10, during_cluster = cluster;
  t.finish_migration(slot, to);
  // Whatever the breaker made of the TRYAGAIN replies, the store answers again within seconds.
  ASSERT_TRUE(answered_within(c, tenant, 5)) << "after the migration";
  store++;
  run(10, "finished");
  std::printf("TRYAGAIN during a migration: %lld admits by the store and %lld cluster fallbacks while it ran\n",
              static_cast<long long>(during_store), static_cast<long long>(during_cluster));
  EXPECT_EQ(other, 0);
  EXPECT_EQ(last_remaining, 100 - store) << "every token spent in Redis was a store decision's";
  EXPECT_EQ(t.command(to, {"EXISTS", rate_key(tenant)}), "1");
  json m = floodwall::testing::metrics_json(c);
  EXPECT_GE(m["store_failures"]["request_rate"]["cluster"].get<int64_t>(), during_cluster)
      << "each counted: " << m["store_failures"].dump();
  fw_client_free(c);
}

// A concurrency-only admit touches one key, the tenant's slot set, so a migrating slot serves it all along
// (at the source, then through ASK, then MOVED). A slot held from before the migration still counts in the
// moved set, and its release reaches the set wherever it is.
TEST_F(Cluster, ASlotSetCarriesOverAMigration) {
  ClusterTopology &t = *topo_;
  fw_client *c = client(policy(t.url(), R"("concurrency": {"limit": 2, "ttl_s": 30})"));
  ASSERT_NE(c, nullptr);
  const std::string tenant = "migrating-slots";
  const std::string conc = "floodwall:{" + tenant + "}:conc";
  uint16_t slot = floodwall::key_slot(conc);
  int from = t.master_of_slot(slot);
  int to = -1;
  for (int m : t.master_ports()) {
    if (m != from && to < 0) to = m;
  }
  ASSERT_GT(to, 0);
  ASSERT_TRUE(answered_within(c, tenant, 5));
  fw_decision held = admit_held(c, tenant);
  EXPECT_TRUE(held.allowed && by_store(held));
  EXPECT_EQ(t.command(from, {"ZCARD", conc}), "1") << "the held slot, at the source";

  t.begin_migration(slot, from, to);
  fw_decision d = admit(c, tenant);
  EXPECT_TRUE(by_store(d)) << "migrating, set at the source: " << fw_fail_reason_name(d.fail_reason);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.concurrency_remaining, 0) << "the held slot counts";

  std::vector<std::string> keys = keys_in_slot(t, from, slot);
  ASSERT_FALSE(keys.empty()) << "the set is at the source";
  EXPECT_EQ(t.migrate_keys(slot, from, to, keys), "OK");
  fw_decision second = admit_held(c, tenant);
  EXPECT_TRUE(by_store(second)) << "migrating, set moved (ASK): " << fw_fail_reason_name(second.fail_reason);
  EXPECT_TRUE(second.allowed);
  fw_decision third = admit_held(c, tenant);
  EXPECT_TRUE(by_store(third)) << "migrating, set moved (ASK): " << fw_fail_reason_name(third.fail_reason);
  EXPECT_FALSE(third.allowed) << "two held in the moved set: the limit";
  EXPECT_EQ(third.limiter, FW_LIMITER_CONCURRENCY);
  fw_release(c, third.ticket);
  fw_release(c, second.ticket);  // through ASK

  t.finish_migration(slot, to);
  for (int i = 0; i < 100 && t.command(to, {"ZCARD", conc}) != "1"; i++)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(t.command(to, {"ZCARD", conc}), "1") << "the slot held from before, in the moved set; the other released";
  fw_release(c, held.ticket);  // through MOVED
  for (int i = 0; i < 100 && t.command(to, {"ZCARD", conc}) != "0"; i++)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(t.command(to, {"ZCARD", conc}), "0") << "every slot given back on the new owner";
  fw_decision after = admit(c, tenant);
  EXPECT_TRUE(by_store(after));
  EXPECT_EQ(after.concurrency_remaining, 1);
  json m = floodwall::testing::metrics_json(c);
  EXPECT_EQ(m["sources"]["fallback"].get<int64_t>(), 0) << m["sources"].dump();
  fw_client_free(c);
}

// A preforking server: a client made before fork() decides in the child on the parent's buckets, on two
// masters; the parent's client is untouched and sees what the child spent.
TEST_F(Cluster, AForkedChildDecidesOnTheParentsBuckets) {
  ClusterTopology &t = *topo_;
  fw_client *c = client(policy(t.url(), R"("request_rate": {"rate": 0.001, "burst": 10})"));
  ASSERT_NE(c, nullptr);
  auto on = tenants_on_masters(t, "forked", 1);
  ASSERT_EQ(on.size(), 3u);
  std::vector<std::string> tenants = {on.begin()->second[0], on.rbegin()->second[0]};
  for (const auto &tenant : tenants) {
    for (int i = 0; i < 4; i++) ASSERT_TRUE(by_store(admit(c, tenant))) << tenant;
  }
  pid_t pid = fork();
  if (pid == 0) {
    for (size_t k = 0; k < tenants.size(); k++) {
      int ok = 0;
      for (int i = 0; i < 8; i++) {
        fw_decision d = admit(c, tenants[k]);
        if (!by_store(d)) _exit(static_cast<int>(10 + k));
        ok += d.allowed;
      }
      if (ok != 6) _exit(static_cast<int>(20 + k));
    }
    fw_client_free(c);
    _exit(0);
  }
  int status = wait_child(pid, 10);
  // 10 + k: a decision of tenant k not by the store; 20 + k: not exactly the 6 tokens left allowed.
  EXPECT_TRUE(exited_ok(status)) << "the child: " << child_text(status);
  for (const auto &tenant : tenants) {
    fw_decision d = admit(c, tenant);
    EXPECT_TRUE(by_store(d)) << "the parent's client is untouched";
    EXPECT_FALSE(d.allowed) << tenant << ": the child spent the rest of the bucket";
  }
  fw_client_free(c);
}

TEST(ClusterSetup, ADatabaseNumberIsAPolicyErrorNamingTheStore) {
  for (const char *url :
       {"redis+cluster://127.0.0.1:7000/1", "rediss+cluster://u:pw@127.0.0.1:7000,127.0.0.1:7001/2"}) {
    fw_client *c = nullptr;
    std::string pol = std::string(R"({"store": ")") + url + R"(", "request_rate": {"rate": 1, "burst": 1}})";
    EXPECT_NE(fw_client_new(&c, pol.c_str()), FW_OK) << url;
    if (c) fw_client_free(c);
    std::string message = fw_error_last() ? fw_error_last()->message : "";
    EXPECT_NE(message.find("store"), std::string::npos) << url << ": " << message;
    EXPECT_EQ(message.find("pw@"), std::string::npos) << "never the password: " << message;
  }
}

// No seed answers: the client is made within the connect time-out, the fallback decides (its own burst,
// an outage not config), it is said once on stderr while the seeds are asked again in the background.
TEST(ClusterSetup, NoSeedReachableIsSaidOnceAndTheFallbackDecides) {
  CaptureStderr err;
  std::string url =
      "redis+cluster://127.0.0.1:" + std::to_string(free_port()) + ",127.0.0.1:" + std::to_string(free_port());
  auto t0 = Clock::now();
  fw_client *c = client(policy(url, R"("request_rate": {"rate": 0.001, "burst": 5})"));
  ASSERT_NE(c, nullptr);
  double made_s = seconds_since(t0);
  EXPECT_LT(made_s, 2.0) << "the client is made within the connect time-out (200 ms) and slack";
  int allowed = 0;
  for (int i = 0; i < 20; i++) {
    fw_decision d = admit(c, "nobody");
    EXPECT_TRUE(d.degraded);
    EXPECT_FALSE(d.failed_open);
    EXPECT_TRUE(d.fail_reason == FW_FAIL_CONNECTION || d.fail_reason == FW_FAIL_BREAKER)
        << "unreachable is an outage, not " << fw_fail_reason_name(d.fail_reason);
    allowed += d.allowed;
  }
  EXPECT_EQ(allowed, 5) << "the fallback's own limit: its table starts full, burst 5";
  std::this_thread::sleep_for(std::chrono::milliseconds(600));  // asked again in the background meanwhile
  EXPECT_FALSE(admit(c, "nobody").allowed);
  fw_client_free(c);
  std::string text = err.text();
  std::printf("no seed reachable: client made in %.3f s; stderr: %s", made_s, text.c_str());
  EXPECT_EQ(count(text, "floodwall: "), 1u) << text;
}

// A seed that is a plain redis-server (cluster support disabled): the deployment's mistake, config, said
// once; nothing is written there.
TEST(ClusterSetup, APlainRedisSeedIsAConfigErrorSaidOnce) {
  RedisServer plain;
  CaptureStderr err;
  fw_client *c = client(policy("redis+cluster://127.0.0.1:" + std::to_string(plain.port())));
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(reason_within(c, "warm-up", FW_FAIL_CONFIG, 5)) << "once the seed was asked";
  int config = 0;
  for (int i = 0; i < 20; i++) {
    fw_decision d = admit(c, "plain");
    EXPECT_TRUE(d.degraded) << "the fallback decides";
    EXPECT_FALSE(d.failed_open);
    config += d.fail_reason == FW_FAIL_CONFIG;
  }
  EXPECT_EQ(config, 20) << "no cluster there is the deployment's, not an outage";
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  fw_client_free(c);
  std::string text = err.text();
  std::printf("a plain seed: stderr: %s", text.c_str());
  EXPECT_EQ(count(text, "floodwall: "), 1u) << text;
  EXPECT_EQ(plain.command({"DBSIZE"}), "0") << "nothing was written on a server that is no cluster";
}

// Issue #60: the only seed answers CLUSTER SHARDS with the shard of one master listed without its slots
// (beside a failed old master), as every node of a Redis 7.2-7.4 cluster does after a second failover, and
// CLUSTER SLOTS rightly. The map is completed from CLUSTER SLOTS: every tenant, that master's too, is
// decided by Redis from the first, and nothing is said.
TEST_F(Cluster, AShardListedWithoutItsSlotsIsCompletedFromClusterSlots) {
  ClusterTopology &t = *topo_;
  auto ranges = t.slot_ranges();
  auto on = tenants_on_masters(t, "noslots", 2);
  ASSERT_EQ(on.size(), 3u);
  FakeClusterNode fake;
  fake.answer("CLUSTER SHARDS", fake_shards(ranges, on.rbegin()->first));
  fake.answer("CLUSTER SLOTS", fake_slots(ranges));
  CaptureStderr err;
  fw_client *c =
      client(policy("redis+cluster://" + fake.endpoint(), R"("request_rate": {"rate": 0.001, "burst": 1000})"));
  ASSERT_NE(c, nullptr);
  every_tenant_by_its_master(c, t, on);
  EXPECT_GE(fake.asked("CLUSTER SHARDS"), 1);
  EXPECT_GE(fake.asked("CLUSTER SLOTS"), 1) << "asked because SHARDS left slots unowned";
  json m = floodwall::testing::metrics_json(c);
  EXPECT_EQ(m["store_failures"]["request_rate"]["cluster"].get<int64_t>(), 0) << m["store_failures"].dump();
  fw_client_free(c);
  std::string text = err.text();
  EXPECT_EQ(count(text, "floodwall: "), 0u) << text;
}

// The only seed's CLUSTER SHARDS contradicts itself (two online masters in one shard: whose are its
// slots?): said once (the node, the command, the reply's first bytes), and CLUSTER SLOTS serves.
TEST_F(Cluster, AContradictoryShardsReplyIsSaidOnceAndClusterSlotsServes) {
  using namespace floodwall::testing::resp;
  ClusterTopology &t = *topo_;
  auto ranges = t.slot_ranges();
  auto on = tenants_on_masters(t, "twomasters", 1);
  ASSERT_EQ(on.size(), 3u);
  std::vector<std::string> both;
  for (const auto &[master, tenants] : on)
    both.push_back(fake_shards_node(t.node_id(master), master, "master", "online"));
  FakeClusterNode fake;
  fake.answer("CLUSTER SHARDS", arr({arr({bulk("slots"), arr({num(0), num(16383)}), bulk("nodes"), arr(both)})}));
  fake.answer("CLUSTER SLOTS", fake_slots(ranges));
  CaptureStderr err;
  fw_client *c =
      client(policy("redis+cluster://" + fake.endpoint(), R"("request_rate": {"rate": 0.001, "burst": 1000})"));
  ASSERT_NE(c, nullptr);
  every_tenant_by_its_master(c, t, on);
  fw_client_free(c);
  std::string text = err.text();
  std::printf("a contradictory CLUSTER SHARDS: stderr: %s", text.c_str());
  EXPECT_EQ(count(text, "floodwall: "), 1u) << text;
  EXPECT_EQ(count(text, fake.endpoint() + " sent a CLUSTER SHARDS reply"), 1u) << text;
  EXPECT_EQ(count(text, "*1??*4??$5??slots??*2??:0??:16383??$5??nodes??*3??"), 1u) << "its first bytes, printable";
}

// The only seed's CLUSTER SHARDS and CLUSTER SLOTS both leave one master's slots out: the nodes its view
// names are asked too, and their views complete the map.
TEST_F(Cluster, AViewLeavingSlotsUnownedIsCompletedFromTheOtherNodes) {
  ClusterTopology &t = *topo_;
  auto ranges = t.slot_ranges();
  auto on = tenants_on_masters(t, "othernodes", 2);
  ASSERT_EQ(on.size(), 3u);
  int missing = on.begin()->first;
  FakeClusterNode fake;
  fake.answer("CLUSTER SHARDS", fake_shards(ranges, missing));
  fake.answer("CLUSTER SLOTS", fake_slots(ranges, missing));
  CaptureStderr err;
  fw_client *c =
      client(policy("redis+cluster://" + fake.endpoint(), R"("request_rate": {"rate": 0.001, "burst": 1000})"));
  ASSERT_NE(c, nullptr);
  every_tenant_by_its_master(c, t, on);
  EXPECT_GE(fake.asked("CLUSTER SLOTS"), 1);
  fw_client_free(c);
  std::string text = err.text();
  EXPECT_EQ(count(text, "floodwall: "), 0u) << text;
}

// A real CLUSTERDOWN of part of the slots: one node (cluster-require-full-coverage no) that assigns itself
// half of them. Its tenants are decided by Redis; the others' by the fallback, reason cluster, counted as
// the store's cluster failures; said once, naming the node asked and how many slots.
TEST(ClusterDown, SlotsNoNodeAssignsAreTheFallbacksReasonClusterSaidOnce) {
  ClusterRedis node({"--cluster-require-full-coverage", "no"});
  ASSERT_EQ(node.command({"CLUSTER", "ADDSLOTSRANGE", "0", "8191"}), "OK");
  ASSERT_TRUE(node.wait_until("cluster_state:ok", [&] {
    return node.command({"CLUSTER", "INFO"}).find("cluster_state:ok") != std::string::npos;
  }));
  std::string served = tenant_in_slot("half", 100), unserved = tenant_in_slot("half", 9000);
  CaptureStderr err;
  fw_client *c = client(policy("redis+cluster://127.0.0.1:" + std::to_string(node.port()),
                               R"("request_rate": {"rate": 0.001, "burst": 5})"));
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(answered_within(c, served, 5));
  int allowed = 0, cluster = 0;
  for (int i = 0; i < 20; i++) {
    EXPECT_TRUE(by_store(admit(c, served)));
    fw_decision d = admit(c, unserved);
    EXPECT_TRUE(d.degraded) << "the fallback decides";
    EXPECT_FALSE(d.failed_open);
    cluster += d.fail_reason == FW_FAIL_CLUSTER;
    allowed += d.allowed;
  }
  EXPECT_EQ(cluster, 20) << "a slot no node assigns is the cluster's, not an outage";
  EXPECT_EQ(allowed, 5) << "the fallback's own limit";
  json m = floodwall::testing::metrics_json(c);
  EXPECT_GE(m["store_failures"]["request_rate"]["cluster"].get<int64_t>(), 20) << m["store_failures"].dump();
  fw_client_free(c);
  std::string text = err.text();
  std::printf("slots no node assigns: stderr: %s", text.c_str());
  EXPECT_EQ(count(text, "floodwall: "), 1u) << text;
  EXPECT_EQ(count(text, "8192 of the 16384 slots"), 1u) << text;
  EXPECT_EQ(count(text, "127.0.0.1:" + std::to_string(node.port())), 1u) << text;
}

// An ACL user on every node, and a password on the default user so that nothing passes without AUTH.
class ClusterAcl : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ClusterTopology::Options options;
    options.password = "default-secret";
    options.acl_user = "fwuser";
    options.acl_password = "fw-secret";
    topo_ = new ClusterTopology(options);
  }
  static void TearDownTestSuite() {
    delete topo_;
    topo_ = nullptr;
  }
  static ClusterTopology *topo_;
};
ClusterTopology *ClusterAcl::topo_ = nullptr;

TEST_F(ClusterAcl, TheUsersPasswordIsAnsweredOnEveryMaster) {
  ClusterTopology &t = *topo_;
  fw_client *c =
      client(policy(t.url("redis+cluster://fwuser:fw-secret@"), R"("request_rate": {"rate": 0.001, "burst": 100})"));
  ASSERT_NE(c, nullptr);
  for (const auto &[master, tenants] : tenants_on_masters(t, "acl", 1)) {
    EXPECT_TRUE(answered_within(c, tenants[0], 5)) << tenants[0] << " of " << master;
    EXPECT_EQ(t.command(master, {"EXISTS", rate_key(tenants[0])}), "1") << tenants[0] << " on its master";
  }
  fw_client_free(c);
}

TEST_F(ClusterAcl, AWrongPasswordIsConfigSaidOnceNeverShown) {
  ClusterTopology &t = *topo_;
  CaptureStderr err;
  fw_client *c =
      client(policy(t.url("redis+cluster://fwuser:not-the-secret@"), R"("request_rate": {"rate": 0.001, "burst": 5})"));
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(reason_within(c, "warm-up", FW_FAIL_CONFIG, 5)) << "once the nodes were asked";
  auto on = tenants_on_masters(t, "refused", 1);
  for (const auto &[master, tenants] : on) {
    int config = 0, allowed = 0;
    for (int i = 0; i < 10; i++) {
      fw_decision d = admit(c, tenants[0]);
      EXPECT_TRUE(d.degraded) << "the fallback decides";
      EXPECT_FALSE(d.failed_open);
      config += d.fail_reason == FW_FAIL_CONFIG;
      allowed += d.allowed;
    }
    EXPECT_EQ(config, 10) << tenants[0] << " of " << master << ": a refused password is the deployment's";
    EXPECT_EQ(allowed, 5) << "limited by the fallback, never answered as someone else";
    EXPECT_EQ(t.command(master, {"EXISTS", rate_key(tenants[0])}), "0") << "nothing written";
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::string metrics_text = floodwall::testing::metrics_json(c).dump();
  fw_client_free(c);
  std::string text = err.text();
  std::printf("a wrong password: stderr: %s", text.c_str());
  EXPECT_EQ(count(text, "floodwall: "), 1u) << text;
  EXPECT_EQ(text.find("not-the-secret"), std::string::npos) << "never the password";
  EXPECT_EQ(metrics_text.find("not-the-secret"), std::string::npos) << "never the password";
}

// No replicas: a killed master leaves its slots unserved, and once the others mark it failed every node
// answers CLUSTERDOWN. The other masters' tenants are then decided by the fallback with reason cluster
// (within its own limits, never failed open); the dead master's own are the fallback's too. Restarted from
// its nodes.conf, the master serves its slots again and the store answers every tenant within seconds.
TEST(ClusterDown, AMasterWithoutAReplicaDownIsClusterDownForTheOthersTenants) {
  ClusterTopology::Options options;
  options.replicas = 0;
  ClusterTopology t(options);
  auto on = tenants_on_masters(t, "down", 3);  // per master: [0] warm-up, [1] counted, [2] after the restart
  ASSERT_EQ(on.size(), 3u);
  int dead = on.begin()->first;
  fw_client *c = client(policy(t.url(), R"("request_rate": {"rate": 0.001, "burst": 5})"));
  ASSERT_NE(c, nullptr);
  for (const auto &[master, tenants] : on) ASSERT_TRUE(answered_within(c, tenants[0], 5)) << master;

  auto killed = Clock::now();
  t.kill_node(dead);
  ASSERT_TRUE(wait_cluster_state(t, "fail", 15)) << t.cluster_view();
  double down_s = seconds_since(killed);
  std::map<std::string, int> dead_reasons;
  for (const auto &[master, tenants] : on) {
    if (master != dead) {
      EXPECT_TRUE(reason_within(c, tenants[0], FW_FAIL_CLUSTER, 5)) << "a tenant of " << master;
    }
    int allowed = 0, cluster = 0;
    for (int i = 0; i < 20; i++) {
      fw_decision d = admit(c, tenants[1]);
      EXPECT_TRUE(d.degraded) << tenants[1] << " of " << master << ": the fallback decides";
      EXPECT_FALSE(d.failed_open);
      EXPECT_NE(d.fail_reason, FW_FAIL_NONE);
      cluster += d.fail_reason == FW_FAIL_CLUSTER;
      allowed += d.allowed;
      if (master == dead) dead_reasons[fw_fail_reason_name(d.fail_reason)]++;
    }
    EXPECT_EQ(allowed, 5) << tenants[1] << " of " << master << ": the fallback's own limit (its table starts full)";
    if (master != dead) {
      EXPECT_EQ(cluster, 20) << tenants[1] << " of " << master << ": CLUSTERDOWN is said as cluster";
    }
  }
  json m = floodwall::testing::metrics_json(c);
  EXPECT_GT(m["store_failures"]["request_rate"]["cluster"].get<int64_t>(), 0) << m["store_failures"].dump();
  EXPECT_EQ(m["sources"]["failed_open"].get<int64_t>(), 0) << m["sources"].dump();

  auto restarted = Clock::now();
  t.restart(dead);
  double settled_s = seconds_since(restarted);
  auto resume_by = Clock::now() + std::chrono::seconds(15);
  for (const auto &[master, tenants] : on)
    EXPECT_TRUE(answered_within(c, tenants[2], left_until(resume_by))) << tenants[2] << " of " << master;
  double resumed_s = seconds_since(restarted);
  std::string reasons;
  for (const auto &[name, n] : dead_reasons) reasons += " " + name + "=" + std::to_string(n);
  std::printf(
      "CLUSTERDOWN: every node said cluster_state:fail %.2f s after the kill; the dead master's tenant:%s; restarted, "
      "settled in %.2f s, every tenant answered by the store %.2f s after the restart\n",
      down_s, reasons.c_str(), settled_s, resumed_s);
  RecordProperty("clusterdown_after_kill_s", std::to_string(down_s));
  RecordProperty("store_again_after_restart_s", std::to_string(resumed_s));
  fw_client_free(c);
}

// A SIGKILLed master while four threads admit 20 tenants spread over the three masters: its tenants are
// decided by the fallback (never failed open, within the fallback's own limits) until its replica is
// promoted, then every tenant is answered by the store again within seconds.
TEST(ClusterFailover, AKilledMasterIsFollowedToItsReplicaNeverFailingOpen) {
  ClusterTopology t;
  const double rate = 20;
  const int burst = 10;
  auto on = tenants_on_masters(t, "failover", 7);
  ASSERT_EQ(on.size(), 3u);
  int old_master = on.begin()->first;
  std::vector<std::string> tenants;
  std::vector<bool> victim;
  for (const auto &[master, ts] : on) {
    for (const auto &tenant : ts) {
      if (tenants.size() < 20) {
        tenants.push_back(tenant);
        victim.push_back(master == old_master);
      }
    }
  }
  fw_client *c = client(policy(t.url(), R"("request_rate": {"rate": 20, "burst": 10})"));
  ASSERT_NE(c, nullptr);
  for (const auto &tenant : tenants) ASSERT_TRUE(answered_within(c, tenant, 5)) << tenant;

  struct Tally {
    std::atomic<int64_t> total{0}, store{0}, fallback{0}, failed_open{0}, fallback_allowed{0}, unexplained{0};
    std::array<std::atomic<int64_t>, 16> reasons{};
  };
  std::vector<Tally> tally(tenants.size());
  std::atomic<bool> stop{false};
  auto started = Clock::now();
  std::vector<std::thread> threads;
  StopAndJoin joiner{stop, threads};
  for (size_t k = 0; k < 4; k++)
    threads.emplace_back([&, k] {
      for (size_t i = k * 5; !stop; i++) {
        size_t j = i % tenants.size();
        fw_decision d = admit(c, tenants[j]);
        Tally &n = tally[j];
        n.total++;
        n.failed_open += d.failed_open;
        n.reasons[static_cast<size_t>(d.fail_reason) % 16]++;
        if (by_store(d)) {
          n.store++;
        } else if (d.degraded && d.fail_reason != FW_FAIL_NONE) {
          n.fallback++;
          n.fallback_allowed += d.allowed;
        } else {
          n.unexplained++;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  uint16_t slot = floodwall::key_slot(rate_key(tenants[0]));
  auto killed = Clock::now();
  ASSERT_EQ(t.kill_master_of_slot(slot), old_master);
  int new_master = t.wait_failover(slot, old_master, 20);
  double failover_s = seconds_since(killed);
  bool every = true;
  auto resume_by = Clock::now() + std::chrono::seconds(15);
  for (const auto &tenant : tenants) {
    bool answered = answered_within(c, tenant, left_until(resume_by));
    every = every && answered;
    EXPECT_TRUE(answered) << tenant << ": store answers again once the replica is promoted";
  }
  double resumed_s = seconds_since(killed);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  stop = true;
  for (auto &th : threads) th.join();
  double run_s = seconds_since(started);
  ASSERT_GT(new_master, 0);

  int64_t totals[2] = {0, 0}, fallbacks[2] = {0, 0}, failed_open = 0, unexplained = 0;
  std::array<int64_t, 16> reasons[2] = {};
  const double fallback_bound = burst + rate * run_s;
  for (size_t j = 0; j < tenants.size(); j++) {
    const Tally &n = tally[j];
    int v = victim[j] ? 1 : 0;
    totals[v] += n.total;
    fallbacks[v] += n.fallback;
    failed_open += n.failed_open;
    unexplained += n.unexplained;
    for (size_t r = 0; r < 16; r++) reasons[v][r] += n.reasons[r];
    EXPECT_LE(n.fallback_allowed.load(), static_cast<int64_t>(fallback_bound))
        << tenants[j] << ": the fallback within its own limits (burst + rate x " << run_s << " s)";
  }
  auto reason_text = [](const std::array<int64_t, 16> &r) {
    std::string out;
    for (size_t i = 1; i < 16; i++) {
      if (r[i])
        out += std::string(" ") + fw_fail_reason_name(static_cast<fw_fail_reason>(i)) + "=" + std::to_string(r[i]);
    }
    return out.empty() ? std::string(" none") : out;
  };
  std::printf(
      "SIGKILL of master %d: replica %d promoted %.2f s later, every tenant answered by the store %.2f s after the "
      "kill; its tenants: %lld decisions, %lld (%.0f%%) by the fallback (reasons:%s); the others': %lld decisions, "
      "%lld (%.0f%%) by the fallback (reasons:%s); %lld failed open\n",
      old_master, new_master, failover_s, resumed_s, static_cast<long long>(totals[1]),
      static_cast<long long>(fallbacks[1]), totals[1] ? 100.0 * fallbacks[1] / totals[1] : 0.0,
      reason_text(reasons[1]).c_str(), static_cast<long long>(totals[0]), static_cast<long long>(fallbacks[0]),
      totals[0] ? 100.0 * fallbacks[0] / totals[0] : 0.0, reason_text(reasons[0]).c_str(),
      static_cast<long long>(failed_open));
  RecordProperty("failover_s", std::to_string(failover_s));
  RecordProperty("store_again_after_kill_s", std::to_string(resumed_s));
  RecordProperty("victim_fallback_share",
                 std::to_string(totals[1] ? static_cast<double>(fallbacks[1]) / static_cast<double>(totals[1]) : 0));
  EXPECT_TRUE(every);
  EXPECT_EQ(failed_open, 0);
  EXPECT_EQ(unexplained, 0) << "every decision the store's or the fallback's with a reason";
  EXPECT_GT(fallbacks[1], 0) << "the outage of the killed master's tenants was decided by the fallback";
  json m = floodwall::testing::metrics_json(c);
  EXPECT_EQ(m["sources"]["failed_open"].get<int64_t>(), 0) << m["sources"].dump();
  // A tenant of the killed master now lands on the promoted replica.
  fw_decision d = admit(c, tenants[0]);
  EXPECT_TRUE(by_store(d));
  EXPECT_EQ(t.command(new_master, {"EXISTS", rate_key(tenants[0])}), "1") << "the bucket is on the new master";
  fw_client_free(c);
}

// Issue #60's sequence on the harness' redis-server: a master killed and its replica promoted, the old
// master restarted (a replica now), then another master killed. After each failover every tenant is
// answered by the store again within the deadline, by the client that lived through it and by one made
// afterwards.
TEST(ClusterFailover, TwoFailoversInARowAreEachFollowed) {
  ClusterTopology t;
  auto on = tenants_on_masters(t, "twice", 3);
  ASSERT_EQ(on.size(), 3u);
  std::vector<std::string> tenants;
  for (const auto &[master, ts] : on) tenants.insert(tenants.end(), ts.begin(), ts.end());
  fw_client *c = client(policy(t.url(), R"("request_rate": {"rate": 1000, "burst": 1000})"));
  ASSERT_NE(c, nullptr);
  for (const auto &tenant : tenants) ASSERT_TRUE(answered_within(c, tenant, 5)) << tenant;
  std::vector<int> victims = {on.begin()->first, std::next(on.begin())->first};
  for (size_t round = 0; round < victims.size(); round++) {
    SCOPED_TRACE("failover " + std::to_string(round + 1));
    uint16_t slot = floodwall::key_slot(rate_key(on[victims[round]][0]));
    auto killed = Clock::now();
    ASSERT_EQ(t.kill_master_of_slot(slot), victims[round]);
    int promoted = t.wait_failover(slot, victims[round], 20);
    ASSERT_GT(promoted, 0);
    auto resume_by = Clock::now() + std::chrono::seconds(15);
    for (const auto &tenant : tenants)
      EXPECT_TRUE(answered_within(c, tenant, left_until(resume_by))) << tenant << ": by the store again";
    double resumed_s = seconds_since(killed);
    fw_client *fresh = client(policy(t.url(), R"("request_rate": {"rate": 1000, "burst": 1000})"));
    ASSERT_NE(fresh, nullptr);
    for (const auto &tenant : tenants)
      EXPECT_TRUE(answered_within(fresh, tenant, 5)) << tenant << ": by the store for a client made afterwards";
    fw_client_free(fresh);
    EXPECT_EQ(t.command(promoted, {"EXISTS", rate_key(on[victims[round]][0])}), "1") << "on the promoted master";
    std::printf("failover %zu: master %d killed, %d promoted; every tenant by the store %.2f s after the kill\n",
                round + 1, victims[round], promoted, resumed_s);
    RecordProperty("store_again_after_kill_" + std::to_string(round + 1) + "_s", std::to_string(resumed_s));
    t.restart(victims[round]);  // back as a replica of the promoted master
  }
  json m = floodwall::testing::metrics_json(c);
  EXPECT_EQ(m["sources"]["failed_open"].get<int64_t>(), 0) << m["sources"].dump();
  fw_client_free(c);
}

// Every node speaking only TLS (cluster_redis.hpp with tls: --port 0, --tls-port, --tls-cluster yes; the
// certificates of TlsCerts::shared(), the server's with IP:127.0.0.1), 3 masters and no replicas.
class ClusterTls : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ClusterTopology::Options options;
    options.replicas = 0;
    options.tls = &TlsCerts::shared();
    topo_ = new ClusterTopology(options);
  }
  static void TearDownTestSuite() {
    delete topo_;
    topo_ = nullptr;
  }
  static ClusterTopology *topo_;
};
ClusterTopology *ClusterTls::topo_ = nullptr;

namespace {
// The redis section's TLS settings, after deadline_ms (see policy()).
std::string tls_section(const std::string &ca_file, const std::string &more = "") {
  return R"(, "tls": {"ca_file": ")" + ca_file + "\"" + more + "}";
}
}  // namespace

// rediss+cluster:// from one seed with the test CA: the map read over TLS names the masters' TLS ports,
// and each master, verified by its own address (127.0.0.1, an IP SAN), decides its tenants (fail_reason
// none) with their buckets on it and nowhere else; a slot moved to another master is followed through
// MOVED. Nothing listens in plain text, so every answer came over TLS.
TEST_F(ClusterTls, EveryMasterDecidesItsTenantsOverTlsFromOneSeed) {
  ClusterTopology &t = *topo_;
  const TlsCerts &certs = TlsCerts::shared();
  for (int p : t.ports()) {
    EXPECT_NE(floodwall::testing::command_at(p, {"PING"}), "PONG") << p << " answers in plain text";
    EXPECT_EQ(t.command(p, {"PING"}), "PONG") << p << " over TLS";
  }
  std::string url = t.url("", {t.ports()[0]});
  ASSERT_EQ(url, "rediss+cluster://127.0.0.1:" + std::to_string(t.ports()[0]));
  fw_client *c = client(policy(url, R"("request_rate": {"rate": 0.001, "burst": 5})", 500, tls_section(certs.ca())));
  ASSERT_NE(c, nullptr);
  auto on = tenants_on_masters(t, "tls", 2);
  ASSERT_EQ(on.size(), 3u);
  std::map<std::string, int> reasons;
  for (const auto &[master, tenants] : on) {
    for (const auto &tenant : tenants) {
      ASSERT_TRUE(answered_within(c, tenant, 5)) << tenant << " of " << master;
      int store = 0, allowed = 0;
      for (int i = 0; i < 10; i++) {
        fw_decision d = admit(c, tenant);
        store += by_store(d);
        allowed += d.allowed;
        reasons[fw_fail_reason_name(d.fail_reason)]++;
      }
      EXPECT_EQ(store, 10) << tenant << ": every decision by its master";
      EXPECT_EQ(allowed, 4) << tenant << ": the bucket of 5 in Redis, one token spent by the first answer";
      EXPECT_EQ(t.command(master, {"EXISTS", rate_key(tenant)}), "1") << tenant << " on its master " << master;
      for (int other : t.master_ports()) {
        if (other != master) {
          EXPECT_EQ(t.command(other, {"GET", rate_key(tenant)}).rfind("MOVED ", 0), 0u) << "not on " << other;
        }
      }
    }
  }
  // A slot moved to another master: MOVED names its TLS port, and the store follows it there (the bucket,
  // spent, moved with it).
  const std::string moved = on.begin()->second[0];
  uint16_t slot = floodwall::key_slot(rate_key(moved));
  int from = on.begin()->first, to = on.rbegin()->first;
  t.begin_migration(slot, from, to);
  EXPECT_EQ(t.migrate_keys(slot, from, to, keys_in_slot(t, from, slot)), "OK");
  t.finish_migration(slot, to);
  EXPECT_EQ(t.command(from, {"GET", rate_key(moved)}),
            "MOVED " + std::to_string(slot) + " 127.0.0.1:" + std::to_string(to));
  for (int i = 0; i < 3; i++) {
    fw_decision d = admit(c, moved);
    reasons[fw_fail_reason_name(d.fail_reason)]++;
    EXPECT_TRUE(by_store(d)) << moved << " after its slot moved to " << to;
    EXPECT_FALSE(d.allowed) << "the bucket moved with its slot, spent";
    EXPECT_EQ(d.limiter, FW_LIMITER_REQUEST_RATE);
  }
  EXPECT_EQ(t.command(to, {"EXISTS", rate_key(moved)}), "1") << "on the new master";
  json m = floodwall::testing::metrics_json(c);
  std::string said;
  for (const auto &[name, n] : reasons) said += " " + name + "=" + std::to_string(n);
  std::printf("TLS cluster, seed %s: fail reasons after the first answers:%s; sources %s\n", url.c_str(), said.c_str(),
              m["sources"].dump().c_str());
  EXPECT_EQ(reasons.size(), 1u) << said;
  EXPECT_EQ(reasons.count("none"), 1u) << said;
  fw_client_free(c);
}

// A CA that did not sign the nodes (another throwaway CA), or a server name the certificates do not carry:
// no map can be read, every decision is the fallback's (its own burst, never failed open) with fail_reason
// config, said once on stderr while the seeds are asked again in the background, and nothing reaches a
// master.
TEST_F(ClusterTls, AnotherCaOrNameIsConfigSaidOnceAndNothingIsWritten) {
  ClusterTopology &t = *topo_;
  const TlsCerts &certs = TlsCerts::shared();
  struct Case {
    const char *what;
    std::string tls;
    const char *reason;  // in what is said
  };
  const Case cases[] = {
      {"another CA", tls_section(certs.rogue_ca()), "certificate"},
      {"the CA, another name", tls_section(certs.ca(), R"(, "server_name": "other.example")"), "hostname mismatch"},
  };
  int n = 0;
  for (const auto &[what, tls, reason] : cases) {
    const std::string stem = "wrong-tls-" + std::to_string(n++);
    CaptureStderr err;
    fw_client *c =
        client(policy(t.url("", {t.ports()[1]}), R"("request_rate": {"rate": 0.001, "burst": 5})", 500, tls));
    ASSERT_NE(c, nullptr) << tls;
    ASSERT_TRUE(reason_within(c, stem + "-warm-up", FW_FAIL_CONFIG, 5)) << tls;
    auto on = tenants_on_masters(t, stem, 1);
    ASSERT_EQ(on.size(), 3u);
    for (const auto &[master, tenants] : on) {
      int config = 0, allowed = 0, failed_open = 0;
      for (int i = 0; i < 10; i++) {
        fw_decision d = admit(c, tenants[0]);
        EXPECT_TRUE(d.degraded) << tls << ": the fallback decides";
        failed_open += d.failed_open;
        config += d.fail_reason == FW_FAIL_CONFIG;
        allowed += d.allowed;
      }
      EXPECT_EQ(config, 10) << tls << ": " << tenants[0] << " of " << master;
      EXPECT_EQ(failed_open, 0);
      EXPECT_EQ(allowed, 5) << "limited by the fallback's own table";
      EXPECT_EQ(t.command(master, {"EXISTS", rate_key(tenants[0])}), "0") << "nothing written on " << master;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(600));  // asked again in the background meanwhile
    EXPECT_EQ(admit(c, stem + "-warm-up").fail_reason, FW_FAIL_CONFIG);
    json m = floodwall::testing::metrics_json(c);
    fw_client_free(c);
    std::string text = err.text();
    std::printf("TLS cluster, %s: sources %s; stderr: %s", what, m["sources"].dump().c_str(), text.c_str());
    EXPECT_EQ(count(text, "floodwall: "), 1u) << text;
    EXPECT_NE(text.find("TLS verification failed"), std::string::npos) << text;
    EXPECT_NE(text.find(reason), std::string::npos) << text;
    EXPECT_EQ(m["sources"]["store"].get<int64_t>(), 0) << m["sources"].dump();
    EXPECT_EQ(m["sources"]["failed_open"].get<int64_t>(), 0) << m["sources"].dump();
  }
  for (int i = 0; i < n; i++) {
    std::string key = rate_key("wrong-tls-" + std::to_string(i) + "-warm-up");
    EXPECT_EQ(t.command_on_key(key, {"EXISTS", key}), "0") << key;
  }
}
