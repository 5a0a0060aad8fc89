// rediss+sentinel:// against a real Sentinel deployment that speaks TLS (sentinel_redis.hpp with
// SentinelOptions::tls: a master, a replica and three sentinels, each on a TLS port beside its plain one,
// replication and the sentinels' links over TLS; certificates from tls_redis.hpp, SAN IP:127.0.0.1). The
// client must ask the sentinels over TLS and reach the master they name over TLS, both verified against
// redis.tls.ca_file by each server's own address; follow a SENTINEL FAILOVER over TLS; show the client
// certificate to sentinels and data nodes alike when they ask for one; and, when the sentinels cannot be
// verified, leave every decision to the fallback without anything reaching Redis.
#include <floodwall.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <utility>

#include "admits.hpp"
#include "capture_stderr.hpp"
#include "sentinel_redis.hpp"
#include "tls_redis.hpp"

using floodwall::testing::admit;
using floodwall::testing::Admitter;
using floodwall::testing::answered_within;
using floodwall::testing::by_store;
using floodwall::testing::CaptureStderr;
using floodwall::testing::client;
using floodwall::testing::count;
using floodwall::testing::rate_key;
using floodwall::testing::reason_within;
using floodwall::testing::SentinelTopology;
using floodwall::testing::TlsCerts;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

SentinelTopology::Options tls_topology(bool mutual = false) {
  SentinelTopology::Options o;  // (GCC warns of designated initializers that leave a member out)
  o.tls = &TlsCerts::shared();
  o.tls_mutual = mutual;
  return o;
}

// `tls`: the members of redis.tls, e.g. ca_file().
std::string policy(const std::string &url, const std::string &tls,
                   const std::string &limits = R"("rate": 100000, "burst": 100000)") {
  return R"({"store": ")" + url + R"(", "redis": {"deadline_ms": 500, "tls": {)" + tls + R"(}}, "request_rate": {)" +
         limits + "}}";
}

std::string ca_file(const std::string &path = TlsCerts::shared().ca()) {
  return R"("ca_file": ")" + path + "\"";
}

std::string client_cert() {
  const TlsCerts &certs = TlsCerts::shared();
  return R"("cert_file": ")" + certs.client_cert() + R"(", "key_file": ")" + certs.client_key() + "\"";
}

struct Tally {
  int allowed = 0, by_store = 0, degraded = 0, failed_open = 0, config = 0, connection = 0, breaker = 0, total = 0;
};

Tally admits(fw_client *c, const std::string &tenant, int n) {
  Tally t;
  for (int i = 0; i < n; i++) {
    fw_decision d = admit(c, tenant);
    t.total++;
    t.allowed += d.allowed;
    t.by_store += by_store(d);
    t.degraded += d.degraded;
    t.failed_open += d.failed_open;
    t.config += d.fail_reason == FW_FAIL_CONFIG;
    t.connection += d.fail_reason == FW_FAIL_CONNECTION;
    t.breaker += d.fail_reason == FW_FAIL_BREAKER;
  }
  return t;
}

}  // namespace

