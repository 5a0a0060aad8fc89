// Redis Cluster's parts (stores/redis/cluster_map.hpp): key slots against the spec's vectors and against a
// real node's CLUSTER KEYSLOT; the slot map from the real CLUSTER SLOTS and CLUSTER SHARDS replies of one
// node (all its slots, part of them, none), of a cluster of three (two masters, a replica) and from replies
// made by hand, malformed ones included; the replies of issue #60 (Redis 7.4 after a second failover: CLUSTER
// SHARDS lists a shard without its slots, CLUSTER SLOTS is right) and one view completed from another; MOVED, ASK,
// CLUSTERDOWN and TRYAGAIN as real nodes say them and as written by hand. Every real node is a redis-server of
// tests/core/cluster_node.hpp.
#include "stores/redis/cluster_map.hpp"

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <hiredis/read.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "cluster_node.hpp"

using floodwall::ClusterMap;
using floodwall::crc16_xmodem;
using floodwall::fill_unowned;
using floodwall::is_cluster_down;
using floodwall::is_try_again;
using floodwall::kClusterSlots;
using floodwall::key_slot;
using floodwall::parse_cluster_shards;
using floodwall::parse_cluster_slots;
using floodwall::parse_redirect;
using floodwall::Redirect;
using floodwall::RedisEndpoint;
using floodwall::reply_head;
using floodwall::testing::ClusterRedis;
using floodwall::testing::ReplyPtr;

