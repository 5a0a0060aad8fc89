// engine/admin: tenants' control records (the admin API): an override, a tier, a block, kept in the store and read by
// the admit itself, so that a change applies to the next request of every client of the store.
#include <floodwall.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <floodwall.hpp>
#include <future>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "each_store.hpp"
#include "redis_server.hpp"
#include "stores/shm_store.hpp"

using floodwall::Admission;
using floodwall::Client;
using floodwall::testing::RedisServer;

namespace {

using floodwall::testing::StoreKind;
using Control = floodwall::testing::EachStore;

const char *kTiers = R"("request_rate": {"rate": 0.001, "burst": 2},
    "tiers": {"pro": {"rate": 0.001, "burst": 10, "limits": [{"name": "search", "routes": ["/search"], "rate": 0.001, "burst": 3}]}})";

int admitted(Client &fw, const std::string &tenant, int n, const char *route = "/") {
  int ok = 0;
  for (int i = 0; i < n; i++) ok += fw.admit(tenant, route).allowed();
  return ok;
}

void check(int rc) {
  ASSERT_EQ(rc, FW_OK) << fw_error_last()->message;
}

TEST_P(Control, AnOverrideAppliesToTheNextRequestAndGoesAway) {
  Client app(policy(kTiers));
  Client admin(shared() ? policy(kTiers) : policy(kTiers));
  Client &ops = shared() ? admin : app;
  EXPECT_EQ(admitted(app, "acct", 3), 2);
  check(fw_admin_set_override(ops.get(), "acct", 4, 0.001, 6));
  Admission a = app.admit("acct");
  ASSERT_TRUE(a.allowed()) << "the next request has the override's bucket (2 of 6 spent)";
  EXPECT_EQ(a.decision().limit, 6);
  EXPECT_EQ(a.decision().remaining, 3);
  EXPECT_EQ(admitted(app, "acct", 5), 3);
  check(fw_admin_remove_override(ops.get(), "acct", 4));
  Admission b = app.admit("acct");
  EXPECT_FALSE(b.allowed());
  EXPECT_EQ(b.decision().limit, 2);
  EXPECT_EQ(admitted(app, "other", 3), 2) << "another tenant keeps the policy's bucket";
}

TEST_P(Control, ATierGivesItsBucketAndItsLimits) {
  Client app(policy(kTiers));
  Client admin(policy(kTiers));
  Client &ops = shared() ? admin : app;
  check(fw_admin_set_tier(ops.get(), "acct", 4, "pro"));
  EXPECT_EQ(admitted(app, "acct", 5, "/search"), 3) << "pro's search limit";
  EXPECT_EQ(admitted(app, "acct", 10, "/other"), 7) << "pro's bucket of 10";
  fw_buf b = FW_BUF_INIT;
  check(fw_admin_show(ops.get(), "acct", 4, &b));
  auto j = nlohmann::json::parse(b.ptr);
  fw_buf_dispose(&b);
  EXPECT_EQ(j["tier"], "pro");
  EXPECT_EQ(j["request_rate"]["limit"], 10);
  EXPECT_EQ(j["request_rate"]["remaining"], 0);
  ASSERT_EQ(j["limits"].size(), 1u);
  EXPECT_EQ(j["limits"][0]["name"], "search");
  EXPECT_EQ(j["limits"][0]["remaining"], 0);
  EXPECT_EQ(j["blocked"], false);
  check(fw_admin_set_tier(ops.get(), "acct", 4, nullptr));
  Admission back = app.admit("acct", "/search");
  EXPECT_FALSE(back.allowed()) << "back in no tier: the policy's bucket of 2 (spent)";
  EXPECT_EQ(back.decision().limit, 2);
  EXPECT_EQ(back.decision().rules, 0u);
}

