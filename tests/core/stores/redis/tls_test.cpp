// rediss:// against real redis-servers that speak TLS (tls_redis.hpp: certificates made by openssl in
// the test), ACL users, and Redis refusing TIME inside scripts. Every failure of the deployment (a CA
// that did not sign the server, another server name, a client certificate missing, a wrong password,
// TIME refused) must be decided by the fallback, counted as config, said once on stderr without the
// password, and leave no trace in Redis.
#include <arpa/inet.h>
#include <fcntl.h>
#include <floodwall.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "capture_stderr.hpp"
#include "tls_redis.hpp"

using floodwall::testing::CaptureStderr;
using floodwall::testing::count;
using floodwall::testing::TlsCerts;
using floodwall::testing::TlsRedisServer;

namespace {

struct Tally {
  int allowed = 0, by_store = 0, config = 0, total = 0;
};

Tally admits(fw_client *c, const std::string &tenant, int n) {
  Tally t;
  for (int i = 0; i < n; i++) {
    fw_request r = FW_REQUEST_INIT;
    r.tenant = tenant.data();
    r.tenant_len = tenant.size();
    fw_decision d = FW_DECISION_INIT;
    if (fw_admit(c, &r, &d) != FW_OK) std::abort();
    t.total++;
    t.allowed += d.allowed;
    t.by_store += !d.degraded && !d.failed_open && d.fail_reason == FW_FAIL_NONE;
    t.config += d.fail_reason == FW_FAIL_CONFIG;
  }
  return t;
}

std::string rate_key(const std::string &tenant) {
  return "floodwall:{" + tenant + "}:rate";
}

// A client for the policy, or null with the error's message in `error`.
fw_client *client(const std::string &policy, std::string *error = nullptr) {
  fw_client *c = nullptr;
  if (fw_client_new(&c, policy.c_str()) != FW_OK) {
    if (error) *error = fw_error_last()->message;
    return nullptr;
  }
  return c;
}

std::string tls_policy(const TlsRedisServer &redis, const std::string &tls, const std::string &more = "",
                       const std::string &url = "") {
  return R"({"store": ")" + (url.empty() ? redis.url() : url) + R"(", "redis": {"deadline_ms": 1000, "tls": {)" + tls +
         "}" + more + R"(}, "request_rate": {"rate": 1, "burst": 5}})";
}

std::string ca(const TlsCerts &certs = TlsCerts::shared()) {
  return R"("ca_file": ")" + certs.ca() + "\"";
}

}  // namespace

TEST(Tls, AdmitsOverTlsAreDecidedByRedisAsOverTcp) {
  TlsRedisServer redis;
  fw_client *c = client(tls_policy(redis, ca()));
  ASSERT_NE(c, nullptr);
  Tally t = admits(c, "over-tls", 8);
  EXPECT_EQ(t.by_store, 8);
  EXPECT_EQ(t.allowed, 5) << "the bucket of 5, in Redis";
  EXPECT_NE(redis.command({"GET", rate_key("over-tls")}), "<nil>");
  fw_client_free(c);
}

TEST(Tls, MutualTlsNeedsTheClientCertificate) {
  TlsRedisServer::Options o;
  o.mutual = true;
  TlsRedisServer redis(o);
  const TlsCerts &certs = TlsCerts::shared();
  fw_client *c = client(tls_policy(
      redis, ca() + R"(, "cert_file": ")" + certs.client_cert() + R"(", "key_file": ")" + certs.client_key() + "\""));
  ASSERT_NE(c, nullptr);
  Tally t = admits(c, "mutual", 6);
  EXPECT_EQ(t.by_store, 6);
  EXPECT_EQ(t.allowed, 5);
  fw_client_free(c);

  // Without a certificate, or with one of another CA, the server refuses. In TLS 1.3 it says so after
  // our side of the handshake ended, in an alert before it closes: read, it makes the failure config
  // (said once); a connection that breaks before the alert is read counts as a broken connection. Either
  // way the fallback decides and nothing reaches Redis.
  const std::string wrong[] = {ca(), ca() + R"(, "cert_file": ")" + certs.rogue_client_cert() + R"(", "key_file": ")" +
                                         certs.rogue_client_key() + "\""};
  int config = 0;
  for (const std::string &tls : wrong) {
    CaptureStderr err;
    c = client(tls_policy(redis, tls));
    ASSERT_NE(c, nullptr);
    t = admits(c, "refused-" + std::to_string(&tls - wrong), 20);
    fw_client_free(c);
    std::string said = err.text();
    EXPECT_EQ(t.by_store, 0) << tls;
    EXPECT_EQ(t.allowed, 5) << "the local fallback still limits";
    config += t.config;
    EXPECT_EQ(count(said, "floodwall: TLS to Redis"), t.config > 0 ? 1u : 0u) << said;
    if (t.config > 0) {
      EXPECT_NE(said.find("alert"), std::string::npos) << said;
    }
  }
  EXPECT_GT(config, 0) << "the server's alert was read at least once";
  EXPECT_EQ(redis.command({"DBSIZE"}), "1") << "only the first client's bucket";
}

