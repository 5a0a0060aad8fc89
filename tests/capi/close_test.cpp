// fw_client_close: the client's life in the ABI. Calls after close are FW_ECLOSED (never a crash), calls
// in progress finish first, and every async admit pending on the store has its callback called exactly
// once before close returns. ASan and TSan run these (make test-sanitizers).
#include <floodwall.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "../core/redis_server.hpp"

using floodwall::testing::RedisServer;

namespace {

fw_client *make(const std::string &policy) {
  fw_client *c = nullptr;
  if (fw_client_new(&c, policy.c_str()) != FW_OK) std::abort();
  return c;
}

fw_request request(const char *tenant) {
  fw_request r = FW_REQUEST_INIT;
  r.tenant = tenant;
  r.tenant_len = std::strlen(tenant);
  return r;
}

// Counts each admit's callbacks: a second call for one admit is a failure.
struct Pending {
  std::atomic<int> calls{0};
  std::atomic<int> status{0};
};

void on_decision(void *payload, int status, const fw_decision *) {
  auto *p = static_cast<Pending *>(payload);
  p->status.store(status);
  p->calls.fetch_add(1);
}

const char *kMemory = R"({"store": "memory://", "request_rate": {"rate": 1000, "burst": 1000}})";

}  // namespace

TEST(Close, NullIsANoOpAndASecondCloseIsHarmless) {
  EXPECT_EQ(fw_client_close(nullptr), FW_OK);
  fw_client *c = make(kMemory);
  EXPECT_EQ(fw_client_close(c), FW_OK);
  EXPECT_EQ(fw_client_close(c), FW_OK);
  fw_client_free(c);
}

TEST(Close, EveryCallAfterCloseIsEclosed) {
  fw_client *c =
      make(R"({"store": "memory://", "request_rate": {"rate": 1, "burst": 1}, "concurrency": {"limit": 5}})");
  fw_request r = request("t");
  fw_decision d = FW_DECISION_INIT;
  ASSERT_EQ(fw_admit(c, &r, &d), FW_OK);
  fw_ticket held = d.ticket;
  ASSERT_NE(held, 0u);
  ASSERT_EQ(fw_client_close(c), FW_OK);

  EXPECT_EQ(fw_admit(c, &r, &d), FW_ECLOSED);
  EXPECT_EQ(fw_error_last()->code, FW_ECLOSED);
  EXPECT_NE(std::string(fw_error_last()->message).find("closed"), std::string::npos);
  Pending p;
  int completed = -1;
  EXPECT_EQ(fw_admit_async2(c, &r, on_decision, &p, &completed), FW_ECLOSED);
  EXPECT_EQ(p.calls.load(), 0) << "refused before it was taken: no callback";
  EXPECT_EQ(completed, 0);
  EXPECT_EQ(fw_release(c, held), FW_ECLOSED);
  EXPECT_EQ(fw_release(c, 0), FW_OK) << "the zero ticket stays a no-op";
  EXPECT_EQ(fw_set_mode(c, FW_LIMITER_REQUEST_RATE, FW_MODE_DARK), FW_ECLOSED);
  fw_mode m;
  EXPECT_EQ(fw_get_mode(c, FW_LIMITER_REQUEST_RATE, &m), FW_ECLOSED);
  EXPECT_EQ(fw_report_utilization(c, 0.5), FW_ECLOSED);
  fw_buf b = FW_BUF_INIT;
  EXPECT_EQ(fw_metrics_json(c, &b), FW_ECLOSED);
  EXPECT_EQ(fw_metrics_prometheus(c, &b), FW_ECLOSED);
  EXPECT_EQ(fw_tenant_key(c, &r, &b), FW_ECLOSED);
  EXPECT_EQ(fw_format_body(c, &d, &b), FW_ECLOSED);
  int can_block = 0;
  EXPECT_EQ(fw_client_can_block(c, &can_block), FW_ECLOSED);
  fw_buf_dispose(&b);
  fw_client_free(c);
}

// Threads admit, blocking and async, while another closes: each call returns OK or ECLOSED, each
// callback of an accepted async admit is called exactly once, and nothing crashes.
TEST(Close, ClosingWhileManyThreadsAdmit) {
  RedisServer redis;
  for (const std::string &policy : {std::string(kMemory), R"({"store": ")" + redis.url() +
                                                              R"(", "request_rate": {"rate": 1000, "burst": 1000}})"}) {
    fw_client *c = make(policy);
    std::atomic<bool> stop{false};
    std::atomic<int> ok{0}, closed{0}, other{0};
    std::vector<std::unique_ptr<Pending>> pendings;
    std::mutex pendings_mu;
    std::vector<std::thread> ts;
    for (int i = 0; i < 4; i++)
      ts.emplace_back([&, i] {
        fw_request r = request(i % 2 ? "odd" : "even");
        while (!stop.load()) {
          int rc;
          if (i < 2) {
            fw_decision d = FW_DECISION_INIT;
            rc = fw_admit(c, &r, &d);
            if (rc == FW_OK) rc = fw_release(c, d.ticket);
          } else {
            auto p = std::make_unique<Pending>();
            rc = fw_admit_async2(c, &r, on_decision, p.get(), nullptr);
            if (rc == FW_OK) {
              std::lock_guard lock(pendings_mu);
              pendings.push_back(std::move(p));
            }
          }
          (rc == FW_OK ? ok : rc == FW_ECLOSED ? closed : other)++;
          if (rc == FW_ECLOSED) break;
        }
      });
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_EQ(fw_client_close(c), FW_OK);
    // Close returned: every async admit it accepted has been decided.
    {
      std::lock_guard lock(pendings_mu);
      for (const auto &p : pendings) EXPECT_EQ(p->calls.load(), 1);
    }
    stop = true;
    for (auto &t : ts) t.join();
    EXPECT_GT(ok.load(), 0) << policy;
    EXPECT_EQ(other.load(), 0) << policy;
    for (const auto &p : pendings) EXPECT_EQ(p->calls.load(), 1) << "exactly once";
    fw_client_free(c);
  }
}