// An asynchronous admit that learns the tenant's tier from the store decides again in that tier, for the
// tenant the caller named: an id over 64 bytes is kept as its hash, and was once hashed again into another
// tenant, with no tier and a bucket of its own.
TEST_P(Control, AnAsyncAdmitOfAnIdOver64BytesStaysItsTenantInItsTier) {
  Client app(policy(kTiers));
  Client admin(policy(kTiers));
  Client &ops = shared() ? admin : app;
  const std::string id(100, 'a');
  check(fw_admin_set_tier(ops.get(), id.data(), id.size(), "pro"));
  fw_request r = FW_REQUEST_INIT;
  r.tenant = id.data();
  r.tenant_len = id.size();
  struct Done {
    std::promise<std::pair<int, fw_decision>> promise;
  } done;
  auto cb = [](void *payload, int status, const fw_decision *d) {
    static_cast<Done *>(payload)->promise.set_value({status, *d});
  };
  auto answer = done.promise.get_future();
  ASSERT_EQ(fw_admit_async(app.get(), &r, cb, &done), FW_OK);
  auto [status, d] = answer.get();
  ASSERT_EQ(status, FW_OK);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.limit, 10) << "decided in the tenant's tier";
  EXPECT_EQ(fw_release(app.get(), d.ticket), FW_OK);
  fw_buf b = FW_BUF_INIT;
  check(fw_admin_show(ops.get(), id.data(), id.size(), &b));
  auto j = nlohmann::json::parse(b.ptr);
  fw_buf_dispose(&b);
  EXPECT_EQ(j["tier"], "pro");
  EXPECT_EQ(j["request_rate"]["remaining"], 9) << "the token came out of this tenant's bucket";
}

TEST_P(Control, ABlockRefusesWith403AndNothingIsConsumed) {
  Client app(policy(kTiers));
  Client admin(policy(kTiers));
  Client &ops = shared() ? admin : app;
  check(fw_admin_block(ops.get(), "acct", 4, 0));
  Admission a = app.admit("acct");
  ASSERT_FALSE(a.allowed());
  EXPECT_EQ(a.status(), 403);
  EXPECT_TRUE(a.decision().blocked);
  EXPECT_EQ(a.headers(), "") << "no Retry-After for a block until unblocked";
  auto body = nlohmann::json::parse(a.body());
  EXPECT_EQ(body["error"]["limit_type"], "blocked");
  EXPECT_EQ(body["error"]["type"], "forbidden");
  check(fw_admin_block(ops.get(), "acct", 4, 120));
  Admission timed = app.admit("acct");
  EXPECT_EQ(timed.status(), 403);
  EXPECT_GE(timed.decision().retry_after_s, 119);
  EXPECT_LE(timed.decision().retry_after_s, 121);
  EXPECT_NE(timed.headers().find("Retry-After: "), std::string::npos);
  check(fw_admin_unblock(ops.get(), "acct", 4));
  EXPECT_EQ(admitted(app, "acct", 3), 2) << "the block consumed nothing";
  EXPECT_EQ(nlohmann::json::parse(app.metrics_json())["blocked"], 2);
}

TEST_P(Control, ResetListAndModes) {
  Client app(policy(kTiers));
  Client admin(policy(kTiers));
  Client &ops = shared() ? admin : app;
  EXPECT_EQ(admitted(app, "acct", 3), 2);
  check(fw_admin_reset(ops.get(), "acct", 4));
  EXPECT_EQ(admitted(app, "acct", 3), 2) << "full again";
  check(fw_admin_set_override(ops.get(), "big", 3, 5, 50));
  check(fw_admin_block(ops.get(), "bad", 3, 0));
  fw_buf b = FW_BUF_INIT;
  check(fw_admin_list(ops.get(), 100, &b));
  auto list = nlohmann::json::parse(b.ptr);
  fw_buf_dispose(&b);
  ASSERT_EQ(list.size(), 2u) << list.dump();
  for (const auto &e : list) {
    if (e["tenant"] == "big") {
      EXPECT_EQ(e["override"]["burst"], 50);
    } else {
      EXPECT_EQ(e["tenant"], "bad");
      EXPECT_EQ(e["blocked"], true);
    }
  }
  // The fleet-wide mode: this process's at once (shm:// keeps none in the segment: each process's own).
  check(fw_admin_set_mode(app.get(), FW_LIMITER_REQUEST_RATE, FW_MODE_OFF));
  EXPECT_EQ(admitted(app, "acct", 5), 5) << "the request rate limiter off fleet-wide";
  check(fw_admin_set_mode(app.get(), FW_LIMITER_REQUEST_RATE, -1));
  EXPECT_EQ(admitted(app, "acct", 5), 0);
}