namespace {

// RESP by hand: a bulk string, an integer, nil, an array, an error.
std::string bulk(std::string_view s) {
  return "$" + std::to_string(s.size()) + "\r\n" + std::string(s) + "\r\n";
}
std::string num(long long n) {
  return ":" + std::to_string(n) + "\r\n";
}
std::string nil() {
  return "$-1\r\n";
}
std::string arr(const std::vector<std::string> &elements) {
  std::string out = "*" + std::to_string(elements.size()) + "\r\n";
  for (const auto &e : elements) out += e;
  return out;
}
std::string err(std::string_view s) {
  return "-" + std::string(s) + "\r\n";
}

// The reply that hiredis' redisReader makes of `bytes` (which must be exactly one): null and a failure else.
ReplyPtr read_reply(const std::string &bytes) {
  redisReader *reader = redisReaderCreate();
  void *reply = nullptr;
  bool ok = redisReaderFeed(reader, bytes.data(), bytes.size()) == REDIS_OK &&
            redisReaderGetReply(reader, &reply) == REDIS_OK && reply != nullptr;
  void *more = nullptr;
  if (ok && redisReaderGetReply(reader, &more) == REDIS_OK && more) {
    freeReplyObject(more);
    ok = false;
  }
  redisReaderFree(reader);
  if (!ok) {
    ADD_FAILURE() << "not one whole reply: " << ::testing::PrintToString(bytes);
    if (reply) freeReplyObject(reply);
    return nullptr;
  }
  return ReplyPtr(static_cast<redisReply *>(reply));
}

std::string endpoint_text(const RedisEndpoint &e) {
  return e.host + ":" + std::to_string(e.port);
}

// A map as text: each run of slots with a master, "start-end host:port", with the master's replicas in
// brackets when it has any, runs joined by ", "; unowned runs left out.
std::string summary(const ClusterMap &m) {
  std::string out;
  for (size_t s = 0; s < kClusterSlots;) {
    size_t e = s;
    while (e + 1 < kClusterSlots && m.owner[e + 1] == m.owner[s]) e++;
    if (const floodwall::ClusterNode *n = m.master_of(static_cast<uint16_t>(s))) {
      if (!out.empty()) out += ", ";
      out += std::to_string(s) + "-" + std::to_string(e) + " " + endpoint_text(n->endpoint);
      if (!n->replicas.empty()) {
        out += " [";
        for (size_t i = 0; i < n->replicas.size(); i++) out += (i ? " " : "") + endpoint_text(n->replicas[i]);
        out += "]";
      }
    }
    s = e + 1;
  }
  return out;
}

// A map's summary, or "<nullopt>".
std::string summary(const std::optional<ClusterMap> &m) {
  return m ? summary(*m) : "<nullopt>";
}

std::string slots_of(const std::string &resp, std::string_view from = "10.9.9.9") {
  ReplyPtr r = read_reply(resp);
  return r ? summary(parse_cluster_slots(r.get(), from)) : "<no reply>";
}
std::string shards_of(const std::string &resp, std::string_view from = "10.9.9.9", bool tls = false) {
  ReplyPtr r = read_reply(resp);
  return r ? summary(parse_cluster_shards(r.get(), from, tls)) : "<no reply>";
}

// A CLUSTER SLOTS node and a CLUSTER SHARDS node as a Redis 7 writes them.
std::string slots_node(std::string_view host, int port, std::string_view id) {
  return arr({bulk(host), num(port), bulk(id), arr({})});
}
std::string shards_node(std::string_view id, std::string_view ip, int port, std::string_view role,
                        std::string_view health = "online") {
  return arr({bulk("id"), bulk(id), bulk("port"), num(port), bulk("ip"), bulk(ip), bulk("endpoint"), bulk(ip),
              bulk("role"), bulk(role), bulk("replication-offset"), num(72156), bulk("health"), bulk(health)});
}
std::string shard(const std::vector<long long> &slots, const std::vector<std::string> &nodes) {
  std::vector<std::string> s;
  for (long long v : slots) s.push_back(num(v));
  return arr({bulk("slots"), arr(s), bulk("nodes"), arr(nodes)});
}

std::string local(int port) {
  return "127.0.0.1:" + std::to_string(port);
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

// ---- key slots ----

TEST(ClusterMap, Crc16AndKeySlotAsTheSpecSays) {
  EXPECT_EQ(crc16_xmodem("123456789"), 0x31C3);
  EXPECT_EQ(key_slot("123456789"), 12739);
  EXPECT_EQ(crc16_xmodem(""), 0);
  EXPECT_EQ(key_slot(""), 0);
  EXPECT_EQ(key_slot("foo"), 12182);  // as a real node's MOVED says it (see RealThreeNodeCluster)
  EXPECT_EQ(key_slot("b"), 3300);
  EXPECT_EQ(key_slot(std::string_view("\0", 1)), 0);
  // Every slot is below 16384, whatever the CRC.
  for (int i = 0; i < 70000; i++) EXPECT_LT(key_slot(std::to_string(i)), kClusterSlots);
}

TEST(ClusterMap, HashTagsAsTheSpecSays) {
  // The spec's examples.
  EXPECT_EQ(key_slot("{user1000}.following"), key_slot("user1000"));
  EXPECT_EQ(key_slot("{user1000}.followers"), key_slot("user1000"));
  EXPECT_EQ(key_slot("foo{}{bar}"), crc16_xmodem("foo{}{bar}") % 16384);
  EXPECT_EQ(key_slot("foo{{bar}}zap"), crc16_xmodem("{bar") % 16384);
  EXPECT_EQ(key_slot("foo{bar}{zap}"), key_slot("bar"));
  // The first '{' and the first '}' after it; an empty tag or none hashes the whole key.
  EXPECT_EQ(key_slot("}{a}"), key_slot("a"));
  EXPECT_EQ(key_slot("x{a}y{b}z"), key_slot("a"));
  EXPECT_EQ(key_slot("{}"), crc16_xmodem("{}") % 16384);
  EXPECT_EQ(key_slot("{"), crc16_xmodem("{") % 16384);
  EXPECT_EQ(key_slot("}"), crc16_xmodem("}") % 16384);
  EXPECT_EQ(key_slot("abc{"), crc16_xmodem("abc{") % 16384);
  EXPECT_EQ(key_slot("abc{def"), crc16_xmodem("abc{def") % 16384);
  EXPECT_EQ(key_slot("{{}}"), crc16_xmodem("{") % 16384);
  EXPECT_EQ(key_slot("a}b{c}"), key_slot("c"));
  EXPECT_EQ(key_slot(std::string_view("{\0}", 3)), key_slot(std::string_view("\0", 1)));
  EXPECT_EQ(key_slot("{123456789}"), 12739);
  EXPECT_EQ(key_slot("floodwall:{tenant-42}:rate"), key_slot("floodwall:{tenant-42}:slots"));
}

// key_slot against CLUSTER KEYSLOT of a real node for a few thousand random keys: binary bytes (NUL, CR,
// LF, bytes above 127), braces in every position, empty tags.
TEST(ClusterMap, KeySlotAgreesWithClusterKeyslot) {
  ClusterRedis node;
  std::vector<std::string> keys = {"",
                                   "{",
                                   "}",
                                   "{}",
                                   "}{",
                                   "{{}}",
                                   "foo{}{bar}",
                                   "foo{{bar}}zap",
                                   "foo{bar}{zap}",
                                   "{a",
                                   "a}",
                                   "{\r\n}",
                                   "123456789",
                                   "{user1000}.following",
                                   std::string("\0{\0}", 4)};
  uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> length(0, 24), kind(0, 3), byte(0, 255), printable(32, 126);
  while (keys.size() < 4000) {
    std::string k;
    for (int n = length(rng), i = 0; i < n; i++) {
      int what = kind(rng);
      k += what == 0   ? ((byte(rng) & 1) ? '{' : '}')
           : what == 1 ? static_cast<char>(printable(rng))
                       : static_cast<char>(byte(rng));
    }
    keys.push_back(std::move(k));
  }

  redisContext *c = floodwall::testing::connect_at(node.port(), {}, 10.0);
  ASSERT_NE(c, nullptr);
  for (const auto &k : keys) {
    const char *argv[] = {"CLUSTER", "KEYSLOT", k.data()};
    size_t lens[] = {7, 7, k.size()};
    ASSERT_EQ(redisAppendCommandArgv(c, 3, argv, lens), REDIS_OK);
  }
  size_t mismatches = 0;
  for (const auto &k : keys) {
    void *reply = nullptr;
    ASSERT_EQ(redisGetReply(c, &reply), REDIS_OK) << c->errstr;
    ReplyPtr r(static_cast<redisReply *>(reply));
    ASSERT_EQ(r->type, REDIS_REPLY_INTEGER);
    if (r->integer != key_slot(k) && mismatches++ < 10)
      ADD_FAILURE() << "key " << ::testing::PrintToString(k) << ": CLUSTER KEYSLOT " << r->integer << ", key_slot "
                    << key_slot(k);
  }
  redisFree(c);
  EXPECT_EQ(mismatches, 0u) << "of " << keys.size() << " keys";
}

// ---- the slot map from real nodes ----

// One node with every slot: it knows no address of its own (it met no other node), so both replies give
// an empty ip, which is the host the reply came from; with none, its slots have no master to go to.
TEST(ClusterMap, RealNodeWithEverySlot) {
  ClusterRedis node;
  ASSERT_EQ(node.command({"CLUSTER", "ADDSLOTSRANGE", "0", "16383"}), "OK");
  std::string id = node.id();
  ASSERT_EQ(id.size(), 40u);
  std::string all = "0-16383 " + local(node.port());

  for (bool shards : {false, true}) {
    SCOPED_TRACE(shards ? "CLUSTER SHARDS" : "CLUSTER SLOTS");
    auto parse = [&](std::string_view from) {
      ReplyPtr r = node.reply({"CLUSTER", shards ? "SHARDS" : "SLOTS"});
      return shards ? parse_cluster_shards(r.get(), from) : parse_cluster_slots(r.get(), from);
    };
    std::optional<ClusterMap> m = parse("127.0.0.1");
    ASSERT_TRUE(m);
    EXPECT_EQ(summary(*m), all);
    ASSERT_EQ(m->masters.size(), 1u);
    EXPECT_EQ(m->masters[0].id, id);
    EXPECT_TRUE(m->masters[0].replicas.empty());
    EXPECT_EQ(m->owned_slots(), static_cast<size_t>(kClusterSlots));
    EXPECT_EQ(m->master_of(0), &m->masters[0]);
    EXPECT_EQ(m->master_of(16383), &m->masters[0]);
    EXPECT_EQ(m->master_of(key_slot("anything")), &m->masters[0]);

    // No host to substitute: a map with no master, not a malformed reply.
    m = parse("");
    ASSERT_TRUE(m);
    EXPECT_EQ(m->owned_slots(), 0u);
    EXPECT_TRUE(m->masters.empty());
    EXPECT_EQ(m->master_of(0), nullptr);
  }

  // unknown-endpoint: CLUSTER SLOTS says nil, CLUSTER SHARDS "": the host the reply came from.
  ASSERT_EQ(node.command({"CONFIG", "SET", "cluster-preferred-endpoint-type", "unknown-endpoint"}), "OK");
  ReplyPtr slots = node.reply({"CLUSTER", "SLOTS"});
  ASSERT_EQ(slots->element[0]->element[2]->element[0]->type, REDIS_REPLY_NIL);
  EXPECT_EQ(summary(parse_cluster_slots(slots.get(), "127.0.0.1")), all);
  EXPECT_EQ(summary(parse_cluster_shards(node.reply({"CLUSTER", "SHARDS"}).get(), "127.0.0.1")), all);

  // hostname preferred, none set: "?", then the node's ip, which is empty: the host the reply came from.
  ASSERT_EQ(node.command({"CONFIG", "SET", "cluster-preferred-endpoint-type", "hostname"}), "OK");
  slots = node.reply({"CLUSTER", "SLOTS"});
  ASSERT_EQ(floodwall::testing::reply_text(slots->element[0]->element[2]->element[0]), "?");
  EXPECT_EQ(summary(parse_cluster_slots(slots.get(), "127.0.0.1")), all);
  EXPECT_EQ(summary(parse_cluster_shards(node.reply({"CLUSTER", "SHARDS"}).get(), "127.0.0.1")), all);

  // A hostname announced and preferred: that name.
  ASSERT_EQ(node.command({"CONFIG", "SET", "cluster-announce-hostname", "localhost"}), "OK");
  std::string named = "0-16383 localhost:" + std::to_string(node.port());
  EXPECT_EQ(summary(parse_cluster_slots(node.reply({"CLUSTER", "SLOTS"}).get(), "127.0.0.1")), named);
  EXPECT_EQ(summary(parse_cluster_shards(node.reply({"CLUSTER", "SHARDS"}).get(), "127.0.0.1")), named);

  // Not a slot map at all: a reply of another command.
  EXPECT_FALSE(parse_cluster_slots(node.reply({"PING"}).get(), "127.0.0.1"));
  EXPECT_FALSE(parse_cluster_shards(node.reply({"CLUSTER", "SLOTS"}).get(), "127.0.0.1"));
  EXPECT_FALSE(parse_cluster_slots(node.reply({"CLUSTER", "SHARDS"}).get(), "127.0.0.1"));
}

// A node with part of the slots, in several ranges, then one with none; a node with slots unserved says
// CLUSTERDOWN.
TEST(ClusterMap, RealNodeWithPartOfTheSlots) {
  ClusterRedis node;
  ASSERT_EQ(node.command({"CLUSTER", "ADDSLOTSRANGE", "0", "5460", "10923", "12000"}), "OK");
  ASSERT_EQ(node.command({"CLUSTER", "ADDSLOTS", "16383"}), "OK");
  std::string at = " " + local(node.port());
  std::string expected = "0-5460" + at + ", 10923-12000" + at + ", 16383-16383" + at;
  for (bool shards : {false, true}) {
    SCOPED_TRACE(shards ? "CLUSTER SHARDS" : "CLUSTER SLOTS");
    ReplyPtr r = node.reply({"CLUSTER", shards ? "SHARDS" : "SLOTS"});
    std::optional<ClusterMap> m =
        shards ? parse_cluster_shards(r.get(), "127.0.0.1") : parse_cluster_slots(r.get(), "127.0.0.1");
    ASSERT_TRUE(m);
    EXPECT_EQ(summary(*m), expected);
    EXPECT_EQ(m->masters.size(), 1u);  // three ranges, one master
    EXPECT_EQ(m->owned_slots(), 5461u + 1078u + 1u);
    EXPECT_NE(m->master_of(5460), nullptr);
    EXPECT_EQ(m->master_of(5461), nullptr);
    EXPECT_EQ(m->master_of(10922), nullptr);
    EXPECT_NE(m->master_of(12000), nullptr);
    EXPECT_EQ(m->master_of(12001), nullptr);
    EXPECT_EQ(m->master_of(16382), nullptr);
  }
  std::string down = node.command({"GET", "foo"});
  EXPECT_TRUE(is_cluster_down(down)) << down;

  ClusterRedis empty;
  for (bool shards : {false, true}) {
    SCOPED_TRACE(shards ? "CLUSTER SHARDS" : "CLUSTER SLOTS");
    ReplyPtr r = empty.reply({"CLUSTER", shards ? "SHARDS" : "SLOTS"});
    std::optional<ClusterMap> m =
        shards ? parse_cluster_shards(r.get(), "127.0.0.1") : parse_cluster_slots(r.get(), "127.0.0.1");
    ASSERT_TRUE(m);
    EXPECT_EQ(m->owned_slots(), 0u);
    EXPECT_TRUE(m->masters.empty());  // a master with no slot is none of the map's
  }
  down = empty.command({"SET", "foo", "1"});
  EXPECT_TRUE(is_cluster_down(down)) << down;
}

// Three real nodes: A with slots 0-8191 and C its replica, B with 8192-16383. Every node's CLUSTER SLOTS and
// CLUSTER SHARDS give the same map; MOVED, ASK and TRYAGAIN as A says them agree with it.
TEST(ClusterMap, RealThreeNodeCluster) {
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::string> args = {"--repl-diskless-sync-delay", "0", "--cluster-node-timeout", "5000"};
  ClusterRedis a(args), b(args), c(args);
  ASSERT_EQ(a.command({"CLUSTER", "ADDSLOTSRANGE", "0", "8191"}), "OK");
  ASSERT_EQ(b.command({"CLUSTER", "ADDSLOTSRANGE", "8192", "16383"}), "OK");
  ASSERT_EQ(a.command({"CLUSTER", "MEET", "127.0.0.1", std::to_string(b.port()), std::to_string(b.bus_port())}), "OK");
  ASSERT_EQ(a.command({"CLUSTER", "MEET", "127.0.0.1", std::to_string(c.port()), std::to_string(c.bus_port())}), "OK");
  std::string a_id = a.id(), b_id = b.id();
  // C can replicate A once it knows A.
  ASSERT_TRUE(c.wait_until("C knows A", [&] { return c.command({"CLUSTER", "COUNT-FAILURE-REPORTS", a_id}) == "0"; }));
  ASSERT_EQ(c.command({"CLUSTER", "REPLICATE", a_id}), "OK");
  ASSERT_TRUE(c.wait_until("C in sync with A", [&] {
    return c.command({"INFO", "replication"}).find("master_link_status:up") != std::string::npos;
  }));
  ASSERT_TRUE(a.wait_until("cluster_state:ok", [&] {
    return a.command({"CLUSTER", "INFO"}).find("cluster_state:ok") != std::string::npos;
  }));
  // A write moves the replication offset: a replica at offset 0 is listed by neither reply.
  uint16_t slot_a = key_slot("{b}");
  ASSERT_LT(slot_a, 8192);
  ASSERT_EQ(a.command({"SET", "{b}present", "1"}), "OK");

  std::string expected = "0-8191 " + local(a.port()) + " [" + local(c.port()) + "], 8192-16383 " + local(b.port());
  for (ClusterRedis *n : {&a, &b, &c}) {
    for (bool shards : {false, true}) {
      auto seen = [&] {
        ReplyPtr r = n->reply({"CLUSTER", shards ? "SHARDS" : "SLOTS"});
        return summary(shards ? parse_cluster_shards(r.get(), "127.0.0.1") : parse_cluster_slots(r.get(), "127.0.0.1"));
      };
      ASSERT_TRUE(n->wait_until(
          std::string(shards ? "CLUSTER SHARDS" : "CLUSTER SLOTS") + " gives " + expected,
          [&] { return seen() == expected; }, 15.0, seen));
    }
  }
  std::printf("[          ] the cluster of three settled in %.0f ms\n", ms_since(t0));

  // Masters by id, once each, in the order of the reply; the replica once too.
  ReplyPtr r = b.reply({"CLUSTER", "SLOTS"});
  std::optional<ClusterMap> m = parse_cluster_slots(r.get(), "127.0.0.1");
  ASSERT_TRUE(m);
  ASSERT_EQ(m->masters.size(), 2u);
  const floodwall::ClusterNode *ma = m->master_of(0), *mb = m->master_of(16383);
  ASSERT_TRUE(ma && mb);
  EXPECT_EQ(ma->id, a_id);
  EXPECT_EQ(mb->id, b_id);
  ASSERT_EQ(ma->replicas.size(), 1u);
  EXPECT_EQ(ma->replicas[0].port, c.port());
  EXPECT_TRUE(mb->replicas.empty());

  // MOVED: for every key A does not own, to the master the map names for the key's slot.
  size_t moved = 0, served = 0;
  for (int i = 0; i < 200; i++) {
    std::string key = "key:" + std::to_string(i);
    std::string said = a.command({"GET", key});
    std::optional<Redirect> to = parse_redirect(said);
    if (!to) {
      EXPECT_EQ(said, "<nil>") << key;
      EXPECT_EQ(m->master_of(key_slot(key)), ma) << key;
      served++;
      continue;
    }
    moved++;
    EXPECT_FALSE(to->ask);
    EXPECT_EQ(to->slot, key_slot(key)) << said;
    ASSERT_NE(m->master_of(to->slot), nullptr);
    EXPECT_EQ(endpoint_text(to->to), endpoint_text(m->master_of(to->slot)->endpoint)) << said;
  }
  EXPECT_GT(moved, 50u);
  EXPECT_GT(served, 50u);

  // unknown-endpoint: ":port", the host of the connection that got it; hostname with none set: "?:port".
  ASSERT_EQ(a.command({"CONFIG", "SET", "cluster-preferred-endpoint-type", "unknown-endpoint"}), "OK");
  std::string said = a.command({"GET", "foo"});
  EXPECT_EQ(said, "MOVED 12182 :" + std::to_string(b.port()));
  std::optional<Redirect> to = parse_redirect(said);
  ASSERT_TRUE(to);
  EXPECT_EQ(to->to.host, "");
  EXPECT_EQ(to->to.port, b.port());
  ASSERT_EQ(a.command({"CONFIG", "SET", "cluster-preferred-endpoint-type", "hostname"}), "OK");
  said = a.command({"GET", "foo"});
  EXPECT_EQ(said, "MOVED 12182 ?:" + std::to_string(b.port()));
  EXPECT_FALSE(parse_redirect(said));
  ASSERT_EQ(a.command({"CONFIG", "SET", "cluster-preferred-endpoint-type", "ip"}), "OK");

  // ASK and TRYAGAIN: A's slot of "{b}" migrating to B. A key that is still on A is served there; one that
  // is not is asked of B; a command on both is to be tried again.
  ASSERT_EQ(b.command({"CLUSTER", "SETSLOT", std::to_string(slot_a), "IMPORTING", a_id}), "OK");
  ASSERT_EQ(a.command({"CLUSTER", "SETSLOT", std::to_string(slot_a), "MIGRATING", b_id}), "OK");
  EXPECT_EQ(a.command({"GET", "{b}present"}), "1");
  said = a.command({"GET", "{b}absent"});
  to = parse_redirect(said);
  ASSERT_TRUE(to) << said;
  EXPECT_TRUE(to->ask);
  EXPECT_EQ(to->slot, slot_a);
  EXPECT_EQ(endpoint_text(to->to), local(b.port()));
  said = a.command({"MGET", "{b}present", "{b}absent"});
  EXPECT_TRUE(is_try_again(said)) << said;
  EXPECT_FALSE(is_cluster_down(said));
  EXPECT_FALSE(parse_redirect(said));
}

// ---- the slot map from replies made by hand ----

TEST(ClusterMap, SlotsRepliesByHand) {
  std::string a = slots_node("10.0.0.1", 7000, "aaaa"), b = slots_node("10.0.0.2", 7001, "bbbb");
  std::string ra = slots_node("10.0.0.3", 7002, "cccc"), rb = slots_node("10.0.0.4", 7003, "dddd");
  // Several ranges of one master: one master; its replicas as listed with its first range.
  EXPECT_EQ(slots_of(arr({arr({num(0), num(99), a, ra}), arr({num(100), num(199), b, rb}),
                          arr({num(200), num(16383), a, ra, rb})})),
            "0-99 10.0.0.1:7000 [10.0.0.3:7002], 100-199 10.0.0.2:7001 [10.0.0.4:7003], "
            "200-16383 10.0.0.1:7000 [10.0.0.3:7002]");
  ReplyPtr r = read_reply(arr({arr({num(0), num(99), a}), arr({num(100), num(199), b}), arr({num(200), num(299), a})}));
  std::optional<ClusterMap> m = parse_cluster_slots(r.get(), "x");
  ASSERT_TRUE(m);
  ASSERT_EQ(m->masters.size(), 2u);
  EXPECT_EQ(m->masters[0].id, "aaaa");
  EXPECT_EQ(m->masters[1].id, "bbbb");
  EXPECT_EQ(m->owner[150], 1);
  EXPECT_EQ(m->owner[250], 0);
  EXPECT_EQ(m->owner[300], ClusterMap::kUnowned);
  EXPECT_EQ(m->owned_slots(), 300u);
  // An empty reply: no slot has a master.
  EXPECT_EQ(slots_of(arr({})), "");
  // Redis 3: no id, no metadata; masters told apart by endpoint.
  EXPECT_EQ(slots_of(arr({arr({num(0), num(9), arr({bulk("h1"), num(1)})}),
                          arr({num(10), num(19), arr({bulk("h2"), num(1)}), arr({bulk("h3"), num(2)})}),
                          arr({num(20), num(29), arr({bulk("h1"), num(1)})})})),
            "0-9 h1:1, 10-19 h2:1 [h3:2], 20-29 h1:1");
  // Single-slot ranges at both ends.
  EXPECT_EQ(slots_of(arr({arr({num(16383), num(16383), a}), arr({num(0), num(0), b})})),
            "0-0 10.0.0.2:7001, 16383-16383 10.0.0.1:7000");
  // Empty host and nil (unknown-endpoint): the host the reply came from; none given: no master.
  EXPECT_EQ(slots_of(arr({arr({num(0), num(9), slots_node("", 7000, "aaaa")})}), "10.1.1.1"), "0-9 10.1.1.1:7000");
  EXPECT_EQ(slots_of(arr({arr({num(0), num(9), arr({nil(), num(7000), bulk("aaaa")})})}), "10.1.1.1"),
            "0-9 10.1.1.1:7000");
  EXPECT_EQ(slots_of(arr({arr({num(0), num(9), slots_node("", 7000, "aaaa")})}), ""), "");
  // "?": the ip of its metadata; with none, no master; a replica with none is left out.
  EXPECT_EQ(slots_of(arr(
                {arr({num(0), num(9), arr({bulk("?"), num(7000), bulk("a"), arr({bulk("ip"), bulk("10.0.0.9")})})})})),
            "0-9 10.0.0.9:7000");
  EXPECT_EQ(slots_of(arr({arr({num(0), num(9), arr({bulk("?"), num(7000), bulk("a"), arr({bulk("ip"), bulk("")})})})}),
                     "10.1.1.1"),
            "0-9 10.1.1.1:7000");
  EXPECT_EQ(slots_of(arr({arr({num(0), num(9), arr({bulk("?"), num(7000), bulk("a"), arr({})})}),
                          arr({num(10), num(19), b, slots_node("?", 1, "r"), ra})})),
            "10-19 10.0.0.2:7001 [10.0.0.3:7002]");
  // A hostname as the endpoint, the ip beside it unread; metadata and elements it does not know.
  EXPECT_EQ(slots_of(arr({arr({num(0), num(9),
                               arr({bulk("redis-1.example.com"), num(6379), bulk("a"),
                                    arr({bulk("ip"), bulk("10.0.0.1"), bulk("future"), arr({num(1)})}), num(5)})})})),
            "0-9 redis-1.example.com:6379");
  // Port 0: a node with no port to give is unreachable (its slots unowned).
  EXPECT_EQ(slots_of(arr({arr({num(0), num(9), slots_node("h", 0, "a")})})), "");
  // One master named twice at one address, its ranges not adjacent.
  EXPECT_EQ(slots_of(arr({arr({num(0), num(9), a}), arr({num(20), num(29), a})})),
            "0-9 10.0.0.1:7000, 20-29 10.0.0.1:7000");
}

TEST(ClusterMap, MalformedSlotsRepliesAreNullopt) {
  std::string a = slots_node("10.0.0.1", 7000, "aaaa");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"an error", err("ERR This instance has cluster support disabled")},
      {"an integer", num(1)},
      {"nil", nil()},
      {"a string", bulk("slots")},
      {"a status", "+OK\r\n"},
      {"nil array", "*-1\r\n"},
      {"an entry that is no array", arr({num(0)})},
      {"an entry of nil", arr({nil()})},
      {"an entry too short", arr({arr({num(0), num(1)})})},
      {"an empty entry", arr({arr({})})},
      {"a start that is a string", arr({arr({bulk("0"), num(1), a})})},
      {"an end that is nil", arr({arr({num(0), nil(), a})})},
      {"start after end", arr({arr({num(5), num(4), a})})},
      {"end past 16383", arr({arr({num(0), num(16384), a})})},
      {"a negative start", arr({arr({num(-1), num(4), a})})},
      {"a huge end", arr({arr({num(0), num(9223372036854775807LL), a})})},
      {"a master that is no array", arr({arr({num(0), num(1), bulk("10.0.0.1")})})},
      {"a master of one element", arr({arr({num(0), num(1), arr({bulk("10.0.0.1")})})})},
      {"a host that is an integer", arr({arr({num(0), num(1), arr({num(1), num(7000)})})})},
      {"a host that is an array", arr({arr({num(0), num(1), arr({arr({}), num(7000)})})})},
      {"a port that is a string", arr({arr({num(0), num(1), arr({bulk("h"), bulk("7000")})})})},
      {"a port past 65535", arr({arr({num(0), num(1), arr({bulk("h"), num(65536)})})})},
      {"a negative port", arr({arr({num(0), num(1), arr({bulk("h"), num(-1)})})})},
      {"an id that is an integer", arr({arr({num(0), num(1), arr({bulk("h"), num(1), num(5)})})})},
      {"an id that is nil", arr({arr({num(0), num(1), arr({bulk("h"), num(1), nil()})})})},
      {"metadata that is a string", arr({arr({num(0), num(1), arr({bulk("h"), num(1), bulk("a"), bulk("ip")})})})},
      {"metadata of odd length", arr({arr({num(0), num(1), arr({bulk("h"), num(1), bulk("a"), arr({bulk("ip")})})})})},
      {"a metadata name that is an integer",
       arr({arr({num(0), num(1), arr({bulk("h"), num(1), bulk("a"), arr({num(1), bulk("x")})})})})},
      {"an ip that is an integer",
       arr({arr({num(0), num(1), arr({bulk("?"), num(1), bulk("a"), arr({bulk("ip"), num(1)})})})})},
      {"a host with a space", arr({arr({num(0), num(1), slots_node("10.0.0.1 x", 1, "a")})})},
      {"a host with a NUL", arr({arr({num(0), num(1), slots_node(std::string_view("h\0x", 3), 1, "a")})})},
      {"a host with a newline", arr({arr({num(0), num(1), slots_node("h\nx", 1, "a")})})},
      {"a host of 256 bytes", arr({arr({num(0), num(1), slots_node(std::string(256, 'h'), 1, "a")})})},
      {"a host past ASCII", arr({arr({num(0), num(1), slots_node("h\xc3\xa9", 1, "a")})})},
      {"a replica that is an integer", arr({arr({num(0), num(1), a, num(5)})})},
      {"a replica with a bad port", arr({arr({num(0), num(1), a, arr({bulk("h"), num(70000)})})})},
      {"ranges that overlap", arr({arr({num(0), num(10), a}), arr({num(10), num(20), slots_node("h", 1, "b")})})},
      {"one range twice", arr({arr({num(0), num(10), a}), arr({num(0), num(10), a})})},
      {"a range inside another", arr({arr({num(0), num(16383), a}), arr({num(5), num(5), a})})},
      {"an unreachable master's range overlapped",
       arr({arr({num(0), num(10), slots_node("h", 0, "z")}), arr({num(5), num(20), a})})},
      {"one id at two addresses",
       arr({arr({num(0), num(1), a}), arr({num(2), num(3), slots_node("h", 7000, "aaaa")})})},
      {"one id at two ports",
       arr({arr({num(0), num(1), a}), arr({num(2), num(3), slots_node("10.0.0.1", 7001, "aaaa")})})},
  };
  for (const auto &[what, resp] : cases) {
    ReplyPtr r = read_reply(resp);
    ASSERT_TRUE(r) << what;
    EXPECT_FALSE(parse_cluster_slots(r.get(), "127.0.0.1"))
        << what << ": " << summary(parse_cluster_slots(r.get(), "127.0.0.1"));
    EXPECT_FALSE(parse_cluster_slots(r.get(), "")) << what;
  }
  EXPECT_FALSE(parse_cluster_slots(nullptr, "127.0.0.1"));
}

