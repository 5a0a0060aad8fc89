// What a sentinel may answer during a failover, and what the client makes of it (issue #60, part 3): a real
// Sentinel deployment (sentinel_redis.hpp) with a fake sentinel (fake_cluster_node.hpp: a small RESP server
// with canned replies) listed first, answering SENTINEL get-master-addr-by-name wrongly. A sentinel that has
// not heard of a failover names the old master: a replica by now (its ROLE says so) or gone. Either is
// doubted once the store found it no master, and another sentinel's answer is taken (a contradiction seen
// in one round of asking is said once). A sentinel that knows no such master, or whose reply is no address, is passed
// over (the latter said once: the sentinel, the command, the reply's first bytes). A master every sentinel names is
// kept after its connections broke.
#include <floodwall.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "admits.hpp"
#include "capture_stderr.hpp"
#include "fake_cluster_node.hpp"
#include "redis_server.hpp"
#include "sentinel_redis.hpp"

using floodwall::testing::admit;
using floodwall::testing::answered_within;
using floodwall::testing::by_store;
using floodwall::testing::CaptureStderr;
using floodwall::testing::client;
using floodwall::testing::command_at;
using floodwall::testing::count;
using floodwall::testing::FakeClusterNode;
using floodwall::testing::free_port;
using floodwall::testing::rate_key;
using floodwall::testing::SentinelTopology;
namespace resp = floodwall::testing::resp;

namespace {

std::string policy(const std::string &url) {
  return R"({"store": ")" + url +
         R"(", "redis": {"deadline_ms": 500}, "request_rate": {"rate": 100000, "burst": 100000}})";
}

// The command a fake sentinel is asked (its words upper-cased, as FakeClusterNode keys them).
const char *const kGetMaster = "SENTINEL GET-MASTER-ADDR-BY-NAME FWMASTER";

std::string address(int port) {
  return resp::arr({resp::bulk("127.0.0.1"), resp::bulk(std::to_string(port))});
}

// One deployment for the suite: no test changes which node is the master.
class SentinelAnswers : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { topo_ = new SentinelTopology(); }
  static void TearDownTestSuite() {
    delete topo_;
    topo_ = nullptr;
  }
  // The URL naming `first` ahead of the real sentinels.
  static std::string url_with_first(const std::vector<const FakeClusterNode *> &first) {
    std::string url = "redis+sentinel://";
    for (const FakeClusterNode *f : first) url += f->endpoint() + ",";
    return url + topo_->sentinel_url().substr(std::string("redis+sentinel://").size());
  }
  static int replica_port() {
    int master = topo_->master_port();
    for (int p : topo_->data_ports())
      if (p != master) return p;
    ADD_FAILURE() << "no replica";
    return -1;
  }
  // The tenant is decided by Redis within 5 s, then 50 times in a row, its bucket on the master.
  static void decided_on_the_master(fw_client *c, const std::string &tenant) {
    ASSERT_TRUE(answered_within(c, tenant, 5)) << tenant << ": never by Redis";
    int store = 0;
    for (int i = 0; i < 50; i++) store += by_store(admit(c, tenant));
    EXPECT_EQ(store, 50) << tenant;
    EXPECT_EQ(command_at(topo_->master_port(), {"EXISTS", rate_key(tenant)}), "1") << "the bucket is on the master";
  }
  static SentinelTopology *topo_;
};
SentinelTopology *SentinelAnswers::topo_ = nullptr;

}  // namespace

// The sentinel asked first names the replica (the old master, demoted by a failover it has not heard of):
// its ROLE says slave, so that answer is doubted and the next sentinel asked first. Nothing is said: that
// is what a failover looks like from here.
TEST_F(SentinelAnswers, ASentinelNamingAReplicaIsPassedOverForOneNamingTheMaster) {
  FakeClusterNode stale;
  stale.answer(kGetMaster, address(replica_port()));
  CaptureStderr err;
  fw_client *c = client(policy(url_with_first({&stale})));
  ASSERT_NE(c, nullptr);
  decided_on_the_master(c, "demoted");
  EXPECT_GE(stale.asked(kGetMaster), 1);
  fw_client_free(c);
  std::string text = err.text();
  EXPECT_EQ(count(text, "floodwall: "), 0u) << text;
}