TEST(Tls, AServerOurCaDidNotSignOrAnotherNameIsNeverAsked) {
  TlsRedisServer redis;
  const TlsCerts &certs = TlsCerts::shared();
  const std::pair<std::string, const char *> cases[] = {
      {R"("ca_file": ")" + certs.rogue_ca() + "\"", "certificate"},
      {ca() + R"(, "server_name": "other.example")", "hostname mismatch"},
      {"", "certificate"},  // the system's CA bundle does not know the test CA
  };
  for (const auto &[tls, reason] : cases) {
    CaptureStderr err;
    fw_client *c = client(tls_policy(redis, tls));
    ASSERT_NE(c, nullptr) << tls;
    Tally t = admits(c, "unverified", 20);
    fw_client_free(c);
    std::string said = err.text();
    EXPECT_EQ(t.by_store, 0) << tls;
    EXPECT_EQ(t.config, 20) << tls << ": " << said;
    EXPECT_EQ(t.allowed, 5) << "the local fallback still limits";
    EXPECT_EQ(count(said, "TLS verification failed"), 1u) << "said once: " << said;
    EXPECT_NE(said.find(reason), std::string::npos) << said;
  }
  EXPECT_EQ(redis.command({"DBSIZE"}), "0") << "no admit reached the server";
  // The name it was told to verify, and that name is the certificate's: verified and answered.
  fw_client *c = client(tls_policy(redis, ca() + R"(, "server_name": "localhost")"));
  EXPECT_EQ(admits(c, "by-name", 3).by_store, 3);
  fw_client_free(c);
}

TEST(Tls, InsecureSkipsVerificationAndSaysSoOnce) {
  TlsRedisServer redis;
  CaptureStderr err;
  fw_client *a = client(tls_policy(redis, R"("insecure": true, "server_name": "other.example")"));
  fw_client *b = client(tls_policy(redis, R"("insecure": true)"));
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(admits(a, "insecure", 3).by_store, 3);
  EXPECT_EQ(admits(b, "insecure", 3).by_store, 3);
  fw_client_free(a);
  fw_client_free(b);
  std::string said = err.text();
  EXPECT_LE(count(said, "redis.tls.insecure"), 1u) << "once per process: " << said;
}

TEST(Tls, BadTlsSettingsArePolicyErrorsNamingTheField) {
  TlsRedisServer redis;
  const TlsCerts &certs = TlsCerts::shared();
  const std::pair<std::string, std::string> cases[] = {
      {tls_policy(redis, R"("ca_file": "/nonexistent/ca.pem")"),
       "redis.tls.ca_file: cannot read \"/nonexistent/ca.pem\""},
      {tls_policy(redis, R"("cert_file": ")" + certs.client_cert() + "\""), "redis.tls.key_file"},
      {tls_policy(redis, R"("key_file": ")" + certs.client_key() + "\""), "redis.tls.cert_file"},
      {tls_policy(redis, R"("insecure": true, )" + ca()), "redis.tls.insecure"},
      {tls_policy(redis, R"("verify": false)"), "redis.tls.verify: unknown key"},
      {tls_policy(redis, ca(), "", "redis://127.0.0.1:" + std::to_string(redis.plain_port()) + "/0"), "redis.tls"},
      // A file that exists but is no certificate: refused when the client is made, naming the field.
      {tls_policy(redis, R"("ca_file": ")" + certs.client_key() + "\""), "redis.tls.ca_file"},
      {tls_policy(redis, ca() + R"(, "cert_file": ")" + certs.client_cert() + R"(", "key_file": ")" +
                             certs.rogue_client_key() + "\""),
       "redis.tls.key_file"},
  };
  for (const auto &[policy, field] : cases) {
    std::string error;
    fw_client *c = client(policy, &error);
    EXPECT_EQ(c, nullptr) << policy;
    if (c) fw_client_free(c);
    EXPECT_NE(error.find(field), std::string::npos) << "expected \"" << field << "\" in: " << error;
  }
}