TEST(ClusterMap, ShardsRepliesByHand) {
  std::string ma = shards_node("aaaa", "10.0.0.1", 7000, "master"),
              ra = shards_node("cccc", "10.0.0.3", 7002, "replica");
  std::string mb = shards_node("bbbb", "10.0.0.2", 7001, "master");
  EXPECT_EQ(shards_of(arr({shard({0, 99, 200, 16383}, {ma, ra}), shard({100, 199}, {mb})})),
            "0-99 10.0.0.1:7000 [10.0.0.3:7002], 100-199 10.0.0.2:7001, 200-16383 10.0.0.1:7000 [10.0.0.3:7002]");
  ReplyPtr r = read_reply(arr({shard({100, 199}, {ra, mb}), shard({0, 99}, {ma})}));
  std::optional<ClusterMap> m = parse_cluster_shards(r.get(), "x");
  ASSERT_TRUE(m);
  ASSERT_EQ(m->masters.size(), 2u);
  EXPECT_EQ(m->masters[0].id, "bbbb");
  ASSERT_EQ(m->masters[0].replicas.size(), 1u);  // wherever it is listed in its shard
  EXPECT_EQ(m->masters[1].id, "aaaa");
  EXPECT_EQ(m->owned_slots(), 200u);
  EXPECT_EQ(shards_of(arr({})), "");
  // The fields in another order, the shard's too, and fields it does not read of any type.
  EXPECT_EQ(shards_of(arr({arr({bulk("nodes"),
                                arr({arr({bulk("health"), bulk("online"), bulk("role"), bulk("master"), bulk("future"),
                                          arr({arr({nil()})}), bulk("port"), num(9), bulk("ip"), bulk("h")})}),
                                bulk("future"), num(1), bulk("slots"), arr({num(7), num(8)})})})),
            "7-8 h:9");
  // No online master (failed, or loading, or none): the shard's slots are unowned; offline replicas are left out.
  EXPECT_EQ(shards_of(arr({shard({0, 99}, {shards_node("a", "10.0.0.1", 7000, "master", "failed"), ra}),
                           shard({100, 199}, {shards_node("b", "10.0.0.2", 7000, "master", "loading")}),
                           shard({200, 299}, {ra}),
                           shard({300, 399}, {mb, shards_node("c", "10.0.0.3", 7002, "replica", "loading"),
                                              shards_node("d", "10.0.0.4", 7003, "replica", "failed")})})),
            "300-399 10.0.0.2:7001");
  // A shard with no slots (a master with none, or a failed old one): not in the map.
  EXPECT_EQ(shards_of(arr({shard({}, {ma}), shard({0, 0}, {mb})})), "0-0 10.0.0.2:7001");
  // The port: "tls-port" when asked for TLS, else "port"; the other when a node names only one.
  std::string both =
      arr({bulk("id"), bulk("a"), bulk("port"), num(6379), bulk("tls-port"), num(6380), bulk("ip"), bulk("h"),
           bulk("endpoint"), bulk("h"), bulk("role"), bulk("master"), bulk("health"), bulk("online")});
  std::string tls_only =
      arr({bulk("id"), bulk("a"), bulk("tls-port"), num(6380), bulk("ip"), bulk("h"), bulk("endpoint"), bulk("h"),
           bulk("role"), bulk("master"), bulk("health"), bulk("online")});
  std::string neither = arr({bulk("id"), bulk("a"), bulk("ip"), bulk("h"), bulk("endpoint"), bulk("h"), bulk("role"),
                             bulk("master"), bulk("health"), bulk("online")});
  EXPECT_EQ(shards_of(arr({shard({0, 0}, {both})}), "x", false), "0-0 h:6379");
  EXPECT_EQ(shards_of(arr({shard({0, 0}, {both})}), "x", true), "0-0 h:6380");
  EXPECT_EQ(shards_of(arr({shard({0, 0}, {tls_only})}), "x", false), "0-0 h:6380");
  EXPECT_EQ(shards_of(arr({shard({0, 0}, {ma})}), "x", true), "0-0 10.0.0.1:7000");
  EXPECT_EQ(shards_of(arr({shard({0, 0}, {neither})}), "x", false), "");
  // The endpoint: empty or nil is the host the reply came from, "?" or none the ip (empty: the same).
  auto node_with = [](const std::vector<std::string> &host_fields) {
    std::vector<std::string> f = {bulk("id"), bulk("a"), bulk("port"), num(1)};
    f.insert(f.end(), host_fields.begin(), host_fields.end());
    for (const char *s : {"role", "master", "health", "online"}) f.push_back(bulk(s));
    return arr({shard({0, 0}, {arr(f)})});
  };
  EXPECT_EQ(shards_of(node_with({bulk("ip"), bulk(""), bulk("endpoint"), bulk("")}), "f"), "0-0 f:1");
  EXPECT_EQ(shards_of(node_with({bulk("ip"), bulk("i"), bulk("endpoint"), nil()}), "f"), "0-0 f:1");
  EXPECT_EQ(shards_of(node_with({bulk("ip"), bulk("i"), bulk("endpoint"), bulk("?")}), "f"), "0-0 i:1");
  EXPECT_EQ(shards_of(node_with({bulk("ip"), bulk("i")}), "f"), "0-0 i:1");
  EXPECT_EQ(shards_of(node_with({bulk("ip"), bulk("")}), "f"), "0-0 f:1");
  EXPECT_EQ(
      shards_of(node_with({bulk("endpoint"), bulk("e"), bulk("ip"), bulk("i"), bulk("hostname"), bulk("n")}), "f"),
      "0-0 e:1");
  EXPECT_EQ(shards_of(node_with({bulk("endpoint"), bulk("?")}), "f"), "");
  EXPECT_EQ(shards_of(node_with({}), "f"), "");
  EXPECT_EQ(shards_of(node_with({bulk("ip"), bulk("")}), ""), "");
}

