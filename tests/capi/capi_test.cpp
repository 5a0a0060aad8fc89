// The C ABI as a C++ consumer sees it, through floodwall.hpp: status codes, the thread-local error,
// versioned structs, ownership of buffers, and no exception ever crossing the ABI.
#include <floodwall.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <floodwall.hpp>
#include <string>
#include <thread>
#include <vector>

#include "../core/redis_server.hpp"

namespace {

// `tenant` must outlive the request: string literals only.
fw_request request(const char *tenant) {
  fw_request r = FW_REQUEST_INIT;
  r.tenant = tenant;
  r.tenant_len = std::strlen(tenant);
  return r;
}

}  // namespace

TEST(CApi, VersionMatchesTheHeader) {
  EXPECT_STREQ(fw_version(), FW_VERSION_STRING);
}

// A caller built against the version 1 header passes the smaller struct: it gets its fields, and not one
// byte is written past them.
TEST(CApi, AVersionOneDecisionGetsItsFieldsAndNothingBeyond) {
  floodwall::Client fw(R"({"request_rate": {"rate": 1, "burst": 3}})");
  constexpr size_t kV1 = offsetof(fw_decision, degraded);
  alignas(fw_decision) unsigned char buf[sizeof(fw_decision) + 16];
  std::memset(buf, 0xAB, sizeof buf);
  fw_decision init = FW_DECISION_INIT;
  init.version = 1;
  std::memcpy(buf, &init, kV1);
  fw_request r = FW_REQUEST_INIT;
  r.tenant = "v1";
  r.tenant_len = 2;
  ASSERT_EQ(fw_admit(fw.get(), &r, reinterpret_cast<fw_decision *>(buf)), FW_OK);
  fw_decision got;
  std::memcpy(&got, buf, kV1);
  EXPECT_EQ(got.version, 1u);
  EXPECT_TRUE(got.allowed);
  EXPECT_EQ(got.remaining, 2);
  for (size_t i = kV1; i < sizeof buf; i++) ASSERT_EQ(buf[i], 0xAB) << "byte " << i << " written";
  fw_buf h = FW_BUF_INIT;
  ASSERT_EQ(fw_format_headers(fw.get(), reinterpret_cast<fw_decision *>(buf), &h), FW_OK) << "read as version 1";
  EXPECT_NE(std::string(h.ptr).find("RateLimit-Remaining: 2"), std::string::npos);
  fw_buf_dispose(&h);
  fw_decision future = FW_DECISION_INIT;
  future.version = FW_DECISION_VERSION + 1;
  EXPECT_EQ(fw_admit(fw.get(), &r, &future), FW_EINVAL);
  EXPECT_NE(std::string(fw_error_last()->message).find("decision.version"), std::string::npos);
}

TEST(CApi, BadPolicyIsAnErrorNamingTheField) {
  const char *cases[][2] = {
      {R"({"request_rate": {"rate": -5, "burst": 10}})", "request_rate.rate"},
      {R"({"request_rate": {"rate": NaN, "burst": 10}})", "request_rate.rate"},
      {R"({"request_rate": {"rate": 10, "burst": 0}})", "request_rate.burst"},
      {R"({"request_rate": {"rate": 10, "burst": 2.5}})", "request_rate.burst"},
      {R"({"request_rate": {"rate": 10}})", "request_rate.burst"},
      {R"({"request_rate": {"rate": 10, "burst": 10, "colour": "red"}})", "request_rate.colour"},
      {R"({"concurrency": {"limit": "many"}})", "concurrency.limit"},
      {R"({"concurrency": {"limit": 5, "ttl_s": 0}})", "concurrency.ttl_s"},
      {R"({"concurrency": {"limit": 5, "routes": "/v1"}})", "concurrency.routes"},
      {R"({"fleet": {"capacity": -1}})", "fleet.capacity"},
      {R"({"utilization": {"good": 0.9, "bad": 0.8}})", "utilization.bad"},
      {R"({"utilization": {"ramp_s": Infinity}})", "utilization.ramp_s"},
      {R"({"request_rate": {"rate": 1, "burst": 1, "mode": "loud"}})", "request_rate.mode"},
      {R"({"prefix": "a{b}"})", "prefix"},
      {R"({"unknown": 1})", "unknown"},
      {R"([1, 2])", "policy"},
      {R"({not json)", "policy"},
      {R"({"redis": {"deadline_ms": 0}})", "redis.deadline_ms"},
  };
  for (auto &c : cases) {
    fw_client *client = reinterpret_cast<fw_client *>(0x1);
    EXPECT_EQ(fw_client_new(&client, c[0]), FW_EPOLICY) << c[0];
    EXPECT_EQ(client, nullptr);
    const fw_error *e = fw_error_last();
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->code, FW_EPOLICY);
    EXPECT_NE(std::string(e->message).find(c[1]), std::string::npos) << e->message;
  }
  EXPECT_EQ(fw_client_new(nullptr, "{}"), FW_EINVAL);
  fw_client *client = nullptr;
  EXPECT_EQ(fw_client_new(&client, nullptr), FW_EPOLICY);
}

