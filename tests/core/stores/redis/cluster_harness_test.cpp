// The Redis Cluster harness itself (cluster_redis.hpp), checked with plain commands to the nodes: the
// cluster comes up with 3 masters covering the 16384 slots, keys of different hash tags land on different
// masters and reach their replicas; a SIGKILLed master is failed over to its replica with the keys still
// there and comes back as a replica from its nodes.conf; a slot migration in progress answers ASK at the
// source and the value at the target after ASKING (finishing is refused while the source holds keys of the
// slot), then MOVED once finished; the password and an ACL user reach every node (a restarted one too) and
// a migration goes through with MIGRATE ... AUTH; with TLS, nodes speak only TLS, the harness too.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "cluster_redis.hpp"

namespace floodwall::testing {
namespace {

using Clock = std::chrono::steady_clock;
using Replies = std::vector<std::string>;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string redirect(const std::string &kind, uint16_t slot, int port) {
  return kind + " " + std::to_string(slot) + " 127.0.0.1:" + std::to_string(port);
}

// SET key value on `master` and WAIT for one replica to have it (one connection, so WAIT counts the SET).
// WAIT returns as soon as the replica acknowledges; 5 s for one that has just synced under ASan on a busy box
// (the sentinel harness' 1 s was too short once in make test).
void set_and_wait(const ClusterTopology &t, int master, const std::string &key, const std::string &value) {
  EXPECT_EQ(t.commands(master, {{"SET", key, value}, {"WAIT", "1", "5000"}}, /*timeout_s=*/7.0), (Replies{"OK", "1"}))
      << "on " << master << " for " << key;
}

TEST(ClusterHarness, ComesUpAndSpreadsKeysOverTheMasters) {
  auto t0 = Clock::now();
  ClusterTopology t;
  RecordProperty("start_s", std::to_string(seconds_since(t0)));
  auto ports = t.ports();
  ASSERT_EQ(ports.size(), 6u);
  EXPECT_EQ(std::set<int>(ports.begin(), ports.end()).size(), 6u);
  std::string all;
  for (int p : ports) all += (all.empty() ? "" : ",") + ("127.0.0.1:" + std::to_string(p));
  EXPECT_EQ(t.url(), "redis+cluster://" + all);
  EXPECT_EQ(t.url("redis+cluster://u:pw@", {ports[1], ports[4]}),
            "redis+cluster://u:pw@127.0.0.1:" + std::to_string(ports[1]) + ",127.0.0.1:" + std::to_string(ports[4]));

  // 3 masters with the 16384 slots in 3 ranges, 3 replicas, one of each master.
  auto ranges = t.slot_ranges();
  ASSERT_EQ(ranges.size(), 3u);
  uint32_t next = 0;
  for (const auto &r : ranges) {
    EXPECT_EQ(r.start, next);
    next = r.end + 1u;
  }
  EXPECT_EQ(next, 16384u);
  auto masters = t.master_ports();
  auto replicas = t.replica_ports();
  ASSERT_EQ(masters.size(), 3u);
  ASSERT_EQ(replicas.size(), 3u);
  std::set<int> both(masters.begin(), masters.end());
  both.insert(replicas.begin(), replicas.end());
  EXPECT_EQ(both, std::set<int>(ports.begin(), ports.end()));
  EXPECT_EQ(t.master_of_slot(0), ranges[0].master);
  EXPECT_EQ(t.master_of_slot(16383), ranges[2].master);
  std::set<int> replicas_seen;
  for (int m : masters) {
    EXPECT_EQ(t.command(m, {"ROLE"}).rfind("master ", 0), 0u) << m;
    auto of = t.replicas_of(m);
    ASSERT_EQ(of.size(), 1u) << m;
    replicas_seen.insert(of[0]);
    EXPECT_EQ(t.command(of[0], {"ROLE"}).rfind("slave 127.0.0.1 " + std::to_string(m) + " connected", 0), 0u);
  }
  EXPECT_EQ(replicas_seen, std::set<int>(replicas.begin(), replicas.end()));
  for (int p : ports) {
    std::string info = t.command(p, {"CLUSTER", "INFO"});
    EXPECT_NE(info.find("cluster_state:ok"), std::string::npos) << p;
    EXPECT_NE(info.find("cluster_slots_assigned:16384"), std::string::npos) << p;
    EXPECT_NE(info.find("cluster_known_nodes:6"), std::string::npos) << p;
    EXPECT_NE(info.find("cluster_size:3"), std::string::npos) << p;
    EXPECT_EQ(t.node_id(p), t.command(p, {"CLUSTER", "MYID"}));
  }

  // A key of a different hash tag on each master.
  std::map<int, std::string> key_on;
  for (int i = 0; key_on.size() < 3 && i < 100; i++) {
    std::string key = "floodwall:{tag" + std::to_string(i) + "}:k";
    int slot = std::stoi(t.command(ports[0], {"CLUSTER", "KEYSLOT", key}));
    EXPECT_EQ(t.key_slot(key), slot);
    EXPECT_EQ(t.master_of_key(key), t.master_of_slot(static_cast<uint16_t>(slot)));
    key_on.emplace(t.master_of_slot(static_cast<uint16_t>(slot)), key);
  }
  ASSERT_EQ(key_on.size(), 3u);
  for (const auto &[master, key] : key_on) {
    uint16_t slot = t.key_slot(key);
    std::string value = "value of " + key;
    set_and_wait(t, master, key, value);
    EXPECT_EQ(t.command(master, {"GET", key}), value);
    int replica = t.replicas_of(master).at(0);
    EXPECT_EQ(t.commands(replica, {{"READONLY"}, {"GET", key}}), (Replies{"OK", value})) << replica;
    EXPECT_EQ(t.command(replica, {"GET", key}), redirect("MOVED", slot, master)) << "a replica without READONLY";
    for (int other : masters) {
      if (other != master) {
        EXPECT_EQ(t.command(other, {"GET", key}), redirect("MOVED", slot, master)) << other;
      }
    }
    EXPECT_EQ(t.command_on_key(key, {"GET", key}), value);
  }
}

TEST(ClusterHarness, KilledMasterIsFailedOverAndRestartsAsAReplica) {
  ClusterTopology t;
  std::string key = "floodwall:{failover}:k";
  uint16_t slot = t.key_slot(key);
  int master = t.master_of_slot(slot);
  auto replicas = t.replicas_of(master);
  ASSERT_EQ(replicas.size(), 1u);
  set_and_wait(t, master, key, "before");

  auto t0 = Clock::now();
  EXPECT_EQ(t.kill_master_of_slot(slot), master);
  EXPECT_TRUE(t.killed(master));
  EXPECT_EQ(command_at(master, {"PING"}), "<no connection>");
  int new_master = t.wait_failover(slot, master, 10.0);
  double failover_s = seconds_since(t0);
  RecordProperty("failover_s", std::to_string(failover_s));
  EXPECT_LT(failover_s, 10.0);
  ASSERT_EQ(new_master, replicas[0]);
  EXPECT_EQ(t.master_of_slot(slot), new_master);
  auto masters = t.master_ports();
  EXPECT_EQ(masters.size(), 3u);
  EXPECT_TRUE(std::count(masters.begin(), masters.end(), new_master));
  EXPECT_FALSE(std::count(masters.begin(), masters.end(), master));
  EXPECT_EQ(t.command(new_master, {"GET", key}), "before");
  EXPECT_EQ(t.command_on_key(key, {"GET", key}), "before");
  EXPECT_EQ(t.command_on_key(key, {"SET", key, "during"}), "OK");
  for (int p : t.live_ports()) {
    EXPECT_NE(t.command(p, {"CLUSTER", "INFO"}).find("cluster_state:ok"), std::string::npos) << p;
  }

  t0 = Clock::now();
  t.restart(master);
  RecordProperty("restart_s", std::to_string(seconds_since(t0)));
  EXPECT_FALSE(t.killed(master));
  EXPECT_EQ(t.command(master, {"CLUSTER", "MYID"}), t.node_id(master)) << "its id, from its nodes.conf";
  EXPECT_EQ(t.command(master, {"ROLE"}).rfind("slave 127.0.0.1 " + std::to_string(new_master) + " connected", 0), 0u);
  EXPECT_EQ(t.replicas_of(new_master), std::vector<int>{master});
  EXPECT_EQ(t.master_of_slot(slot), new_master);
  EXPECT_EQ(t.commands(master, {{"READONLY"}, {"GET", key}}), (Replies{"OK", "during"})) << "after its full sync";
  set_and_wait(t, new_master, key, "after");
  EXPECT_EQ(t.commands(master, {{"READONLY"}, {"GET", key}}), (Replies{"OK", "after"}));
  EXPECT_EQ(t.command(master, {"GET", key}), redirect("MOVED", slot, new_master));
}

TEST(ClusterHarness, SlotMigrationAnswersAskThenMoved) {
  ClusterTopology t;
  std::string a = "floodwall:{migrate}:a", b = "floodwall:{migrate}:b";
  uint16_t slot = t.key_slot(a);
  ASSERT_EQ(t.key_slot(b), slot);
  int from = t.master_of_slot(slot);
  int to = -1;
  for (int m : t.master_ports()) {
    if (m != from && to < 0) to = m;
  }
  ASSERT_GT(to, 0);
  EXPECT_EQ(t.command(from, {"SET", a, "va"}), "OK");
  EXPECT_EQ(t.command(from, {"SET", b, "vb"}), "OK");

  t.begin_migration(slot, from, to);
  EXPECT_EQ(t.migrate_keys(slot, from, to, {a}), "OK");
  EXPECT_EQ(t.command(from, {"GET", a}), redirect("ASK", slot, to)) << "a key moved already";
  EXPECT_EQ(t.command(from, {"GET", b}), "vb") << "a key not moved yet is still served at the source";
  EXPECT_EQ(t.command(to, {"GET", a}), redirect("MOVED", slot, from)) << "the target without ASKING";
  EXPECT_EQ(t.commands(to, {{"ASKING"}, {"GET", a}}), (Replies{"OK", "va"}));
  EXPECT_EQ(t.command(from, {"MGET", a, b}).rfind("TRYAGAIN", 0), 0u) << "keys on both sides";
  EXPECT_EQ(t.command_on_key(a, {"GET", a}), "va");
  EXPECT_EQ(t.command_on_key(b, {"GET", b}), "vb");
  EXPECT_EQ(t.master_of_slot(slot), from) << "the source serves the slot until the migration is finished";

  // Finishing with b still at the source would lose it: the harness refuses, and nothing changes.
  EXPECT_NONFATAL_FAILURE(t.finish_migration(slot, to), "still holds keys of the slot");
  EXPECT_EQ(t.command(from, {"GET", b}), "vb");
  EXPECT_EQ(t.command(from, {"GET", a}), redirect("ASK", slot, to));

  EXPECT_EQ(t.migrate_keys(slot, from, to, {b}), "OK");
  auto t0 = Clock::now();
  t.finish_migration(slot, to);
  RecordProperty("finish_s", std::to_string(seconds_since(t0)));
  EXPECT_EQ(t.command(from, {"GET", a}), redirect("MOVED", slot, to));
  EXPECT_EQ(t.command(to, {"GET", a}), "va");
  EXPECT_EQ(t.command(to, {"GET", b}), "vb");
  EXPECT_EQ(t.master_of_slot(slot), to);
  for (int p : t.ports()) {
    if (p != to) {
      EXPECT_EQ(t.command(p, {"GET", a}), redirect("MOVED", slot, to)) << p;
    }
  }
  EXPECT_EQ(t.command_on_key(b, {"GET", b}), "vb");
  EXPECT_EQ(t.master_ports().size(), 3u);
}

TEST(ClusterHarness, PasswordAndAclUserReachEveryNode) {
  ClusterTopology::Options options;  // (GCC warns of designated initializers that leave a member out)
  options.password = "cluster-secret";
  options.acl_user = "fwuser";
  options.acl_password = "fw-secret";
  ClusterTopology t(options);
  auto ports = t.ports();
  EXPECT_EQ(t.url("redis+cluster://fwuser:fw-secret@", {ports[0]}),
            "redis+cluster://fwuser:fw-secret@127.0.0.1:" + std::to_string(ports[0]));

  auto user_can = [&](int port) {
    EXPECT_EQ(commands_at_auth(port, "", {{"AUTH", "fwuser", "fw-secret"}, {"ACL", "WHOAMI"}, {"PING"}}),
              (Replies{"OK", "fwuser", "PONG"}))
        << port;
  };
  for (int p : ports) {
    EXPECT_EQ(command_at(p, {"PING"}).rfind("NOAUTH", 0), 0u) << p;
    EXPECT_EQ(command_at_auth(p, "wrong", {"PING"}).rfind("<AUTH: ", 0), 0u) << p;
    EXPECT_EQ(command_at(p, {"AUTH", "fwuser", "wrong"}).rfind("WRONGPASS", 0), 0u) << p;
    EXPECT_EQ(t.command(p, {"PING"}), "PONG") << p;
    user_can(p);
  }

  std::string key = "floodwall:{acl}:k";
  int master = t.master_of_key(key);
  EXPECT_EQ(
      commands_at_auth(master, "", {{"AUTH", "fwuser", "fw-secret"}, {"SET", key, "v"}, {"WAIT", "1", "5000"}}, 7.0),
      (Replies{"OK", "OK", "1"}));
  int replica = t.replicas_of(master).at(0);
  EXPECT_EQ(commands_at_auth(replica, "", {{"AUTH", "fwuser", "fw-secret"}, {"READONLY"}, {"GET", key}}),
            (Replies{"OK", "OK", "v"}));
  std::string outside = "other:{acl}:k";
  EXPECT_EQ(
      commands_at_auth(master, "", {{"AUTH", "fwuser", "fw-secret"}, {"SET", outside, "v"}})[1].rfind("NOPERM", 0), 0u)
      << "only ~floodwall:*";

  // A replica killed and restarted (with the password as masterauth) has the user again.
  t.kill_node(replica);
  t.restart(replica);
  EXPECT_EQ(t.command(replica, {"ROLE"}).rfind("slave 127.0.0.1 " + std::to_string(master) + " connected", 0), 0u);
  user_can(replica);

  // MIGRATE ... AUTH <password> to the target.
  uint16_t slot = t.key_slot(key);
  int to = master == t.master_ports()[0] ? t.master_ports()[1] : t.master_ports()[0];
  t.begin_migration(slot, master, to);
  EXPECT_EQ(t.migrate_keys(slot, master, to, {key}), "OK");
  t.finish_migration(slot, to);
  EXPECT_EQ(t.command(to, {"GET", key}), "v");
  EXPECT_EQ(t.command(master, {"GET", key}), redirect("MOVED", slot, to));
}

// TLS only (ClusterOptions::tls), with a password and a replica each: nothing answers in plain text, the
// harness' own commands go over TLS (verifying the CA and 127.0.0.1; another CA or a wrong password is
// refused), replication, a restart and MIGRATE go over TLS too, and url() is rediss+cluster://.
TEST(ClusterHarness, TlsNodesSpeakOnlyTlsAndReplicateOverIt) {
  ClusterTopology::Options options;
  options.password = "cluster-secret";
  options.tls = &TlsCerts::shared();
  auto t0 = Clock::now();
  ClusterTopology t(options);
  RecordProperty("start_s", std::to_string(seconds_since(t0)));
  auto ports = t.ports();
  ASSERT_EQ(ports.size(), 6u);
  EXPECT_EQ(t.url("", {ports[0]}), "rediss+cluster://127.0.0.1:" + std::to_string(ports[0]));
  EXPECT_EQ(t.url("redis+cluster://", {ports[0]}), "redis+cluster://127.0.0.1:" + std::to_string(ports[0]));
  NodeAccess rogue = t.access();
  rogue.tls_ca = TlsCerts::shared().rogue_ca();
  NodeAccess wrong_password = t.access();
  wrong_password.password = "wrong";
  for (int p : ports) {
    EXPECT_NE(command_at(p, {"PING"}), "PONG") << p << " answers in plain text";
    EXPECT_EQ(t.command(p, {"PING"}), "PONG") << p;
    EXPECT_EQ(command_at_auth(p, rogue, {"PING"}).rfind("<TLS: verification: ", 0), 0u) << p;
    EXPECT_EQ(command_at_auth(p, wrong_password, {"PING"}).rfind("<AUTH: ", 0), 0u) << p;
    EXPECT_NE(t.command(p, {"CLUSTER", "INFO"}).find("cluster_state:ok"), std::string::npos) << p;
  }
  // The ports the cluster names are the TLS ports (the only ones).
  std::set<int> named;
  for (const auto &r : t.slot_ranges()) named.insert(r.master);
  for (int m : named) EXPECT_TRUE(std::count(ports.begin(), ports.end(), m)) << m;
  EXPECT_EQ(named.size(), 3u);

  std::string key = "floodwall:{tls}:k";
  int master = t.master_of_key(key);
  set_and_wait(t, master, key, "v");
  int replica = t.replicas_of(master).at(0);
  EXPECT_EQ(t.commands(replica, {{"READONLY"}, {"GET", key}}), (Replies{"OK", "v"})) << "replicated over TLS";
  t.kill_node(replica);
  t.restart(replica);
  EXPECT_EQ(t.command(replica, {"ROLE"}).rfind("slave 127.0.0.1 " + std::to_string(master) + " connected", 0), 0u);
  EXPECT_EQ(t.commands(replica, {{"READONLY"}, {"GET", key}}), (Replies{"OK", "v"}));

  uint16_t slot = t.key_slot(key);
  int to = master == t.master_ports()[0] ? t.master_ports()[1] : t.master_ports()[0];
  t.begin_migration(slot, master, to);
  EXPECT_EQ(t.migrate_keys(slot, master, to, {key}), "OK");
  t.finish_migration(slot, to);
  EXPECT_EQ(t.command(to, {"GET", key}), "v");
  EXPECT_EQ(t.command(master, {"GET", key}), redirect("MOVED", slot, to));
}

}  // namespace
}  // namespace floodwall::testing