TEST(ClusterMap, MalformedShardsRepliesAreNullopt) {
  std::string ma = shards_node("aaaa", "10.0.0.1", 7000, "master");
  auto node = [](const std::vector<std::string> &fields) { return arr({shard({0, 1}, {arr(fields)})}); };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"an error", err("ERR unknown subcommand 'SHARDS'")},
      {"an integer", num(1)},
      {"nil", nil()},
      {"a string", bulk("x")},
      {"a shard that is no array", arr({num(1)})},
      {"a shard of nil", arr({nil()})},
      {"a shard of odd length", arr({arr({bulk("slots"), arr({}), bulk("nodes")})})},
      {"a shard's field name that is an integer", arr({arr({num(1), arr({}), bulk("nodes"), arr({})})})},
      {"a shard with no slots", arr({arr({bulk("nodes"), arr({ma})})})},
      {"a shard with no nodes", arr({arr({bulk("slots"), arr({num(0), num(1)})})})},
      {"slots that are a string", arr({arr({bulk("slots"), bulk("0-1"), bulk("nodes"), arr({ma})})})},
      {"nodes that are a string", arr({arr({bulk("slots"), arr({num(0), num(1)}), bulk("nodes"), bulk("x")})})},
      {"slots of odd length", arr({shard({0, 1, 2}, {ma})})},
      {"a slot that is a string", arr({arr({bulk("slots"), arr({bulk("0"), num(1)}), bulk("nodes"), arr({ma})})})},
      {"start after end", arr({shard({5, 4}, {ma})})},
      {"a slot past 16383", arr({shard({0, 16384}, {ma})})},
      {"a negative slot", arr({shard({-1, 0}, {ma})})},
      {"ranges that overlap in a shard", arr({shard({0, 10, 10, 20}, {ma})})},
      {"ranges that overlap across shards", arr({shard({0, 10}, {ma}), shard({5, 5}, {ma})})},
      {"a shard without a master overlapped", arr({shard({0, 10}, {}), shard({5, 5}, {ma})})},
      {"two online masters", arr({shard({0, 1}, {ma, shards_node("b", "h", 1, "master")})})},
      {"one id at two addresses",
       arr({shard({0, 1}, {ma}), shard({2, 3}, {shards_node("aaaa", "h", 7000, "master")})})},
      {"a node that is no array", arr({shard({0, 1}, {num(1)})})},
      {"a node of odd length", node({bulk("id")})},
      {"a node's field name that is an integer",
       node({num(1), bulk("x"), bulk("role"), bulk("master"), bulk("health"), bulk("online")})},
      {"a node's field of nil", node({bulk("role"), nil(), bulk("health"), bulk("online")})},
      {"a node with no role", node({bulk("port"), num(1), bulk("ip"), bulk("h"), bulk("health"), bulk("online")})},
      {"a node with no health", node({bulk("port"), num(1), bulk("ip"), bulk("h"), bulk("role"), bulk("master")})},
      {"a role that is an integer", node({bulk("role"), num(1), bulk("health"), bulk("online")})},
      {"a port that is a string",
       node({bulk("port"), bulk("1"), bulk("role"), bulk("master"), bulk("health"), bulk("online")})},
      {"a port past 65535",
       node({bulk("port"), num(65536), bulk("role"), bulk("master"), bulk("health"), bulk("online")})},
      {"a negative tls-port",
       node({bulk("tls-port"), num(-1), bulk("role"), bulk("master"), bulk("health"), bulk("online")})},
      {"an id that is an integer",
       node({bulk("id"), num(1), bulk("role"), bulk("master"), bulk("health"), bulk("online")})},
      {"an ip that is an array",
       node({bulk("ip"), arr({}), bulk("role"), bulk("master"), bulk("health"), bulk("online")})},
      {"an endpoint that is an integer",
       node({bulk("endpoint"), num(1), bulk("role"), bulk("master"), bulk("health"), bulk("online")})},
      {"an endpoint with a space", node({bulk("port"), num(1), bulk("endpoint"), bulk("a b"), bulk("role"),
                                         bulk("master"), bulk("health"), bulk("online")})},
      {"a replica's bad port", arr({shard({0, 1}, {ma, arr({bulk("port"), num(99999), bulk("role"), bulk("replica"),
                                                            bulk("health"), bulk("failed")})})})},
  };
  for (const auto &[what, resp] : cases) {
    ReplyPtr r = read_reply(resp);
    ASSERT_TRUE(r) << what;
    EXPECT_FALSE(parse_cluster_shards(r.get(), "127.0.0.1"))
        << what << ": " << summary(parse_cluster_shards(r.get(), "127.0.0.1"));
    EXPECT_FALSE(parse_cluster_shards(r.get(), "127.0.0.1", true)) << what;
  }
  EXPECT_FALSE(parse_cluster_shards(nullptr, "127.0.0.1"));
}