TEST(Acl, AUserWithItsPasswordIsAnsweredAndAWrongPasswordNeverRunsAsTheDefaultUser) {
  TlsRedisServer redis;
  ASSERT_EQ(redis.command({"ACL", "SETUSER", "app", "on", ">right-pw", "~*", "+@all"}), "OK");
  std::string host = "127.0.0.1:" + std::to_string(redis.tls_port());
  fw_client *c = client(tls_policy(redis, ca(), "", "rediss://app:right-pw@" + host + "/0"));
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(admits(c, "acl-right", 3).by_store, 3);
  fw_client_free(c);

  // The default user can still run everything: a call behind a refused AUTH would succeed as it.
  for (bool direct : {true, false}) {
    CaptureStderr err;
    c = client(tls_policy(redis, ca(), direct ? "" : R"(, "connections": 1)", "rediss://app:wrong-pw@" + host + "/0"));
    ASSERT_NE(c, nullptr);
    Tally t;
    if (direct) {
      t = admits(c, "acl-wrong", 20);
    } else {
      // From several threads at once, so that the calls take the I/O thread's pipelined connections.
      std::vector<std::thread> ts;
      std::atomic<int> store{0}, config{0};
      for (int i = 0; i < 4; i++)
        ts.emplace_back([&] {
          Tally mine = admits(c, "acl-wrong", 10);
          store += mine.by_store;
          config += mine.config;
        });
      for (auto &th : ts) th.join();
      t.by_store = store;
      t.config = config;
      t.total = 40;
    }
    fw_client_free(c);
    std::string said = err.text();
    EXPECT_EQ(t.by_store, 0);
    EXPECT_EQ(t.config, t.total) << said;
    EXPECT_EQ(said.find("wrong-pw"), std::string::npos) << "never the password: " << said;
    EXPECT_NE(said.find("user \"app\""), std::string::npos) << "the user is named: " << said;
    EXPECT_LE(count(said, "refused the connection's setup"), 1u) << said;
  }
  EXPECT_EQ(redis.command({"EXISTS", rate_key("acl-wrong")}), "0") << "nothing ran as the default user";
}

TEST(Acl, UsernameAndPasswordFromThePolicyAndTheEnvironment) {
  TlsRedisServer redis;
  ASSERT_EQ(redis.command({"ACL", "SETUSER", "svc", "on", ">from-env", "~*", "+@all"}), "OK");
  setenv("FLOODWALL_TEST_REDIS_PW", "from-env", 1);
  fw_client *c = client(tls_policy(redis, ca(), R"(, "username": "svc", "password_env": "FLOODWALL_TEST_REDIS_PW")"));
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(admits(c, "env-user", 3).by_store, 3);
  fw_client_free(c);
  std::string error;
  unsetenv("FLOODWALL_TEST_REDIS_PW");
  EXPECT_EQ(client(tls_policy(redis, ca(), R"(, "password_env": "FLOODWALL_TEST_REDIS_PW")"), &error), nullptr);
  EXPECT_NE(error.find("redis.password_env: the environment variable FLOODWALL_TEST_REDIS_PW is not set"),
            std::string::npos)
      << error;
  setenv("FLOODWALL_TEST_REDIS_PW", "from-env", 1);
  std::string host = "127.0.0.1:" + std::to_string(redis.tls_port());
  EXPECT_EQ(client(tls_policy(redis, ca(), R"(, "password_env": "FLOODWALL_TEST_REDIS_PW")",
                              "rediss://svc:other@" + host + "/0"),
                   &error),
            nullptr);
  EXPECT_NE(error.find("redis.password_env"), std::string::npos) << error;
  EXPECT_EQ(error.find("other"), std::string::npos) << "never the URL's password: " << error;
  unsetenv("FLOODWALL_TEST_REDIS_PW");
}

TEST(RedisClock, ARefusedTimeIsAConfigErrorNamingTheOptionAndTheClientClockWorks) {
  TlsRedisServer::Options o;
  o.extra_args = {"--rename-command", "TIME", ""};
  TlsRedisServer redis(o);
  {
    CaptureStderr err;
    fw_client *c = client(tls_policy(redis, ca()));
    ASSERT_NE(c, nullptr);
    Tally t = admits(c, "no-time", 20);
    fw_client_free(c);
    std::string said = err.text();
    EXPECT_EQ(t.by_store, 0);
    EXPECT_EQ(t.config, 20) << said;
    EXPECT_EQ(t.allowed, 5) << "the local fallback still limits";
    EXPECT_EQ(count(said, "set redis.clock to \"client\""), 1u) << said;
  }
  fw_client *c = client(tls_policy(redis, ca(), R"(, "clock": "client")"));
  ASSERT_NE(c, nullptr);
  Tally t = admits(c, "client-clock", 8);
  EXPECT_EQ(t.by_store, 8);
  EXPECT_EQ(t.allowed, 5) << "the same bucket, on the client's clock";
  fw_client_free(c);
  std::string error;
  EXPECT_EQ(client(tls_policy(redis, ca(), R"(, "clock": "ntp")"), &error), nullptr);
  EXPECT_NE(error.find("redis.clock"), std::string::npos) << error;
}

