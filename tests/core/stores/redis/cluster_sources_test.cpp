// The other topology sources of a Redis Cluster under the same scrutiny as CLUSTER SHARDS (issue #60, part 3),
// against a real cluster (cluster_redis.hpp: 3 masters, each with a replica) and, where a real server would
// not give the reply on demand, a fake node (fake_cluster_node.hpp) listed first: a node still loading its
// data (-LOADING to CLUSTER SHARDS and CLUSTER SLOTS) is passed over for the next seed; seeds that are all
// replicas lead to every master; a node of a server without CLUSTER SHARDS (before Redis 7) whose CLUSTER
// SLOTS still names a failed master for a range is corrected by the next view read. In each, every tenant is
// decided by Redis on its master, never by the fallback for a reason of the cluster.
#include <floodwall.h>
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "admits.hpp"
#include "capture_stderr.hpp"
#include "cluster_redis.hpp"
#include "cluster_tenants.hpp"
#include "fake_cluster_node.hpp"
#include "redis_server.hpp"
#include "stores/redis/cluster_map.hpp"

using floodwall::testing::admit;
using floodwall::testing::answered_within;
using floodwall::testing::by_store;
using floodwall::testing::CaptureStderr;
using floodwall::testing::client;
using floodwall::testing::ClusterSlotRange;
using floodwall::testing::ClusterTopology;
using floodwall::testing::count;
using floodwall::testing::FakeClusterNode;
using floodwall::testing::free_port;
using floodwall::testing::rate_key;
using floodwall::testing::tenants_on_masters;
namespace resp = floodwall::testing::resp;

namespace {

using json = nlohmann::json;

std::string policy(const std::string &url) {
  return R"({"store": ")" + url +
         R"(", "redis": {"deadline_ms": 500}, "request_rate": {"rate": 0.001, "burst": 1000}})";
}

// Every tenant of `on` decided on its master (cluster_tenants.hpp), and none of the client's decisions was
// the fallback's for a reason of the cluster.
void decided_by_their_masters(fw_client *c, const ClusterTopology &t,
                              const std::map<int, std::vector<std::string>> &on) {
  floodwall::testing::every_tenant_by_its_master(c, t, on);
  json m = floodwall::testing::metrics_json(c);
  EXPECT_EQ(m["store_failures"]["request_rate"]["cluster"].get<int64_t>(), 0) << m["store_failures"].dump();
}

// One healthy cluster for the suite: no test changes it.
class ClusterSources : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { topo_ = new ClusterTopology(); }
  static void TearDownTestSuite() {
    delete topo_;
    topo_ = nullptr;
  }
  static ClusterTopology *topo_;
};
ClusterTopology *ClusterSources::topo_ = nullptr;

}  // namespace

// The first seed is still loading its data: -LOADING to CLUSTER SHARDS and to CLUSTER SLOTS. It is passed
// over (an answer, but no view), the second seed's view is the whole map, and nothing is said.
TEST_F(ClusterSources, ANodeAnsweringLoadingIsPassedOverForTheNextSeed) {
  ClusterTopology &t = *topo_;
  auto on = tenants_on_masters(t, "loading", 2);
  ASSERT_EQ(on.size(), 3u);
  FakeClusterNode loading;
  const std::string err = resp::err("LOADING Redis is loading the dataset in memory");
  loading.answer("CLUSTER SHARDS", err);
  loading.answer("CLUSTER SLOTS", err);
  CaptureStderr said;
  fw_client *c = client(policy(t.url("redis+cluster://" + loading.endpoint() + ",", {t.master_ports().back()})));
  ASSERT_NE(c, nullptr);
  decided_by_their_masters(c, t, on);
  EXPECT_GE(loading.asked("CLUSTER SHARDS"), 1) << "the loading seed was asked first";
  fw_client_free(c);
  std::string text = said.text();
  EXPECT_EQ(count(text, "floodwall: "), 0u) << text;
}

// The client is given only the replicas: each one's view names every master, and every tenant is decided
// on its master (a replica never serves one: its bucket would be nowhere the others look).
TEST_F(ClusterSources, SeedsThatAreAllReplicasLeadToEveryMaster) {
  ClusterTopology &t = *topo_;
  auto replicas = t.replica_ports();
  ASSERT_EQ(replicas.size(), 3u);
  for (int r : replicas) ASSERT_EQ(t.command(r, {"ROLE"}).rfind("slave", 0), 0u) << r << " is a replica";
  auto on = tenants_on_masters(t, "replicaseeds", 2);
  ASSERT_EQ(on.size(), 3u);
  CaptureStderr said;
  fw_client *c = client(policy(t.url("redis+cluster://", replicas)));
  ASSERT_NE(c, nullptr);
  decided_by_their_masters(c, t, on);
  fw_client_free(c);
  std::string text = said.text();
  EXPECT_EQ(count(text, "floodwall: "), 0u) << text;
}

// A node of a server without CLUSTER SHARDS (before Redis 7: an unknown subcommand) whose CLUSTER SLOTS
// still names a failed master (nothing listens there) first for one master's range, listed first, and a
// real node second: that range's tenants are decided on their real master once its view was read.
TEST_F(ClusterSources, ClusterSlotsNamingAFailedMasterIsCorrectedByTheNextView) {
  using namespace floodwall::testing::resp;
  ClusterTopology &t = *topo_;
  auto ranges = t.slot_ranges();
  auto on = tenants_on_masters(t, "slotsonly", 2);
  ASSERT_EQ(on.size(), 3u);
  int failed = on.begin()->first, gone = free_port();
  std::vector<std::string> slots;
  for (const ClusterSlotRange &r : ranges) {
    std::vector<std::string> range = {num(r.start), num(r.end)};
    if (r.master == failed) range.push_back(arr({bulk("127.0.0.1"), num(gone), bulk(std::string(40, 'd')), arr({})}));
    range.push_back(arr({bulk("127.0.0.1"), num(r.master), bulk(r.master_id), arr({})}));
    slots.push_back(arr(range));
  }
  FakeClusterNode old;
  old.answer("CLUSTER SHARDS", err("ERR unknown subcommand 'shards'. Try CLUSTER HELP."));
  old.answer("CLUSTER SLOTS", arr(slots));
  fw_client *c = client(policy(t.url("redis+cluster://" + old.endpoint() + ",", {t.master_ports().back()})));
  ASSERT_NE(c, nullptr);
  decided_by_their_masters(c, t, on);
  EXPECT_GE(old.asked("CLUSTER SLOTS"), 1);
  fw_client_free(c);
}