// Hostile sizes: a reply that names every slot many times, or many masters, costs no more than its size
// and the 16384 slots.
TEST(ClusterMap, BigRepliesStayCheap) {
  std::vector<std::string> entries;
  for (int s = 0; s < kClusterSlots; s++)
    entries.push_back(arr({num(s), num(s), slots_node("10.0.0.1", 1 + s % 60000, "n" + std::to_string(s))}));
  ReplyPtr every = read_reply(arr(entries));
  std::vector<std::string> same(20000, arr({num(0), num(16383), slots_node("h", 1, "a")}));
  ReplyPtr overlapping = read_reply(arr(same));
  std::vector<long long> pairs;
  for (int i = 0; i < 40000; i++) pairs.insert(pairs.end(), {0, 16383});
  ReplyPtr shards = read_reply(arr({shard(pairs, {shards_node("a", "h", 1, "master")})}));
  auto t0 = std::chrono::steady_clock::now();
  std::optional<ClusterMap> m = parse_cluster_slots(every.get(), "x");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->masters.size(), static_cast<size_t>(kClusterSlots));
  EXPECT_EQ(m->owned_slots(), static_cast<size_t>(kClusterSlots));
  EXPECT_EQ(m->master_of(12345)->id, "n12345");
  EXPECT_FALSE(parse_cluster_slots(overlapping.get(), "x"));
  EXPECT_FALSE(parse_cluster_shards(shards.get(), "x"));
  double ms = ms_since(t0);
  std::printf("[          ] 16384 masters, 20000 overlapping entries, 40000 overlapping ranges: %.1f ms\n", ms);
  EXPECT_LT(ms, 2000.0);
}