// A file's policy, read whole, and its errors: a file the client can make is the policy it holds; a NULL
// argument is FW_EINVAL, never a crash.
TEST(CApi, PolicyTextReadsAFileWholeAndTakesJsonTextAsItIs) {
  char path[] = "/tmp/fw-policy-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  std::string doc = R"({"request_rate": {"rate": 1, "burst": 3}})" + std::string(40000, ' ');  // beyond one read
  ASSERT_EQ(write(fd, doc.data(), doc.size()), static_cast<ssize_t>(doc.size()));
  close(fd);
  for (int is_path : {0, 1}) {
    fw_buf b = FW_BUF_INIT;
    ASSERT_EQ(fw_policy_text(path, is_path, &b), FW_OK) << fw_error_last()->message;
    EXPECT_EQ(std::string(b.ptr, b.size), doc);
    fw_client *fw = nullptr;
    ASSERT_EQ(fw_client_new(&fw, b.ptr), FW_OK);
    fw_decision d = FW_DECISION_INIT;
    fw_request r = request("acme");
    for (int i = 0; i < 4; i++) ASSERT_EQ(fw_admit(fw, &r, &d), FW_OK);
    EXPECT_FALSE(d.allowed) << "the file's burst of 3";
    fw_client_free(fw);
    fw_buf_dispose(&b);
  }
  unlink(path);
  fw_buf b = FW_BUF_INIT;
  EXPECT_EQ(fw_policy_text(nullptr, 0, &b), FW_EINVAL);
  EXPECT_EQ(fw_policy_text("{}", 0, nullptr), FW_EINVAL);
}