// Async admits waiting on a stalled Redis are decided by close (the fallback), before it returns.
TEST(Close, AdmitsPendingOnAStalledRedisAreDecidedBeforeCloseReturns) {
  RedisServer redis;
  fw_client *c = make(R"({"store": ")" + redis.url() +
                      R"(", "redis": {"deadline_ms": 1000}, "request_rate": {"rate": 1000, "burst": 1000}})");
  fw_request r = request("stalled");
  fw_decision d = FW_DECISION_INIT;
  ASSERT_EQ(fw_admit(c, &r, &d), FW_OK);  // connected
  redis.pause();
  std::vector<Pending> waiting(50);
  for (Pending &p : waiting) ASSERT_EQ(fw_admit_async2(c, &r, on_decision, &p, nullptr), FW_OK);
  int decided_before = 0;
  for (Pending &p : waiting) decided_before += p.calls.load();
  EXPECT_LT(decided_before, 50) << "they wait on Redis (deadline 1 s)";
  EXPECT_EQ(fw_client_close(c), FW_OK);
  for (Pending &p : waiting) EXPECT_EQ(p.calls.load(), 1);
  redis.resume();
  fw_client_free(c);
}

// The binding comment this settles: freeing (without close) a client with admits pending on the store
// decides them too, each once, and does not crash.
TEST(Close, FreeingWithAdmitsPendingDecidesThemOnce) {
  RedisServer redis;
  fw_client *c = make(R"({"store": ")" + redis.url() +
                      R"(", "redis": {"deadline_ms": 1000}, "request_rate": {"rate": 1000, "burst": 1000}})");
  fw_request r = request("freed");
  fw_decision d = FW_DECISION_INIT;
  ASSERT_EQ(fw_admit(c, &r, &d), FW_OK);
  redis.pause();
  std::vector<Pending> waiting(20);
  for (Pending &p : waiting) ASSERT_EQ(fw_admit_async2(c, &r, on_decision, &p, nullptr), FW_OK);
  fw_client_free(c);
  for (Pending &p : waiting) EXPECT_EQ(p.calls.load(), 1);
  redis.resume();
}

namespace {
struct InlineClose {
  fw_client *c;
  int rc = 0;
};
void close_from_callback(void *payload, int, const fw_decision *) {
  auto *p = static_cast<InlineClose *>(payload);
  p->rc = fw_client_close(p->c);
}
}  // namespace