// ---- redirects and retries ----

TEST(ClusterMap, Redirects) {
  std::optional<Redirect> r = parse_redirect("MOVED 3999 127.0.0.1:6381");
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->ask);
  EXPECT_EQ(r->slot, 3999);
  EXPECT_EQ(r->to.host, "127.0.0.1");
  EXPECT_EQ(r->to.port, 6381);

  r = parse_redirect("ASK 3999 127.0.0.1:6381");
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->ask);
  EXPECT_EQ(r->slot, 3999);
  EXPECT_EQ(endpoint_text(r->to), "127.0.0.1:6381");

  // IPv6: the port follows the last colon; brackets, when there are, go.
  for (const char *e : {"MOVED 3999 ::1:6381", "MOVED 3999 [::1]:6381"}) {
    r = parse_redirect(e);
    ASSERT_TRUE(r) << e;
    EXPECT_EQ(r->to.host, "::1") << e;
    EXPECT_EQ(r->to.port, 6381) << e;
  }
  r = parse_redirect("ASK 0 2001:db8::7:65535");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->slot, 0);
  EXPECT_EQ(endpoint_text(r->to), "2001:db8::7:65535");
  // A hostname; the last slot.
  r = parse_redirect("MOVED 16383 redis-3.cache.example.com:7000");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->slot, 16383);
  EXPECT_EQ(endpoint_text(r->to), "redis-3.cache.example.com:7000");
  // unknown-endpoint: an empty host, the connection's.
  r = parse_redirect("MOVED 1 :6381");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->to.host, "");
  EXPECT_EQ(r->to.port, 6381);

  for (const char *e : {"",
                        "MOVED",
                        "MOVED ",
                        "MOVED 3999",
                        "MOVED 3999 ",
                        "MOVED 3999 127.0.0.1",
                        "MOVED 3999 127.0.0.1:",
                        "MOVED 3999 127.0.0.1:0",
                        "MOVED 3999 127.0.0.1:65536",
                        "MOVED 3999 127.0.0.1:-1",
                        "MOVED 3999 127.0.0.1:+1",
                        "MOVED 3999 127.0.0.1:63x",
                        "MOVED 3999 127.0.0.1:6381 extra",
                        "MOVED 3999 127.0.0.1:6381\r\n",
                        "MOVED 3999 ?:6381",
                        "MOVED 3999 []:6381",
                        "MOVED 3999 a b:6381",
                        "MOVED 16384 127.0.0.1:6381",
                        "MOVED 99999999999999999999 127.0.0.1:6381",
                        "MOVED -1 127.0.0.1:6381",
                        "MOVED +1 127.0.0.1:6381",
                        "MOVED x 127.0.0.1:6381",
                        "MOVED  3999 127.0.0.1:6381",
                        "MOVED 3999  127.0.0.1:6381",
                        " MOVED 3999 127.0.0.1:6381",
                        "moved 3999 127.0.0.1:6381",
                        "MOVEDX 3999 127.0.0.1:6381",
                        "ASKING",
                        "ASK",
                        "ASK 1",
                        "ERR MOVED 3999 127.0.0.1:6381",
                        "CLUSTERDOWN Hash slot not served",
                        "TRYAGAIN Multiple keys request during rehashing of slot"}) {
    EXPECT_FALSE(parse_redirect(e)) << ::testing::PrintToString(std::string(e));
  }
  EXPECT_FALSE(parse_redirect(std::string_view("MOVED 1 h\0x:1", 13)));
  EXPECT_FALSE(parse_redirect("MOVED 1 " + std::string(256, 'h') + ":1"));
  EXPECT_TRUE(parse_redirect("MOVED 1 " + std::string(255, 'h') + ":1"));
}

