// Redis Cluster: an admit of two keys (the request rate and the concurrency) during a migration of its slot.
//
// Redis runs a script of two keys on a migrating slot only when both are on one side: while the bucket is at
// the source and the tenant's set is absent (nothing in flight), or the bucket moved and the set not, it
// answers TRYAGAIN, for as long as the migration lasts. The store then decides the admit as two one-key
// calls, each served through ASK (the set first, then the bucket, the slot given back when the bucket
// refuses): every admit is the store's, the bucket carries on exactly, the concurrency limit holds, and no
// slot is left behind.
#include <floodwall.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "admits.hpp"
#include "cluster_redis.hpp"
#include "stores/redis/cluster_map.hpp"

using floodwall::testing::admit;
using floodwall::testing::admit_held;
using floodwall::testing::by_store;
using floodwall::testing::client;
using floodwall::testing::ClusterTopology;
using floodwall::testing::rate_key;

namespace {}  // namespace

TEST(ClusterMigration, AnAdmitOfTwoKeysIsTheStoresThroughoutAndExact) {
  ClusterTopology t;
  // 12 tokens and 2 slots: the bucket runs out within the migration, and the set fills.
  fw_client *c = client(R"({"store": ")" + t.url() +
                        R"(", "redis": {"deadline_ms": 500}, "request_rate": {"rate": 0.001, "burst": 12},)"
                        R"( "concurrency": {"limit": 2, "ttl_s": 30}})");
  ASSERT_NE(c, nullptr);
  const std::string tenant = "two-keys";
  const std::string conc = "floodwall:{" + tenant + "}:conc";
  uint16_t slot = floodwall::key_slot(rate_key(tenant));
  int from = t.master_of_slot(slot);
  int to = -1;
  for (int m : t.master_ports())
    if (m != from && to < 0) to = m;
  ASSERT_GT(to, 0);

  int64_t tokens = 12;
  int not_store = 0;
  // One admit released at once: the bucket goes down by one while tokens last, then refuses (rate limit).
  auto one = [&](const char *phase) {
    fw_decision d = admit(c, tenant);
    if (!by_store(d)) {
      not_store++;
      ADD_FAILURE() << phase << ": not by the store (reason " << fw_fail_reason_name(d.fail_reason) << ")";
      return;
    }
    if (tokens > 0) {
      tokens--;
      EXPECT_TRUE(d.allowed) << phase;
      EXPECT_EQ(d.remaining, tokens) << phase << ": the bucket carries on";
    } else {
      EXPECT_FALSE(d.allowed) << phase;
      EXPECT_EQ(d.limiter, FW_LIMITER_REQUEST_RATE) << phase;
    }
  };
  one("before");
  one("before");
  // Each release is sent, not waited for: its ZREM may still be on the way.
  for (int i = 0; i < 100 && t.command(from, {"EXISTS", conc}) != "0"; i++)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ(t.command(from, {"EXISTS", conc}), "0") << "nothing in flight: no set";

  t.begin_migration(slot, from, to);
  // The bucket at the source, no set anywhere: TRYAGAIN to the two-key script. The set is made where a
  // missing key of a migrating slot goes, the target (ASK), and is empty again after each release.
  one("migrating, bucket at the source");
  one("migrating, bucket at the source");
  // Held slots: the set at the target, the bucket at the source; the limit holds across the two.
  fw_decision held = admit_held(c, tenant);
  ASSERT_TRUE(by_store(held) && held.allowed) << fw_fail_reason_name(held.fail_reason);
  tokens--;
  EXPECT_EQ(held.remaining, tokens);
  EXPECT_EQ(t.commands(to, {{"ASKING"}, {"ZCARD", conc}}), (std::vector<std::string>{"OK", "1"}))
      << "the held slot, in a set at the target";
  EXPECT_EQ(t.command(from, {"EXISTS", rate_key(tenant)}), "1") << "the bucket, at the source";
  fw_decision second = admit_held(c, tenant);
  ASSERT_TRUE(by_store(second) && second.allowed) << fw_fail_reason_name(second.fail_reason);
  tokens--;
  EXPECT_EQ(second.remaining, tokens);
  EXPECT_EQ(second.concurrency_remaining, 0);
  fw_decision third = admit_held(c, tenant);
  EXPECT_TRUE(by_store(third)) << fw_fail_reason_name(third.fail_reason);
  EXPECT_FALSE(third.allowed) << "two held: the concurrency limit";
  EXPECT_EQ(third.limiter, FW_LIMITER_CONCURRENCY);
  EXPECT_EQ(third.ticket, 0u);
  fw_release(c, second.ticket);  // to the set at the target, through ASK
  for (int i = 0; i < 100 && t.commands(to, {{"ASKING"}, {"ZCARD", conc}})[1] != "1"; i++)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(t.commands(to, {{"ASKING"}, {"ZCARD", conc}}), (std::vector<std::string>{"OK", "1"}));
  one("migrating, bucket at the source, set at the target");  // the refused request spent no token

  // The bucket moves too: both at the target, where the one script runs again (after ASKING).
  ASSERT_EQ(t.migrate_keys(slot, from, to, {rate_key(tenant)}), "OK");
  while (tokens > 0) one("migrating, both moved");
  one("migrating, both moved, the bucket empty");
  one("migrating, both moved, the bucket empty");
  // The last admit's release is sent, not waited for (as above).
  for (int i = 0; i < 100 && t.commands(to, {{"ASKING"}, {"ZCARD", conc}})[1] != "1"; i++)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(t.commands(to, {{"ASKING"}, {"ZCARD", conc}}), (std::vector<std::string>{"OK", "1"}))
      << "only the held slot";

  t.finish_migration(slot, to);
  one("finished");
  fw_release(c, held.ticket);  // through MOVED
  for (int i = 0; i < 100 && t.command(to, {"ZCARD", conc}) != "0"; i++)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(t.command(to, {"ZCARD", conc}), "0") << "every slot given back on the new owner";
  EXPECT_EQ(not_store, 0);
  std::printf("a two-key admit through a migration of slot %u from %d to %d: %d not by the store\n", slot, from, to,
              not_store);
  fw_client_free(c);
}
