// The Sentinel harness itself (sentinel_redis.hpp), checked with plain commands to the nodes: the topology
// comes up with sentinel 0 naming the master and a write reaching the replica; SENTINEL FAILOVER promotes
// the replica and the sentinels turn the old master into its replica; a SIGKILLed master is failed over by
// the sentinels' own agreement and comes back as a replica; passwords reach every node and a failover
// goes through with them; with TLS, every port the sentinels name is a TLS port and a failover goes through.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "sentinel_redis.hpp"

namespace floodwall::testing {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The data node of the two that is not `port`.
int other_node(const SentinelTopology &t, int port) {
  auto ports = t.data_ports();
  return ports[0] == port ? ports[1] : ports[0];
}

// SET key value on `master` and WAIT for one replica to have it (one connection, so WAIT counts the SET).
// WAIT returns as soon as the replica acknowledges; its 5 s are for a replica that has just restarted and
// synced under ASan beside other suites (1 s was too short once in make test: WAIT answered 0).
void set_and_wait(const SentinelTopology &t, int master, const std::string &key, const std::string &value) {
  auto replies =
      commands_at_auth(master, t.options().password, {{"SET", key, value}, {"WAIT", "1", "5000"}}, /*timeout_s=*/7.0);
  EXPECT_EQ(replies, (std::vector<std::string>{"OK", "1"}));
}

TEST(SentinelHarness, TopologyComesUpAndReplicates) {
  auto t0 = Clock::now();
  SentinelTopology t;
  RecordProperty("start_s", std::to_string(seconds_since(t0)));
  EXPECT_EQ(t.name(), "fwmaster");
  auto data = t.data_ports();
  auto sentinels = t.sentinel_ports();
  ASSERT_EQ(data.size(), 2u);
  ASSERT_EQ(sentinels.size(), 3u);
  std::set<int> all(data.begin(), data.end());
  all.insert(sentinels.begin(), sentinels.end());
  EXPECT_EQ(all.size(), 5u);
  EXPECT_EQ(t.sentinel_url(), "redis+sentinel://127.0.0.1:" + std::to_string(sentinels[0]) +
                                  ",127.0.0.1:" + std::to_string(sentinels[1]) +
                                  ",127.0.0.1:" + std::to_string(sentinels[2]) + "/fwmaster");
  EXPECT_EQ(t.sentinel_url("redis+sentinel://:pw@").rfind("redis+sentinel://:pw@127.0.0.1:", 0), 0u);

  int master = t.master_port();
  EXPECT_EQ(master, data[0]);
  EXPECT_EQ(command_at(sentinels[0], {"SENTINEL", "GET-MASTER-ADDR-BY-NAME", "fwmaster"}),
            "127.0.0.1 " + std::to_string(master));
  EXPECT_EQ(command_at(master, {"ROLE"}).rfind("master ", 0), 0u);
  EXPECT_EQ(command_at(data[1], {"ROLE"}).rfind("slave 127.0.0.1 " + std::to_string(master) + " connected", 0), 0u);
  for (int s : sentinels) {
    EXPECT_EQ(sentinel_entries(s, "", {"SENTINEL", "REPLICAS", "fwmaster"}).size(), 1u) << s;
    EXPECT_EQ(sentinel_entries(s, "", {"SENTINEL", "SENTINELS", "fwmaster"}).size(), 2u) << s;
  }

  set_and_wait(t, master, "harness:key", "a value");
  EXPECT_EQ(command_at(data[1], {"GET", "harness:key"}), "a value");
}

TEST(SentinelHarness, FailoverPromotesTheReplicaAndDemotesTheOldMaster) {
  SentinelTopology t;
  int old_master = t.master_port();
  int replica = other_node(t, old_master);

  auto t0 = Clock::now();
  t.failover();
  int new_master = t.wait_master_changed(old_master, 10.0);
  RecordProperty("failover_s", std::to_string(seconds_since(t0)));
  EXPECT_EQ(new_master, replica);
  EXPECT_EQ(t.master_port(), replica);
  for (int s : t.sentinel_ports()) {
    EXPECT_EQ(command_at(s, {"SENTINEL", "GET-MASTER-ADDR-BY-NAME", "fwmaster"}),
              "127.0.0.1 " + std::to_string(replica));
  }

  // The sentinels see the old master still saying master and reconfigure it as a replica of the new one.
  EXPECT_TRUE(t.wait_replica_of(old_master, replica, 20.0));
  RecordProperty("demoted_s", std::to_string(seconds_since(t0)));
  set_and_wait(t, replica, "harness:after", "failover");
  EXPECT_EQ(command_at(old_master, {"GET", "harness:after"}), "failover");
}

TEST(SentinelHarness, KilledMasterIsFailedOverAndRestartsAsAReplica) {
  SentinelTopology t;
  int replica = other_node(t, t.master_port());

  auto t0 = Clock::now();
  int killed = t.kill_master();
  EXPECT_TRUE(t.killed(killed));
  EXPECT_EQ(command_at(killed, {"PING"}), "<no connection>");
  int new_master = t.wait_master_changed(killed, 15.0);
  RecordProperty("failover_s", std::to_string(seconds_since(t0)));
  EXPECT_EQ(new_master, replica);

  t.restart_killed();
  EXPECT_FALSE(t.killed(killed));
  EXPECT_EQ(command_at(killed, {"ROLE"}).rfind("slave 127.0.0.1 " + std::to_string(replica) + " connected", 0), 0u);
  set_and_wait(t, replica, "harness:after", "kill");
  EXPECT_EQ(command_at(killed, {"GET", "harness:after"}), "kill");
}

TEST(SentinelHarness, PasswordsReachEveryNode) {
  SentinelTopology::Options options;  // (GCC warns of designated initializers that leave a member out)
  options.password = "data-secret";
  options.sentinel_password = "sentinel-secret";
  SentinelTopology t("fwsecure", options);
  int master = t.master_port();
  EXPECT_EQ(master, t.data_ports()[0]);
  EXPECT_EQ(t.sentinel_url(), "redis+sentinel://127.0.0.1:" + std::to_string(t.sentinel_ports()[0]) +
                                  ",127.0.0.1:" + std::to_string(t.sentinel_ports()[1]) +
                                  ",127.0.0.1:" + std::to_string(t.sentinel_ports()[2]) + "/fwsecure");

  for (int port : t.data_ports()) {
    EXPECT_EQ(command_at(port, {"PING"}).rfind("NOAUTH", 0), 0u) << port;
    EXPECT_EQ(command_at_auth(port, "data-secret", {"PING"}), "PONG") << port;
    EXPECT_EQ(command_at_auth(port, "wrong", {"PING"}).rfind("<AUTH: ", 0), 0u) << port;
    EXPECT_EQ(t.command(port, {"PING"}), "PONG") << port;
  }
  for (int port : t.sentinel_ports()) {
    EXPECT_EQ(command_at(port, {"PING"}).rfind("NOAUTH", 0), 0u) << port;
    EXPECT_EQ(t.command(port, {"PING"}), "PONG") << port;
    EXPECT_EQ(sentinel_entries(port, "sentinel-secret", {"SENTINEL", "SENTINELS", "fwsecure"}).size(), 2u) << port;
  }
  set_and_wait(t, master, "harness:key", "secret");
  EXPECT_EQ(t.command(t.data_ports()[1], {"GET", "harness:key"}), "secret");

  // The sentinels need auth-pass to promote the replica.
  t.failover();
  EXPECT_EQ(t.wait_master_changed(master, 10.0), t.data_ports()[1]);
}

// With TLS: the sentinels name TLS ports only (the master, the replica, each other), replication and the
// sentinels' links run over TLS (the replica's link is up, no sentinel is flagged disconnected or down), the
// harness' own commands reach every node on its plain port, and a failover goes through.
TEST(SentinelHarness, TlsTopologyNamesTlsPortsAndFailsOver) {
  SentinelTopology::Options options;
  options.tls = &TlsCerts::shared();
  auto t0 = Clock::now();
  SentinelTopology t("fwtls", options);
  RecordProperty("start_s", std::to_string(seconds_since(t0)));
  EXPECT_TRUE(t.tls());
  auto data = t.data_ports();
  auto sentinels = t.sentinel_ports();
  std::set<int> all(data.begin(), data.end());
  all.insert(sentinels.begin(), sentinels.end());
  for (int p : std::vector<int>(all.begin(), all.end())) all.insert(t.admin_port(p));
  EXPECT_EQ(all.size(), 10u) << "a TLS port and a plain port each";
  EXPECT_EQ(t.sentinel_url(), "rediss+sentinel://127.0.0.1:" + std::to_string(sentinels[0]) +
                                  ",127.0.0.1:" + std::to_string(sentinels[1]) +
                                  ",127.0.0.1:" + std::to_string(sentinels[2]) + "/fwtls");
  EXPECT_EQ(t.sentinel_url("rediss+sentinel://"), t.sentinel_url());
  EXPECT_EQ(t.sentinel_url("redis+sentinel://"),
            "redis+sentinel://127.0.0.1:" + std::to_string(t.admin_port(sentinels[0])) +
                ",127.0.0.1:" + std::to_string(t.admin_port(sentinels[1])) +
                ",127.0.0.1:" + std::to_string(t.admin_port(sentinels[2])) + "/fwtls");

  int master = t.master_port();
  EXPECT_EQ(master, data[0]) << "the master's TLS port";
  EXPECT_NE(command_at(master, {"PING"}), "PONG") << "the TLS port speaks no plain text";
  EXPECT_EQ(t.command(master, {"PING"}), "PONG");
  EXPECT_EQ(command_at(t.admin_port(master), {"PING"}), "PONG");
  EXPECT_EQ(t.command(data[1], {"ROLE"}).rfind("slave 127.0.0.1 " + std::to_string(master) + " connected", 0), 0u)
      << "replicating from the master's TLS port";
  for (int s : sentinels) {
    int admin = t.admin_port(s);
    auto replicas = sentinel_entries(admin, "", {"SENTINEL", "REPLICAS", "fwtls"});
    ASSERT_EQ(replicas.size(), 1u) << s;
    EXPECT_EQ(replicas[0]["port"], std::to_string(data[1])) << "the replica announces its TLS port";
    // A link between sentinels can show "disconnected" for a moment on a loaded machine: linked within 10 s.
    std::vector<std::map<std::string, std::string>> others;
    auto linked = [&] {
      others = sentinel_entries(admin, "", {"SENTINEL", "SENTINELS", "fwtls"});
      return others.size() == 2 && others[0]["flags"] == "sentinel" && others[1]["flags"] == "sentinel";
    };
    for (auto until = Clock::now() + std::chrono::seconds(10); !linked() && Clock::now() < until;)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ASSERT_EQ(others.size(), 2u) << s;
    for (auto &o : others) {
      EXPECT_TRUE(std::count(sentinels.begin(), sentinels.end(), std::stoi(o["port"]))) << "a TLS port: " << o["port"];
      EXPECT_EQ(o["flags"], "sentinel") << "linked over TLS: " << o["port"];
    }
  }
  set_and_wait(t, t.admin_port(master), "harness:key", "over tls");
  EXPECT_EQ(t.command(data[1], {"GET", "harness:key"}), "over tls");

  t0 = Clock::now();
  t.failover();
  int new_master = t.wait_master_changed(master, 10.0);
  RecordProperty("failover_s", std::to_string(seconds_since(t0)));
  EXPECT_EQ(new_master, data[1]);
  for (int s : sentinels) {
    EXPECT_EQ(t.command(s, {"SENTINEL", "GET-MASTER-ADDR-BY-NAME", "fwtls"}), "127.0.0.1 " + std::to_string(data[1]));
  }
  // The sentinels demote the old master over TLS, and it replicates from the new one over TLS. On a loaded
  // machine (the sanitizer suite beside it) a sentinel's link to the old master can stay broken for several
  // seconds after the failover (seen once in CI: "link err" 7 s): 40 s.
  EXPECT_TRUE(t.wait_replica_of(master, new_master, 40.0));
  RecordProperty("demoted_s", std::to_string(seconds_since(t0)));
}

}  // namespace
}  // namespace floodwall::testing