TEST(ClusterMap, ClusterDownAndTryAgain) {
  for (const char *e : {"CLUSTERDOWN The cluster is down", "CLUSTERDOWN Hash slot not served",
                        "CLUSTERDOWN The cluster is down and only accepts read commands", "CLUSTERDOWN"}) {
    EXPECT_TRUE(is_cluster_down(e)) << e;
    EXPECT_FALSE(is_try_again(e)) << e;
  }
  EXPECT_TRUE(is_try_again("TRYAGAIN Multiple keys request during rehashing of slot"));
  EXPECT_TRUE(is_try_again("TRYAGAIN"));
  for (const char *e : {"", "CLUSTERDOWNX", "ERR CLUSTERDOWN", "clusterdown The cluster is down", "CLUSTER DOWN",
                        "TRYAGAINX", "ERR TRYAGAIN", "MOVED 1 h:1"}) {
    EXPECT_FALSE(is_cluster_down(e)) << e;
    EXPECT_FALSE(is_try_again(e)) << e;
  }
}

// ---- one view completed from another (issue #60) ----

namespace {

// What every node of a 6-node Redis 7.4.1 cluster answered after a second failover (issue #60, as
// redis-cli --json printed it): CLUSTER SHARDS gives the promoted master's shard an empty "slots" beside
// the dead master (both "role": "master", the dead one listed first), CLUSTER SLOTS is right.
std::string issue60_node(std::string_view id, int port, std::string_view role, int offset, std::string_view health) {
  return arr({bulk("id"), bulk(id), bulk("port"), num(port), bulk("ip"), bulk("127.0.0.1"), bulk("endpoint"),
              bulk("127.0.0.1"), bulk("role"), bulk(role), bulk("replication-offset"), num(offset), bulk("health"),
              bulk(health)});
}
std::string issue60_shards() {
  return arr({
      shard({0, 5460}, {issue60_node("48817f0212d3c64dc9c5ff4f5950d340e457582a", 7501, "master", 68, "online"),
                        issue60_node("07ce0c4759bb97cea4a59f70500e360734cb6133", 7505, "replica", 68, "online")}),
      shard({5461, 10922}, {issue60_node("63cea0cd5a9409bf781b969791c4fd8d4d712d9f", 7502, "replica", 14, "online"),
                            issue60_node("f73434ee0552d15f27c3c81687197069eae72d16", 7506, "master", 14, "online")}),
      shard({}, {issue60_node("9c9c21da2edc563f27b521ead0dffb077ad529ba", 7503, "master", 14, "fail"),
                 issue60_node("28eab8eb4a8967d73e2f157ccb68e5d3519193b4", 7504, "master", 14, "online")}),
  });
}
std::string issue60_slots() {
  return arr({
      arr({num(0), num(5460), slots_node("127.0.0.1", 7501, "48817f0212d3c64dc9c5ff4f5950d340e457582a"),
           slots_node("127.0.0.1", 7505, "07ce0c4759bb97cea4a59f70500e360734cb6133")}),
      arr({num(5461), num(10922), slots_node("127.0.0.1", 7506, "f73434ee0552d15f27c3c81687197069eae72d16"),
           slots_node("127.0.0.1", 7502, "63cea0cd5a9409bf781b969791c4fd8d4d712d9f")}),
      arr({num(10923), num(16383), slots_node("127.0.0.1", 7504, "28eab8eb4a8967d73e2f157ccb68e5d3519193b4")}),
  });
}

const char *const kIssue60Whole =
    "0-5460 127.0.0.1:7501 [127.0.0.1:7505], 5461-10922 127.0.0.1:7506 [127.0.0.1:7502], 10923-16383 127.0.0.1:7504";

}  // namespace