// Two sentinels name the replica: the second still names it when asked after the store doubted it, while
// a real sentinel names the master. The master is taken, and the contradiction said once (the sentinel,
// what it names).
TEST_F(SentinelAnswers, SentinelsContradictingEachOtherAreSaidOnceAndTheMasterTaken) {
  int replica = replica_port();
  FakeClusterNode stale, staler;
  stale.answer(kGetMaster, address(replica));
  staler.answer(kGetMaster, address(replica));
  CaptureStderr err;
  fw_client *c = client(policy(url_with_first({&stale, &staler})));
  ASSERT_NE(c, nullptr);
  decided_on_the_master(c, "contradicted");
  fw_client_free(c);
  std::string text = err.text();
  std::printf("sentinels naming a replica: stderr: %s", text.c_str());
  EXPECT_EQ(count(text, "floodwall: "), 1u) << text;
  EXPECT_EQ(count(text, "sentinel " + staler.endpoint() + " names 127.0.0.1:" + std::to_string(replica)), 1u) << text;
}

// The sentinel asked first names an old master that is gone (nothing listens there): doubted once no
// connection to it could be made, and the next sentinel's answer taken.
TEST_F(SentinelAnswers, ASentinelNamingAGoneMasterIsPassedOverForOneNamingTheMaster) {
  FakeClusterNode stale;
  stale.answer(kGetMaster, address(free_port()));
  fw_client *c = client(policy(url_with_first({&stale})));
  ASSERT_NE(c, nullptr);
  decided_on_the_master(c, "gone");
  fw_client_free(c);
}

// A sentinel that monitors no master of that name (a null reply) is passed over, and nothing is said: the
// others know it.
TEST_F(SentinelAnswers, ASentinelThatKnowsNoSuchMasterIsPassedOverSilently) {
  FakeClusterNode blank;
  blank.answer(kGetMaster, "*-1\r\n");
  CaptureStderr err;
  fw_client *c = client(policy(url_with_first({&blank})));
  ASSERT_NE(c, nullptr);
  decided_on_the_master(c, "nameless");
  EXPECT_GE(blank.asked(kGetMaster), 1);
  fw_client_free(c);
  std::string text = err.text();
  EXPECT_EQ(count(text, "floodwall: "), 0u) << text;
}

// A reply that is no address (a port that is no number; an integer) is said once, naming the sentinel and
// the command and quoting the reply's first bytes, and the next sentinel is asked.
TEST_F(SentinelAnswers, AReplyThatIsNoAddressIsSaidOnceAndTheNextSentinelAsked) {
  FakeClusterNode word, number;
  word.answer(kGetMaster, resp::arr({resp::bulk("127.0.0.1"), resp::bulk("port")}));
  number.answer(kGetMaster, resp::num(6379));
  CaptureStderr err;
  fw_client *c = client(policy(url_with_first({&word, &number})));
  ASSERT_NE(c, nullptr);
  decided_on_the_master(c, "malformed");
  fw_client_free(c);
  std::string text = err.text();
  std::printf("replies that are no address: stderr: %s", text.c_str());
  EXPECT_EQ(count(text, "floodwall: "), 2u) << text;
  EXPECT_EQ(count(text, "sentinel " + word.endpoint() + " sent a SENTINEL get-master-addr-by-name reply"), 1u) << text;
  EXPECT_EQ(count(text, "sentinel " + number.endpoint() + " sent a SENTINEL get-master-addr-by-name reply"), 1u)
      << text;
  EXPECT_EQ(count(text, "127.0.0.1??$4??port"), 1u) << "its first bytes, printable: " << text;
}

// Every sentinel names the master, and the master's connections break (CLIENT KILL): it is doubted, asked
// about again, kept (no sentinel names another), and decides again; nothing is said.
TEST_F(SentinelAnswers, AMasterEverySentinelNamesIsKeptAfterItsConnectionsBroke) {
  FakeClusterNode one, two;
  int master = topo_->master_port();
  one.answer(kGetMaster, address(master));
  two.answer(kGetMaster, address(master));
  CaptureStderr err;
  std::string url = "redis+sentinel://" + one.endpoint() + "," + two.endpoint() + "/fwmaster";
  fw_client *c = client(policy(url));
  ASSERT_NE(c, nullptr);
  decided_on_the_master(c, "kept");
  int64_t asked = one.asked(kGetMaster) + two.asked(kGetMaster);
  command_at(master, {"CLIENT", "KILL", "TYPE", "normal"});
  ASSERT_TRUE(answered_within(c, "kept-after", 5));
  decided_on_the_master(c, "kept-after");
  EXPECT_GT(one.asked(kGetMaster) + two.asked(kGetMaster), asked) << "asked again once the connections broke";
  fw_client_free(c);
  std::string text = err.text();
  EXPECT_EQ(count(text, "floodwall: "), 0u) << text;
}