TEST_P(Control, BadArgumentsAreNamed) {
  Client app(policy(kTiers));
  auto message = [] { return std::string(fw_error_last()->message); };
  EXPECT_EQ(fw_admin_set_tier(app.get(), "acct", 4, "platinum"), FW_EINVAL);
  EXPECT_NE(message().find("tier: the policy has no tier named \"platinum\" (it has: pro)"), std::string::npos)
      << message();
  EXPECT_EQ(fw_admin_set_override(app.get(), "acct", 4, -1, 5), FW_EINVAL);
  EXPECT_EQ(message().rfind("rate", 0), 0u) << message();
  EXPECT_EQ(fw_admin_set_override(app.get(), "acct", 4, 1, 0), FW_EINVAL);
  EXPECT_EQ(message().rfind("burst", 0), 0u) << message();
  EXPECT_EQ(fw_admin_block(app.get(), "a\nb", 3, 0), FW_EINVAL);
  EXPECT_EQ(message().rfind("tenant", 0), 0u) << message();
  EXPECT_EQ(fw_admin_block(app.get(), "acct", 4, -5), FW_EINVAL);
  EXPECT_EQ(message().rfind("seconds", 0), 0u) << message();
  EXPECT_EQ(fw_admin_set_mode(app.get(), static_cast<fw_limiter>(6), 0), FW_EINVAL);
  EXPECT_EQ(fw_admin_list(app.get(), 0, nullptr), FW_EINVAL);
}

INSTANTIATE_TEST_SUITE_P(Stores, Control, ::testing::Values(StoreKind::memory, StoreKind::shm, StoreKind::redis),
                         floodwall::testing::store_kind_name);

// A running client in another process: the admit right after the admin call returns sees the change.
TEST(ControlRedis, AClientInAnotherProcessSeesTheChangeOnItsNextRequest) {
  RedisServer redis;
  std::string pol = R"({"store": ")" + redis.url() + R"(", "redis": {"deadline_ms": 2000}, )" + kTiers + "}";
  int to_child[2], to_parent[2];
  ASSERT_EQ(pipe(to_child), 0);
  ASSERT_EQ(pipe(to_parent), 0);
  pid_t pid = fork();
  if (pid == 0) {
    int rc = 1;
    try {
      Client fw(pol);
      char step;
      // 1: admitted before; 2: blocked after the parent's block; 3: admitted after the unblock.
      bool before = fw.admit("t").allowed();
      (void)!write(to_parent[1], "r", 1);
      (void)!read(to_child[0], &step, 1);
      bool blocked = fw.admit("t").status() == 403;
      (void)!write(to_parent[1], "r", 1);
      (void)!read(to_child[0], &step, 1);
      bool after = fw.admit("t").allowed();
      rc = before && blocked && after ? 0 : 2;
    } catch (...) {
      rc = 3;
    }
    _exit(rc);
  }
  Client admin(pol);
  char c;
  ASSERT_EQ(read(to_parent[0], &c, 1), 1);
  check(fw_admin_block(admin.get(), "t", 1, 0));
  ASSERT_EQ(write(to_child[1], "g", 1), 1);
  ASSERT_EQ(read(to_parent[0], &c, 1), 1);
  check(fw_admin_unblock(admin.get(), "t", 1));
  ASSERT_EQ(write(to_child[1], "g", 1), 1);
  int st = 0;
  waitpid(pid, &st, 0);
  EXPECT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0) << "1: no client, 2: a decision did not follow the change, 3: an exception";
}