TEST(CApi, UnknownStoreSchemeIsAStoreError) {
  fw_client *c = nullptr;
  EXPECT_EQ(fw_client_new(&c, R"({"store": "mysql://db"})"), FW_ESTORE);
  EXPECT_NE(std::string(fw_error_last()->message).find("store"), std::string::npos);
}

TEST(CApi, EmptyPolicyAllowsEverythingWithoutHeaders) {
  floodwall::Client fw("{}");
  auto a = fw.admit("anyone");
  EXPECT_TRUE(a.allowed());
  EXPECT_EQ(a.status(), 200);
  EXPECT_EQ(a.headers(), "");
  EXPECT_EQ(a.body(), "");
}

TEST(CApi, HostileTenantIdsGetDefinedAnswers) {
  floodwall::Client fw(R"({"request_rate": {"rate": 1, "burst": 1}})");
  std::string megabyte(1 << 20, '{');
  std::string binary("a\0b\r\n}{", 7);
  for (const std::string &t : {megabyte, binary, std::string("\xff\xfe"), std::string(64, 'x'), std::string(65, 'x')}) {
    auto a = fw.admit(t);
    EXPECT_TRUE(a.allowed());
    std::string h = a.headers();
    for (unsigned char ch : h) EXPECT_TRUE((ch >= 0x20 && ch < 0x7f) || ch == '\r' || ch == '\n');
    EXPECT_EQ(h.find('{'), std::string::npos) << "no caller byte reaches a header";
    EXPECT_EQ(h.find("\r\n\r\n"), std::string::npos);
    EXPECT_FALSE(fw.admit(t).allowed()) << "each hostile id has its own bucket";
  }
  fw_request r = request("");
  fw_decision d = FW_DECISION_INIT;
  r.version = 1;  // a version 1 caller: an empty tenant is an error, as it always was
  EXPECT_EQ(fw_admit(fw.get(), &r, &d), FW_EINVAL);
  r.version = FW_REQUEST_VERSION;
  r.tenant = nullptr;
  r.tenant_len = 3;
  EXPECT_EQ(fw_admit(fw.get(), &r, &d), FW_EINVAL);
  EXPECT_EQ(fw_admit(fw.get(), nullptr, &d), FW_EINVAL);
  r = request("x");
  EXPECT_EQ(fw_admit(fw.get(), &r, nullptr), FW_EINVAL);
  r.version = 99;
  EXPECT_EQ(fw_admit(fw.get(), &r, &d), FW_EINVAL);
}

TEST(CApi, CostZeroMeansOneAndCostAboveTheBurstIsRejectedAsBadInput) {
  floodwall::Client fw(R"({"request_rate": {"rate": 1, "burst": 10}})");
  fw_request r = request("t");
  r.cost = 0;
  fw_decision d = FW_DECISION_INIT;
  ASSERT_EQ(fw_admit(fw.get(), &r, &d), FW_OK);
  EXPECT_EQ(d.remaining, 9);
  r.cost = 11;
  EXPECT_EQ(fw_admit(fw.get(), &r, &d), FW_EINVAL);
  EXPECT_NE(std::string(fw_error_last()->message).find("cost"), std::string::npos);
  r.cost = UINT64_MAX;
  EXPECT_EQ(fw_admit(fw.get(), &r, &d), FW_EINVAL);
  r.cost = 1;
  ASSERT_EQ(fw_admit(fw.get(), &r, &d), FW_OK);
  EXPECT_EQ(d.remaining, 8) << "the rejected costs spent nothing";
}

TEST(CApi, ReleaseIsIdempotentAndNeverFails) {
  floodwall::Client fw(R"({"concurrency": {"limit": 1}})");
  fw_request r = request("t");
  fw_decision d = FW_DECISION_INIT;
  ASSERT_EQ(fw_admit(fw.get(), &r, &d), FW_OK);
  ASSERT_NE(d.ticket, 0u);
  fw_decision second = FW_DECISION_INIT;
  ASSERT_EQ(fw_admit(fw.get(), &r, &second), FW_OK);
  EXPECT_FALSE(second.allowed);
  EXPECT_EQ(fw_release(fw.get(), d.ticket), FW_OK);
  EXPECT_EQ(fw_release(fw.get(), d.ticket), FW_OK);
  EXPECT_EQ(fw_release(fw.get(), 0), FW_OK);
  EXPECT_EQ(fw_release(fw.get(), 123456789), FW_OK);
  EXPECT_EQ(fw_release(nullptr, d.ticket), FW_OK);
  ASSERT_EQ(fw_admit(fw.get(), &r, &d), FW_OK);
  EXPECT_TRUE(d.allowed);
  fw_release(fw.get(), d.ticket);
}

TEST(CApi, RaiiAdmissionReleasesOnScopeExit) {
  floodwall::Client fw(R"({"concurrency": {"limit": 1}})");
  {
    auto a = fw.admit("t");
    EXPECT_TRUE(a.allowed());
    EXPECT_FALSE(fw.admit("t").allowed());
  }
  EXPECT_TRUE(fw.admit("t").allowed());
}

TEST(CApi, EnumsAreCheckedAndNamed) {
  floodwall::Client fw(R"({"request_rate": {"rate": 1, "burst": 1}})");
  EXPECT_EQ(fw_set_mode(fw.get(), static_cast<fw_limiter>(42), FW_MODE_OFF), FW_EINVAL);
  EXPECT_EQ(fw_set_mode(fw.get(), FW_LIMITER_REQUEST_RATE, static_cast<fw_mode>(9)), FW_EINVAL);
  // The fleet-wide mode checks its limiter as fw_set_mode does: 257 is not the request-rate limiter (256 + 1,
  // which a cast to the core's 8-bit enum once made it), and the request rate stays enforced.
  EXPECT_EQ(fw_admin_set_mode(fw.get(), static_cast<fw_limiter>(257), FW_MODE_OFF), FW_EINVAL);
  EXPECT_NE(std::string(fw_error_last()->message).find("limiter"), std::string::npos) << fw_error_last()->message;
  EXPECT_EQ(fw_admin_set_mode(fw.get(), static_cast<fw_limiter>(-1), FW_MODE_OFF), FW_EINVAL);
  EXPECT_TRUE(fw.admit("enforced").allowed());
  EXPECT_FALSE(fw.admit("enforced").allowed()) << "the request rate is still enforced";
  EXPECT_STREQ(fw_limiter_name(FW_LIMITER_CONCURRENCY), "concurrency");
  EXPECT_STREQ(fw_mode_name(FW_MODE_DARK), "dark");
  EXPECT_STREQ(fw_fail_reason_name(FW_FAIL_BREAKER), "breaker");
  EXPECT_STREQ(fw_limiter_name(static_cast<fw_limiter>(42)), "unknown");
  EXPECT_STREQ(fw_mode_name(static_cast<fw_mode>(-7)), "unknown");
  fw_mode m;
  EXPECT_EQ(fw_get_mode(fw.get(), FW_LIMITER_FLEET, &m), FW_OK);
  EXPECT_EQ(m, FW_MODE_OFF) << "an unconfigured limiter is off";
  EXPECT_EQ(fw_report_utilization(fw.get(), std::nan("")), FW_EINVAL);
  EXPECT_EQ(fw_report_utilization(fw.get(), -0.1), FW_EINVAL);
  EXPECT_EQ(fw_report_utilization(fw.get(), 0.5), FW_OK);
}

TEST(CApi, ErrorsAreThreadLocal) {
  fw_client *c = nullptr;
  EXPECT_EQ(fw_client_new(&c, "{\"bogus\": 1}"), FW_EPOLICY);
  std::string other;
  std::thread([&] {
    EXPECT_EQ(fw_error_last(), nullptr);
    fw_client *d = nullptr;
    fw_client_new(&d, "{\"fleet\": {\"capacity\": 0}}");
    other = fw_error_last()->message;
  }).join();
  EXPECT_NE(std::string(fw_error_last()->message).find("bogus"), std::string::npos);
  EXPECT_NE(other.find("fleet.capacity"), std::string::npos);
}

TEST(CApi, AsyncAdmitCallsBackExactlyOnceEvenForBadInput) {
  floodwall::Client fw(R"({"request_rate": {"rate": 1, "burst": 2}})");
  struct Seen {
    int calls = 0, status = 1, allowed = -1;
  } seen;
  auto cb = [](void *p, int status, const fw_decision *d) {
    auto *s = static_cast<Seen *>(p);
    s->calls++;
    s->status = status;
    s->allowed = d->allowed;
  };
  fw_request r = request("t");
  ASSERT_EQ(fw_admit_async(fw.get(), &r, cb, &seen), FW_OK);
  EXPECT_EQ(seen.calls, 1);
  EXPECT_EQ(seen.status, FW_OK);
  EXPECT_EQ(seen.allowed, 1);
  r.cost = 3;
  ASSERT_EQ(fw_admit_async(fw.get(), &r, cb, &seen), FW_OK);
  EXPECT_EQ(seen.calls, 2);
  EXPECT_EQ(seen.status, FW_EINVAL);
  EXPECT_EQ(fw_admit_async(fw.get(), &r, nullptr, nullptr), FW_EINVAL);
}

TEST(CApi, ManyThreadsOnOneTenantAdmitExactlyTheBurst) {
  floodwall::Client fw(R"({"request_rate": {"rate": 0.001, "burst": 1000}})");
  std::atomic<int> allowed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; t++)
    threads.emplace_back([&] {
      for (int i = 0; i < 500; i++) allowed += fw.admit("shared").allowed();
    });
  for (auto &t : threads) t.join();
  EXPECT_EQ(allowed.load(), 1000);
}

// A policy that names no store takes FLOODWALL_STORE from the environment (a store per deployment, one
// policy file); one that names its store keeps it; a bad URL there is named as the environment's.
TEST(CApi, APolicyWithoutAStoreTakesFloodwallStoreFromTheEnvironment) {
  floodwall::testing::RedisServer redis;
  const char *doc =
      R"({"prefix": "fwenv", "redis": {"deadline_ms": 2000}, "request_rate": {"rate": 0.001, "burst": 1}})";
  ASSERT_EQ(setenv("FLOODWALL_STORE", redis.url().c_str(), 1), 0);
  {
    floodwall::Client a(doc), b(doc);
    floodwall::Admission first = a.admit("t");
    EXPECT_TRUE(first.allowed());
    EXPECT_FALSE(first.decision().degraded) << "decided by Redis";
    EXPECT_FALSE(b.admit("t").allowed()) << "the other client shares the bucket: the store is Redis";
    floodwall::Client own(R"({"store": "memory://", "request_rate": {"rate": 0.001, "burst": 1}})");
    EXPECT_TRUE(own.admit("t").allowed()) << "a policy's own store wins over the environment";
  }
  ASSERT_EQ(setenv("FLOODWALL_STORE", "postgres://db:5432", 1), 0);
  fw_client *bad = nullptr;
  EXPECT_NE(fw_client_new(&bad, doc), FW_OK);
  EXPECT_EQ(bad, nullptr);
  EXPECT_EQ(std::string(fw_error_last()->message).rfind("FLOODWALL_STORE: ", 0), 0u) << fw_error_last()->message;
  ASSERT_EQ(setenv("FLOODWALL_STORE", "", 1), 0);  // empty: as if unset
  {
    floodwall::Client a(doc), b(doc);
    EXPECT_TRUE(a.admit("t").allowed());
    EXPECT_TRUE(b.admit("t").allowed()) << "memory://: each client its own";
  }
  unsetenv("FLOODWALL_STORE");
}