// Four processes of four threads on one tenant over TLS: no more than burst + rate x time, as on TCP.
TEST(Tls, FourProcessesOverTlsStayWithinTheBucket) {
  TlsRedisServer redis;
  const double rate = 200;
  const int burst = 50;
  std::string pol = R"({"store": ")" + redis.url() + R"(", "redis": {"deadline_ms": 2000, "tls": {)" + ca() +
                    R"(}}, "request_rate": {"rate": 200, "burst": 50}})";
  void *mem = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  auto *shared = new (mem) std::atomic<int64_t>[3] {};
  auto redis_seconds = [&] { return floodwall::testing::time_reply_seconds(redis.command({"TIME"})); };
  double t0 = redis_seconds();
  auto start = std::chrono::steady_clock::now();
  std::vector<pid_t> kids;
  for (int p = 0; p < 4; p++) {
    pid_t pid = fork();
    if (pid == 0) {
      fw_client *c = client(pol);
      if (!c) _exit(2);
      std::vector<std::thread> ts;
      for (int i = 0; i < 4; i++)
        ts.emplace_back([&] {
          while (std::chrono::steady_clock::now() - start < std::chrono::milliseconds(1500)) {
            Tally t = admits(c, "tls-fleet", 1);
            shared[0] += t.allowed;
            shared[1] += t.by_store;
            shared[2] += t.total;
          }
        });
      for (auto &th : ts) th.join();
      fw_client_free(c);
      _exit(0);
    }
    kids.push_back(pid);
  }
  floodwall::testing::expect_children_exit_ok(kids);
  double elapsed = redis_seconds() - t0;
  EXPECT_EQ(shared[1].load(), shared[2].load()) << "every decision answered by Redis over TLS";
  EXPECT_LE(shared[0].load(), static_cast<int64_t>(burst + rate * elapsed) + 1) << elapsed << " s";
  EXPECT_GT(shared[0].load(), burst) << "the bucket refilled and was used";
  munmap(mem, 4096);
}

// A server that accepts the connection and never answers the handshake: the handshake counts inside
// connect_timeout_ms, so the client is made within it and the fallback decides meanwhile.
TEST(Tls, AHandshakeThatNeverEndsCountsInsideTheConnectTimeout) {
  int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr *>(&a), sizeof a), 0);
  ASSERT_EQ(listen(listener, 16), 0);
  socklen_t len = sizeof a;
  getsockname(listener, reinterpret_cast<sockaddr *>(&a), &len);
  std::string url = "rediss://127.0.0.1:" + std::to_string(ntohs(a.sin_port)) + "/0";
  std::string pol = R"({"store": ")" + url + R"(", "redis": {"connect_timeout_ms": 100, "deadline_ms": 50, "tls": {)" +
                    ca() + R"(}}, "request_rate": {"rate": 1, "burst": 5}})";
  fw_client *c = client(pol);
  ASSERT_NE(c, nullptr);
  Tally t = admits(c, "silent-server", 20);
  EXPECT_EQ(t.by_store, 0);
  EXPECT_EQ(t.allowed, 5) << "the local fallback decides";
  EXPECT_EQ(t.config, 0) << "silence is an outage, not a configuration error";
  fw_client_free(c);
  close(listener);
}

// A TLS server that stops answering (SIGSTOP) is an outage like a TCP one: the fallback decides within the
// deadline, and once it answers again the same client is answered by it.
TEST(Tls, AStalledServerIsAnOutageAndTheClientComesBack) {
  TlsRedisServer redis;
  fw_client *c = client(tls_policy(redis, ca(), R"(, "deadline_ms": 100, "breaker_open_ms": 200)"));
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(admits(c, "stall", 3).by_store, 3);
  redis.pause();
  Tally t = admits(c, "stall", 10);
  EXPECT_EQ(t.by_store, 0);
  EXPECT_EQ(t.config, 0);
  redis.resume();
  int by_store = 0;
  for (int i = 0; i < 300 && by_store == 0; i++) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    by_store = admits(c, "stall-after", 1).by_store;
  }
  EXPECT_EQ(by_store, 1) << "answered by Redis again over TLS";
  fw_client_free(c);
}
