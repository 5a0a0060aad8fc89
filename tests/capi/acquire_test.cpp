// fw_acquire through the C ABI: it waits for the caller's turn and says how long (fw_decision version 5),
// refuses at once beyond max_wait, names max_wait when it is bad, never writes past an older decision, and
// decides from the local fallback when Redis cannot answer.
#include <floodwall.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <floodwall.hpp>
#include <limits>
#include <string>

#include "../core/redis_server.hpp"

namespace {

fw_request request(const char *tenant, uint64_t cost = 1) {
  fw_request r = FW_REQUEST_INIT;
  r.tenant = tenant;
  r.tenant_len = std::strlen(tenant);
  r.cost = cost;
  return r;
}

std::string last_error() {
  const fw_error *e = fw_error_last();
  return e && e->message ? e->message : "";
}

}  // namespace

TEST(CapiAcquire, WaitsForItsTurnAndSaysHowLong) {
  floodwall::Client fw(R"({"request_rate": {"rate": 20, "burst": 1}})");
  fw_request r = request("t");
  fw_decision first = FW_DECISION_INIT;
  ASSERT_EQ(fw_acquire(fw.get(), &r, 1.0, &first), FW_OK);
  EXPECT_TRUE(first.allowed);
  EXPECT_EQ(first.waited_s, 0.0);
  fw_decision second = FW_DECISION_INIT;
  ASSERT_EQ(fw_acquire(fw.get(), &r, 1.0, &second), FW_OK);
  EXPECT_TRUE(second.allowed);
  EXPECT_EQ(second.status, 200);
  EXPECT_GT(second.waited_s, 0.0);
  EXPECT_LE(second.waited_s, 0.05) << "one token at 20/s";
  fw_release(fw.get(), second.ticket);
  // Admit gives no wait.
  fw_decision admitted = FW_DECISION_INIT;
  ASSERT_EQ(fw_admit(fw.get(), &r, &admitted), FW_OK);
  EXPECT_EQ(admitted.waited_s, 0.0);
}

TEST(CapiAcquire, BeyondMaxWaitIsAnAdmitsRefusal) {
  floodwall::Client fw(R"({"request_rate": {"rate": 1, "burst": 1}})");
  fw_request r = request("t");
  fw_decision d = FW_DECISION_INIT;
  ASSERT_EQ(fw_acquire(fw.get(), &r, 0.5, &d), FW_OK);
  ASSERT_TRUE(d.allowed);
  fw_decision refused = FW_DECISION_INIT;
  ASSERT_EQ(fw_acquire(fw.get(), &r, 0.5, &refused), FW_OK);  // its turn: 1 s away
  EXPECT_FALSE(refused.allowed);
  EXPECT_EQ(refused.status, 429);
  EXPECT_EQ(refused.limiter, FW_LIMITER_REQUEST_RATE);
  EXPECT_GE(refused.retry_after_s, 1);
  EXPECT_EQ(refused.waited_s, 0.0);
}

TEST(CapiAcquire, BadMaxWaitIsEinvalNamingIt) {
  floodwall::Client fw(R"({"request_rate": {"rate": 10, "burst": 1}})");
  fw_request r = request("t");
  for (double bad : {-1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    fw_decision d = FW_DECISION_INIT;
    EXPECT_EQ(fw_acquire(fw.get(), &r, bad, &d), FW_EINVAL) << bad;
    EXPECT_NE(last_error().find("max_wait"), std::string::npos) << last_error();
  }
  fw_decision d = FW_DECISION_INIT;
  ASSERT_EQ(fw_admit(fw.get(), &r, &d), FW_OK);
  EXPECT_TRUE(d.allowed) << "the refused calls took nothing";
  EXPECT_EQ(fw_acquire(fw.get(), &r, 1.0, nullptr), FW_EINVAL);
  EXPECT_NE(last_error().find("out"), std::string::npos);
  EXPECT_EQ(fw_acquire(nullptr, &r, 1.0, &d), FW_EINVAL);
  fw_request over = request("t", 5);
  EXPECT_EQ(fw_acquire(fw.get(), &over, 1.0, &d), FW_EINVAL) << "a cost above the burst";
  EXPECT_NE(last_error().find("cost"), std::string::npos);
}

// A caller built against the version 4 header: it gets its fields, and not one byte past them.
TEST(CapiAcquire, AVersionFourDecisionGetsNoWaitedField) {
  floodwall::Client fw(R"({"request_rate": {"rate": 20, "burst": 1}})");
  fw_request r = request("t");
  constexpr size_t kV4 = offsetof(fw_decision, waited_s);
  alignas(fw_decision) unsigned char buf[sizeof(fw_decision) + 16];
  for (int i = 0; i < 2; i++) {
    std::memset(buf, 0xAB, sizeof buf);
    fw_decision init = FW_DECISION_INIT;
    init.version = 4;
    std::memcpy(buf, &init, kV4);
    ASSERT_EQ(fw_acquire(fw.get(), &r, 1.0, reinterpret_cast<fw_decision *>(buf)), FW_OK);
    fw_decision got;
    std::memcpy(&got, buf, kV4);
    EXPECT_TRUE(got.allowed);
    for (size_t b = kV4; b < sizeof buf; b++) ASSERT_EQ(buf[b], 0xAB) << "byte " << b << " written";
  }
}

// Redis does not answer (nothing listens): the local fallback decides, with its own bucket's wait.
TEST(CapiAcquire, TheLocalFallbackDecidesWhenRedisCannot) {
  int port = floodwall::testing::free_port();
  floodwall::Client fw(R"({"store": "redis://127.0.0.1:)" + std::to_string(port) +
                       R"(/0", "redis": {"deadline_ms": 50, "connect_timeout_ms": 50, "fallback": "local"},
                           "request_rate": {"rate": 20, "burst": 1}})");
  fw_request r = request("t");
  fw_decision first = FW_DECISION_INIT, second = FW_DECISION_INIT;
  ASSERT_EQ(fw_acquire(fw.get(), &r, 1.0, &first), FW_OK);
  ASSERT_EQ(fw_acquire(fw.get(), &r, 1.0, &second), FW_OK);
  EXPECT_TRUE(first.allowed && first.degraded);
  EXPECT_TRUE(second.allowed && second.degraded);
  EXPECT_NE(second.fail_reason, FW_FAIL_NONE);
  EXPECT_GT(second.waited_s, 0.0) << "the fallback table's bucket made it wait";
  EXPECT_LE(second.waited_s, 0.05);
}