// A tenant without a control record: its bucket says so (the bare mark, lua/lib/bucket.lua), and its next
// admits read the bucket alone, looking for no record; a record written by the admin API takes the mark off,
// so that the very next admit reads it (a block refuses it, a tier and an override apply), and once the
// record is gone the mark comes back.
TEST(ControlRedis, ABucketSaysATenantHasNoRecordUntilOneIsWritten) {
  RedisServer redis;
  std::string pol = R"({"store": ")" + redis.url() + R"(", "redis": {"deadline_ms": 2000},
      "request_rate": {"rate": 1000, "burst": 1000}})";
  Client fw(pol), admin(pol);
  const std::string bucket = "floodwall:{t}:rate";
  auto exists_calls = [&] {
    return floodwall::testing::completed_calls(redis.command({"INFO", "commandstats"}), "exists");
  };
  auto marked = [&] {
    std::string v = redis.command({"GET", bucket});
    return !v.empty() && v.back() == '.';
  };
  ASSERT_TRUE(fw.admit("t").allowed());
  EXPECT_TRUE(marked()) << redis.command({"GET", bucket});
  int64_t exists0 = exists_calls();
  for (int i = 0; i < 10; i++) ASSERT_TRUE(fw.admit("t").allowed());
  EXPECT_EQ(exists_calls(), exists0) << "a bare bucket: the record is not looked for";
  EXPECT_TRUE(marked());

  check(fw_admin_block(admin.get(), "t", 1, 0));
  EXPECT_FALSE(marked()) << "a record takes the mark off: " << redis.command({"GET", bucket});
  EXPECT_EQ(fw.admit("t").status(), 403) << "blocked on the very next admit";
  check(fw_admin_unblock(admin.get(), "t", 1));
  ASSERT_TRUE(fw.admit("t").allowed());
  EXPECT_TRUE(marked()) << "no record again: the mark is back";

  // An override on a bare bucket: the next admit decides with it (the mark is off, the record read).
  check(fw_admin_set_override(admin.get(), "t", 1, 3, 3));
  int allowed = 0;
  for (int i = 0; i < 20; i++) allowed += fw.admit("t").allowed();
  EXPECT_LE(allowed, 4) << "the override's burst of 3 (and a refill of 3/s), not the policy's 1000";
  EXPECT_FALSE(marked());
}

// A hot tenant decided from a lease: blocked by this client, its very next admit is refused; blocked by
// another client, it is refused from this client's next flags poll on, having spent at most what it had
// leased (never a token it had not), and never admitted again once refused.
TEST(ControlRedis, AHotTenantsLeaseIsDroppedByABlock) {
  RedisServer redis;
  std::string pol = R"({"store": ")" + redis.url() + R"(", "redis": {"deadline_ms": 2000, "flags_poll_ms": 100},
      "request_rate": {"rate": 100000, "burst": 100000, "lease": {"max_tokens": 200, "ttl_ms": 5000}}})";
  Client app(pol), other(pol);
  auto heat = [&](const std::string &t) {
    for (int i = 0; i < 2000; i++) ASSERT_TRUE(app.admit(t).allowed());
  };
  heat("mine");
  check(fw_admin_block(app.get(), "mine", 4, 0));
  EXPECT_EQ(app.admit("mine").status(), 403) << "this client's own block: at once";
  heat("theirs");
  check(fw_admin_block(other.get(), "theirs", 6, 0));
  int spent = 0;
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (app.admit("theirs").allowed() && std::chrono::steady_clock::now() < until) spent++;
  EXPECT_LE(spent, 200) << "at most the lease in hand";
  for (int i = 0; i < 200; i++) ASSERT_EQ(app.admit("theirs").status(), 403) << i;
  check(fw_admin_unblock(other.get(), "theirs", 6));
  until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  bool back = false;
  while (!back && std::chrono::steady_clock::now() < until) back = app.admit("theirs").allowed();
  EXPECT_TRUE(back) << "unblocked";
}

TEST(ControlRedis, AnUnreachableStoreIsSaidWithinTheConnectTimeout) {
  int port;
  {
    RedisServer gone;
    port = gone.port();
  }
  Client fw(R"({"store": "redis://127.0.0.1:)" + std::to_string(port) +
            R"(", "redis": {"connect_timeout_ms": 200}, "request_rate": {"rate": 1, "burst": 1}})");
  EXPECT_EQ(fw_admin_block(fw.get(), "t", 1, 0), FW_ESTORE);
  std::string m = fw_error_last()->message;
  EXPECT_NE(m.find("cannot reach redis://127.0.0.1:" + std::to_string(port)), std::string::npos) << m;
}

}  // namespace