TEST(Close, FromACallbackRunInlineIsRefused) {
  fw_client *c = make(kMemory);
  fw_request r = request("inline");
  InlineClose p{c};
  int completed = 0;
  ASSERT_EQ(fw_admit_async2(c, &r, close_from_callback, &p, &completed), FW_OK);
  ASSERT_EQ(completed, 1) << "memory:// decides inline";
  EXPECT_EQ(p.rc, FW_EINVAL);
  fw_decision d = FW_DECISION_INIT;
  EXPECT_EQ(fw_admit(c, &r, &d), FW_OK) << "still open";
  EXPECT_EQ(fw_client_close(c), FW_OK);
  fw_client_free(c);
}

namespace {
struct Async3Result {
  std::atomic<int> calls{0};
  std::atomic<int> status{1};
  std::atomic<bool> on_caller_thread{false};
  std::atomic<bool> had_message{false};
  std::thread::id caller;
  fw_decision d = FW_DECISION_INIT;
};
void on_async3(void *payload, int status, const fw_decision *d, const char *message) {
  auto *r = static_cast<Async3Result *>(payload);
  r->d = *d;
  r->status = status;
  r->had_message = message != nullptr;
  r->on_caller_thread = std::this_thread::get_id() == r->caller;
  r->calls++;
}
}  // namespace

TEST(AsyncNeverInline, AnImmediateDecisionComesBackThroughTheOutParameter) {
  fw_client *c = make(R"({"store": "memory://", "request_rate": {"rate": 1, "burst": 2}})");
  fw_request r = request("inline3");
  for (int i = 0; i < 3; i++) {
    Async3Result res;
    res.caller = std::this_thread::get_id();
    fw_decision d = FW_DECISION_INIT;
    int decided = -1;
    ASSERT_EQ(fw_admit_async3(c, &r, &d, &decided, on_async3, &res), FW_OK);
    EXPECT_EQ(decided, 1);
    EXPECT_EQ(d.allowed, i < 2 ? 1 : 0);
    EXPECT_EQ(res.calls.load(), 0) << "never called back for a decision made at once";
  }
  // A bad request: its error here, no callback.
  Async3Result res;
  fw_request bad = request("");
  bad.cost = 1000;
  fw_decision d = FW_DECISION_INIT;
  int decided = -1;
  EXPECT_EQ(fw_admit_async3(c, &bad, &d, &decided, on_async3, &res), FW_EINVAL);
  EXPECT_EQ(decided, 0);
  EXPECT_EQ(res.calls.load(), 0);
  EXPECT_EQ(fw_admit_async3(c, &r, nullptr, &decided, on_async3, &res), FW_EINVAL);
  fw_client_close(c);
  EXPECT_EQ(fw_admit_async3(c, &r, &d, &decided, on_async3, &res), FW_ECLOSED);
  fw_client_free(c);
}

TEST(AsyncNeverInline, ARedisDecisionIsCalledBackOnceFromAnotherThread) {
  RedisServer redis;
  fw_client *c = make(R"({"store": ")" + redis.url() + R"(", "request_rate": {"rate": 1, "burst": 2}})");
  fw_request r = request("redis3");
  std::vector<std::unique_ptr<Async3Result>> results;
  int immediate = 0;
  for (int i = 0; i < 20; i++) {
    auto res = std::make_unique<Async3Result>();
    res->caller = std::this_thread::get_id();
    fw_decision d = FW_DECISION_INIT;
    int decided = -1;
    ASSERT_EQ(fw_admit_async3(c, &r, &d, &decided, on_async3, res.get()), FW_OK);
    if (decided) {
      immediate++;
      EXPECT_EQ(res->calls.load(), 0);
    }
    results.push_back(std::move(res));
  }
  int allowed = 0;
  for (int i = 0; i < 500; i++) {
    int done = 0;
    for (const auto &res : results) done += res->calls.load();
    if (done + immediate == 20) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  for (const auto &res : results) {
    if (res->calls.load() == 0) continue;
    EXPECT_EQ(res->calls.load(), 1);
    EXPECT_EQ(res->status.load(), FW_OK);
    EXPECT_FALSE(res->had_message.load());
    EXPECT_FALSE(res->on_caller_thread.load()) << "never inline";
    allowed += res->d.allowed;
  }
  EXPECT_LT(immediate, 20) << "Redis answers later, through the callback";
  EXPECT_EQ(allowed, 2) << "the bucket of 2";
  EXPECT_EQ(fw_client_close(c), FW_OK);
  fw_client_free(c);
}