TEST(ClusterMap, Issue60ShardsLeavesAThirdOfTheSlotsUnownedAndSlotsIsWhole) {
  ReplyPtr shards = read_reply(issue60_shards()), slots = read_reply(issue60_slots());
  ASSERT_TRUE(shards && slots);
  std::optional<ClusterMap> a = parse_cluster_shards(shards.get(), "127.0.0.1");
  ASSERT_TRUE(a) << "a shard without slots is a reply of the right shape";
  EXPECT_EQ(summary(*a), "0-5460 127.0.0.1:7501 [127.0.0.1:7505], 5461-10922 127.0.0.1:7506 [127.0.0.1:7502]");
  EXPECT_EQ(a->owned_slots(), 10923u);
  EXPECT_EQ(a->master_of(10923), nullptr);
  EXPECT_EQ(a->masters.size(), 2u) << "7504, online but with no slots listed, is no master of the map";
  std::optional<ClusterMap> b = parse_cluster_slots(slots.get(), "127.0.0.1");
  ASSERT_TRUE(b);
  EXPECT_EQ(summary(*b), kIssue60Whole);
  EXPECT_EQ(b->owned_slots(), static_cast<size_t>(kClusterSlots));
}

TEST(ClusterMap, Issue60ViewsCompletedFromEachOtherInEitherOrderAreWhole) {
  ReplyPtr shards = read_reply(issue60_shards()), slots = read_reply(issue60_slots());
  ASSERT_TRUE(shards && slots);
  std::optional<ClusterMap> a = parse_cluster_shards(shards.get(), "127.0.0.1");
  std::optional<ClusterMap> b = parse_cluster_slots(slots.get(), "127.0.0.1");
  ASSERT_TRUE(a && b);
  for (bool shards_first : {true, false}) {
    SCOPED_TRACE(shards_first ? "SHARDS, then SLOTS" : "SLOTS, then SHARDS");
    ClusterMap m = shards_first ? fill_unowned(*a, *b) : fill_unowned(*b, *a);
    EXPECT_EQ(summary(m), kIssue60Whole);
    EXPECT_EQ(m.owned_slots(), static_cast<size_t>(kClusterSlots));
    ASSERT_EQ(m.masters.size(), 3u) << "each master once";
    EXPECT_EQ(m.master_of(16383)->id, "28eab8eb4a8967d73e2f157ccb68e5d3519193b4");
    EXPECT_EQ(m.master_of(0)->id, "48817f0212d3c64dc9c5ff4f5950d340e457582a");
  }
  // Completed from itself, or from nothing, a view is what it was.
  EXPECT_EQ(summary(fill_unowned(*a, *a)), summary(*a));
  EXPECT_EQ(summary(fill_unowned(*a, ClusterMap())), summary(*a));
  EXPECT_EQ(summary(fill_unowned(ClusterMap(), *b)), kIssue60Whole);
}

TEST(ClusterMap, AnOwnedSlotKeepsItsMasterAndOnlyMastersThatFillSlotsAreAdded) {
  auto view = [](const std::string &resp) {
    ReplyPtr r = read_reply(resp);
    std::optional<ClusterMap> m = r ? parse_cluster_slots(r.get(), "x") : std::nullopt;
    EXPECT_TRUE(m) << resp;
    return m.value_or(ClusterMap());
  };
  ClusterMap first = view(arr({arr({num(0), num(99), slots_node("a", 1, "ida"), slots_node("r", 9, "idr")})}));
  // Another view says b serves 50-199, and c 300-399 (unowned in the first), and a (by its endpoint, under
  // another id) 200-299.
  ClusterMap second = view(
      arr({arr({num(50), num(199), slots_node("b", 2, "idb")}), arr({num(200), num(299), slots_node("a", 1, "other")}),
           arr({num(300), num(399), slots_node("c", 3, "idc")})}));
  ClusterMap m = fill_unowned(first, second);
  EXPECT_EQ(summary(m), "0-99 a:1 [r:9], 100-199 b:2, 200-299 a:1 [r:9], 300-399 c:3");
  ASSERT_EQ(m.masters.size(), 3u);
  EXPECT_EQ(m.masters[0].id, "ida") << "the first view's master, its id and replicas kept";
  // A master of the other view that fills no slot is not added (every master of a map owns a slot).
  ClusterMap shadowed = view(arr({arr({num(0), num(99), slots_node("z", 26, "idz")})}));
  ClusterMap n = fill_unowned(first, shadowed);
  EXPECT_EQ(summary(n), summary(first));
  EXPECT_EQ(n.masters.size(), 1u);
}

TEST(ClusterMap, AReplyHeadIsItsFirst200BytesOfResp) {
  ReplyPtr shards = read_reply(issue60_shards());
  ASSERT_TRUE(shards);
  std::string head = reply_head(shards.get());
  EXPECT_EQ(head, issue60_shards().substr(0, 200)) << "the bytes the node sent, cut";
  for (const std::string &resp :
       {issue60_slots(), err("ERR unknown subcommand"), nil(), num(-3), bulk(""), std::string("+OK\r\n"), arr({})}) {
    ReplyPtr r = read_reply(resp);
    ASSERT_TRUE(r);
    EXPECT_EQ(reply_head(r.get(), 100000), resp);
    EXPECT_EQ(reply_head(r.get(), 7), resp.substr(0, 7));
  }
  EXPECT_EQ(reply_head(nullptr), "<no reply>");
}

// After a failover, a shard may list its failed old master first (still "master", health "fail") and the
// promoted one after it: the slots are the online master's, whichever order; the failed one is no replica.
// CLUSTER SLOTS names a range's master first by definition; a failed master it still names (a view from
// before the failover) is that view's owner, corrected by the next node's view (cluster_sources_test.cpp).
TEST(ClusterMap, AShardsFailedMasterListedFirstLeavesItsSlotsToTheOnlineOne) {
  std::string failed = shards_node("dead", "10.0.0.9", 7009, "master", "fail");
  std::string promoted = shards_node("bbbb", "10.0.0.2", 7001, "master");
  std::string replica = shards_node("cccc", "10.0.0.3", 7002, "replica");
  EXPECT_EQ(shards_of(arr({shard({0, 16383}, {failed, promoted, replica})})), "0-16383 10.0.0.2:7001 [10.0.0.3:7002]");
  EXPECT_EQ(shards_of(arr({shard({0, 16383}, {promoted, failed, replica})})), "0-16383 10.0.0.2:7001 [10.0.0.3:7002]");
  EXPECT_EQ(shards_of(arr({shard({0, 16383}, {shards_node("dead", "10.0.0.9", 7009, "replica", "fail"), promoted})})),
            "0-16383 10.0.0.2:7001");
}