// The sentinels are asked over TLS (the URL names only their TLS ports) and name the master's TLS port;
// the master answers every admit (a bucket of 5: exactly 5 of 8 allowed), its key is there and reaches the
// replica over TLS, and nothing is said on stderr.
TEST(SentinelTls, AdmitsThroughTlsSentinelsAreDecidedByTheMaster) {
  auto t0 = Clock::now();
  SentinelTopology topo("fwmaster", tls_topology());
  RecordProperty("start_s", std::to_string(seconds_since(t0)));
  std::string url = topo.sentinel_url("rediss+sentinel://");
  auto sentinels = topo.sentinel_ports();
  ASSERT_EQ(url, "rediss+sentinel://127.0.0.1:" + std::to_string(sentinels[0]) + ",127.0.0.1:" +
                     std::to_string(sentinels[1]) + ",127.0.0.1:" + std::to_string(sentinels[2]) + "/fwmaster");
  int master = topo.master_port();
  ASSERT_EQ(master, topo.data_ports()[0]);
  ASSERT_NE(master, topo.admin_port(master)) << "the sentinels name the master's TLS port";

  CaptureStderr err;
  fw_client *c = client(policy(url, ca_file(), R"("rate": 1, "burst": 5)"));
  ASSERT_NE(c, nullptr);
  Tally t = admits(c, "over-tls", 8);
  EXPECT_EQ(t.by_store, 8) << "every decision the master's";
  EXPECT_EQ(t.degraded, 0);
  EXPECT_EQ(t.failed_open, 0);
  EXPECT_EQ(t.allowed, 5) << "the bucket of 5, in Redis";
  fw_client_free(c);
  std::string said = err.text();
  EXPECT_EQ(said.find("floodwall:"), std::string::npos) << "nothing to say: " << said;

  EXPECT_EQ(topo.command(master, {"EXISTS", rate_key("over-tls")}), "1") << "the bucket is on the master";
  int replica = topo.data_ports()[1];
  std::string on_replica;
  for (int i = 0; i < 100 && on_replica != "1"; i++) {
    if (i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    on_replica = topo.command(replica, {"EXISTS", rate_key("over-tls")});
  }
  EXPECT_EQ(on_replica, "1") << "replicated over TLS";
}

// SENTINEL FAILOVER: the client follows the new master over TLS within seconds, never failing open; a
// tenant admitted afterwards lands on the new master only (the old one still says master, and takes
// writes, for seconds after the sentinels named the new one).
TEST(SentinelTls, AFailoverIsFollowedOverTls) {
  SentinelTopology topo("fwmaster", tls_topology());
  fw_client *c = client(policy(topo.sentinel_url("rediss+sentinel://"), ca_file()));
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(answered_within(c, "through", 5));
  int old_master = topo.master_port();
  Admitter a(c);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto asked = Clock::now();
  topo.failover();
  int new_master = topo.wait_master_changed(old_master, 20);
  auto changed = Clock::now();
  ASSERT_NE(new_master, -1);
  ASSERT_NE(new_master, old_master);
  EXPECT_EQ(new_master, topo.data_ports()[1]) << "the replica's TLS port";
  bool resumed = false;
  while (Clock::now() - changed < std::chrono::seconds(5) && !resumed) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    resumed = a.last_store_ns.load() > changed.time_since_epoch().count();
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  a.join();
  std::printf(
      "SENTINEL FAILOVER over TLS: the sentinels agreed %.2f s after it was asked; at most %.3f s between two "
      "store answers; %lld decisions, %lld by the store, %lld by the fallback, %lld failed open\n",
      std::chrono::duration<double>(changed - asked).count(), static_cast<double>(a.max_gap_ns.load()) / 1e9,
      static_cast<long long>(a.total), static_cast<long long>(a.store), static_cast<long long>(a.fallback),
      static_cast<long long>(a.failed_open));
  EXPECT_TRUE(resumed) << "store answers within 5 s of the sentinels naming the new master";
  EXPECT_EQ(a.failed_open.load(), 0);
  EXPECT_EQ(a.store + a.fallback, a.total);

  EXPECT_TRUE(by_store(admit(c, "moved")));
  fw_client_free(c);
  EXPECT_EQ(topo.command(new_master, {"EXISTS", rate_key("moved")}), "1") << "the client writes to the new master";
  EXPECT_EQ(topo.command(old_master, {"EXISTS", rate_key("moved")}), "0") << "and not to the old one";
}

// Sentinels and data nodes that ask for a client certificate (tls-auth-clients yes): redis.tls.cert_file and
// key_file are shown to both, and the master answers. Without them the sentinels refuse us: the deployment's,
// so config, said once naming the TLS failure, and the fallback decides.
TEST(SentinelTls, MutualTlsShowsTheClientCertificateToSentinelsAndMaster) {
  SentinelTopology topo("fwmaster", tls_topology(/*mutual=*/true));
  std::string url = topo.sentinel_url("rediss+sentinel://");
  fw_client *c = client(policy(url, ca_file() + ", " + client_cert(), R"("rate": 1, "burst": 5)"));
  ASSERT_NE(c, nullptr);
  Tally t = admits(c, "mutual", 8);
  fw_client_free(c);
  EXPECT_EQ(t.by_store, 8);
  EXPECT_EQ(t.allowed, 5);
  EXPECT_EQ(topo.command(topo.master_port(), {"EXISTS", rate_key("mutual")}), "1");

  CaptureStderr err;
  c = client(policy(url, ca_file(), R"("rate": 1, "burst": 5)"));
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(reason_within(c, "warm-up", FW_FAIL_CONFIG, 5)) << "once the sentinels were asked";
  t = admits(c, "no-cert", 20);
  fw_client_free(c);
  std::string said = err.text();
  EXPECT_EQ(t.by_store, 0);
  EXPECT_EQ(t.degraded, 20);
  EXPECT_EQ(t.failed_open, 0);
  EXPECT_EQ(t.allowed, 5) << "the local fallback still limits";
  EXPECT_EQ(t.config, 20) << said;
  EXPECT_EQ(count(said, "TLS to the sentinels at "), 1u) << said;
  EXPECT_EQ(count(said, "no sentinel answered"), 0u) << said;
  EXPECT_EQ(topo.command(topo.master_port(), {"EXISTS", rate_key("no-cert")}), "0");
}

// Sentinels whose certificate the client cannot verify (another CA, the system's CA bundle that does not know
// the test CA, another name) are never asked: the fallback decides every admit, never failing open, and
// nothing reaches the master. As for rediss:// to one server (tls_test.cpp), a CA or name that does not match
// is the deployment's, which no wait mends: config, said once with what failed.
TEST(SentinelTls, SentinelsThatCannotBeVerifiedLeaveTheFallbackDeciding) {
  SentinelTopology topo("fwmaster", tls_topology());
  std::string url = topo.sentinel_url("rediss+sentinel://");
  const std::pair<std::string, std::string> cases[] = {
      {"rogue CA", ca_file(TlsCerts::shared().rogue_ca())},
      {"the system's CA bundle", ""},
      {"another name", ca_file() + R"(, "server_name": "other.example")"},
  };
  for (const auto &[what, tls] : cases) {
    CaptureStderr err;
    auto t0 = Clock::now();
    fw_client *c = client(policy(url, tls, R"("rate": 1, "burst": 5)"));
    ASSERT_NE(c, nullptr) << what;
    EXPECT_LT(Clock::now() - t0, std::chrono::seconds(2)) << what << ": the client is made within the connect time-out";
    ASSERT_TRUE(reason_within(c, "warm-up", FW_FAIL_CONFIG, 5)) << what << ": once the sentinels were asked";
    Tally t = admits(c, "unverified", 20);
    std::this_thread::sleep_for(std::chrono::milliseconds(600));  // asked again in the background meanwhile
    fw_client_free(c);
    std::string said = err.text();
    EXPECT_EQ(t.by_store, 0) << what;
    EXPECT_EQ(t.degraded, 20) << what;
    EXPECT_EQ(t.failed_open, 0) << what;
    EXPECT_EQ(t.allowed, 5) << what << ": the local fallback still limits";
    EXPECT_EQ(t.config, 20) << what << ": " << said;
    EXPECT_EQ(count(said, "TLS to the sentinels at "), 1u) << what << ": " << said;
    EXPECT_NE(said.find("TLS verification failed"), std::string::npos) << what << ": " << said;
    EXPECT_EQ(count(said, "no sentinel answered"), 0u) << what << ": " << said;
  }
  EXPECT_EQ(topo.command(topo.master_port(), {"DBSIZE"}), "0") << "no admit reached the master";
  // The same deployment with the right CA: answered.
  fw_client *c = client(policy(url, ca_file()));
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(answered_within(c, "verified", 5));
  fw_client_free(c);
}

// Sentinels that answer anyone, data nodes that ask for a client certificate (tls-auth-clients yes on them
// only): a client without one finds the master and is refused there. That is the deployment's: every
// decision the fallback's, counted as config, said once naming the server's alert and the master (not a
// sentinel), nothing in Redis.
TEST(SentinelTls, AMasterThatRefusesTheClientIsConfigSaidOnce) {
  SentinelTopology::Options o = tls_topology();
  o.extra_args = {"--tls-auth-clients", "yes"};  // the data nodes only (after the harness' own "no")
  SentinelTopology topo("fwmaster", o);
  std::string url = topo.sentinel_url("rediss+sentinel://");
  int master = topo.master_port();
  CaptureStderr err;
  fw_client *c = client(policy(url, ca_file(), R"("rate": 1, "burst": 5)"));
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(reason_within(c, "warm-up", FW_FAIL_CONFIG, 5)) << "once the master refused us";
  Tally first = admits(c, "no-cert", 20);
  std::this_thread::sleep_for(std::chrono::milliseconds(600));  // reconnects meanwhile
  Tally later = admits(c, "no-cert", 20);
  fw_client_free(c);
  std::string said = err.text();
  for (const Tally &t : {first, later}) {
    EXPECT_EQ(t.by_store, 0) << said;
    EXPECT_EQ(t.config, 20) << said;
    EXPECT_EQ(t.failed_open, 0);
  }
  EXPECT_EQ(first.allowed, 5) << "the local fallback still limits";
  EXPECT_EQ(count(said, "floodwall: TLS to Redis at "), 1u) << said;
  EXPECT_NE(said.find("certificate required"), std::string::npos) << said;
  EXPECT_EQ(count(said, "no sentinel answered"), 0u) << "the sentinels answered: " << said;
  EXPECT_NE(said.find("TLS to Redis at 127.0.0.1:" + std::to_string(master) + " failed"), std::string::npos) << said;
  EXPECT_EQ(topo.command(master, {"DBSIZE"}), "0") << "no admit reached the master";

  // With the client certificate: answered.
  c = client(policy(url, ca_file() + ", " + client_cert()));
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(answered_within(c, "with-cert", 5));
  fw_client_free(c);
}
