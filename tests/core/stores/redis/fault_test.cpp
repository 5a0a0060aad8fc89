// Real outages, not a stopped process: network faults through a TCP fault proxy (fault_proxy.hpp)
// and Redis-side failures of a real redis-server. For each: admits made during the fault are decided
// by redis.fallback within about the deadline and say why; after it, Redis decides again without a new
// client; and no slot or token is lost or counted twice:
//   - tenant "held": two slots taken from Redis before the fault, one released during it; after it the
//     tenant's sorted set must hold exactly the other one, and exactly limit - 1 more admits pass;
//   - tenant "churn": slots taken and given back during the fault (from the fallback table); after it
//     its sorted set must be empty and exactly `limit` concurrent admits pass;
//   - tenant "tokens": request rate only (a lone caller's direct round trip); the tokens its bucket in
//     Redis spent must be the admits Redis answered, plus at most the admits whose reply was lost (a
//     command that reached Redis but whose answer never came back cannot be told from one that did not).
// Wall-clock bounds are generous (a loaded 2-core machine): every admit within deadline + 1 s, recovery
// within a few seconds, polled, never slept on.
#include <floodwall.h>
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <stdlib.h>

#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <filesystem>
#include <floodwall.hpp>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "fault_proxy.hpp"
#include "policy/tenant_key.hpp"
#include "redis_server.hpp"

using floodwall::testing::FaultProxy;
using floodwall::testing::RedisServer;
using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

namespace {

constexpr int kLimit = 3;
constexpr double kNsPerToken = 1e12;  // rate 0.001 tokens/s: the bucket does not refill within a test
constexpr double kDeadlineS = 0.050;  // the shipped redis.deadline_ms
constexpr double kSlowestS = kDeadlineS + 1.0;

std::string policy_for(const std::string &url, const std::string &redis_opts = "") {
  std::string redis = redis_opts.empty() ? "" : R"("redis": {)" + redis_opts + "}, ";
  return R"({"store": ")" + url + R"(", )" + redis +
         R"("request_rate": {"rate": 0.001, "burst": 1000}, "concurrency": {"limit": 3, "routes": ["/held"]}})";
}

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

bool poll_until(double seconds, const std::function<bool()> &done) {
  auto t0 = Clock::now();
  for (;;) {
    if (done()) return true;
    if (seconds_since(t0) > seconds) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

bool by_store(const fw_decision &d) {
  return !d.failed_open && !d.degraded && d.fail_reason == FW_FAIL_NONE && d.status != 503;
}

const char *reason(int r) {
  return fw_fail_reason_name(static_cast<fw_fail_reason>(r));
}

// Every decision one tenant got, by who made it and why.
struct Seen {
  int store = 0, store_allowed = 0, fallback = 0, refused = 0;
  std::map<int, int> reasons;  // fail_reason -> decisions
  double slowest_s = 0;
  void add(const fw_decision &d, double s) {
    slowest_s = std::max(slowest_s, s);
    if (d.fail_reason == FW_FAIL_NONE) {
      store++;
      store_allowed += d.allowed;
      return;
    }
    reasons[d.fail_reason]++;
    (d.degraded ? fallback : refused)++;
  }
  // Admits whose command may have reached Redis without its answer coming back.
  int unanswered() const {
    int n = 0;
    for (int r : {FW_FAIL_TIMEOUT, FW_FAIL_CONNECTION, FW_FAIL_ERROR})
      if (auto it = reasons.find(r); it != reasons.end()) n += it->second;
    return n;
  }
  std::string str() const {
    std::string s = "store " + std::to_string(store) + " (allowed " + std::to_string(store_allowed) + "), fallback " +
                    std::to_string(fallback) + ", refused " + std::to_string(refused) + " {";
    for (auto [r, n] : reasons) s += std::string(" ") + reason(r) + ":" + std::to_string(n);
    return s + " }";
  }
};

fw_decision admit(floodwall::Client &fw, const std::string &tenant, const char *route, Seen &seen) {
  fw_request r = FW_REQUEST_INIT;
  r.tenant = tenant.data();
  r.tenant_len = tenant.size();
  r.route = route;
  fw_decision d = FW_DECISION_INIT;
  auto t0 = Clock::now();
  floodwall::check(fw_admit(fw.get(), &r, &d));
  seen.add(d, seconds_since(t0));
  return d;
}

std::string key(const std::string &tenant, const char *suffix) {
  return "floodwall:{" + floodwall::TenantKey(tenant).encoded() + "}:" + suffix;
}

// A reply of a command on a connection of the test's own, as text.
std::string ask(int port, std::initializer_list<std::string> args, double timeout_s = 2.0) {
  return floodwall::testing::command_at(port, args, timeout_s);
}

int64_t zcard(int port, const std::string &tenant) {
  std::string n = ask(port, {"ZCARD", key(tenant, "conc")});
  return n.empty() || !std::isdigit(static_cast<unsigned char>(n[0])) ? -1 : std::stoll(n);
}

// The tokens the tenant's bucket in Redis has spent: its debt (when it is full again, minus Redis' own
// clock) over the nanoseconds of one token. The refill during a test is a hundredth of a token.
int64_t tokens_spent(int port, const std::string &tenant) {
  std::string full_at = ask(port, {"GET", key(tenant, "rate")});
  if (full_at == "<nil>") return 0;
  if (full_at.back() == '.') full_at.pop_back();  // the bare mark (lua/lib/bucket.lua)
  std::string now = ask(port, {"TIME"});          // "<seconds> <microseconds>"
  if (full_at.size() < 10 || now.find(' ') == std::string::npos) return -1;
  double full_ns =
      std::stod(full_at.substr(0, full_at.size() - 9)) * 1e9 + std::stod(full_at.substr(full_at.size() - 9));
  double now_ns = std::stod(now.substr(0, now.find(' '))) * 1e9 + std::stod(now.substr(now.find(' ') + 1)) * 1e3;
  return std::max<int64_t>(0, std::llround((full_ns - now_ns) / kNsPerToken));
}

json metrics(floodwall::Client &fw) {
  return json::parse(fw.metrics_json());
}

// ------------------------------------------------------------------------------------ one fault

struct Fault {
  std::function<void()> begin, end;
  // What a decision made during the fault may say; a transient fault (a kill, over at once) may also
  // see Redis decide again before `end`.
  std::set<int> reasons = {FW_FAIL_TIMEOUT, FW_FAIL_CONNECTION, FW_FAIL_BREAKER};
  double during_s = 1.6;  // long enough for the breaker to open, probe once and open again
  bool transient = false;
  bool closed = false;  // redis.fallback "closed": refusals instead of degraded decisions
};

struct Outcome {
  Seen tokens, churn, held;
  Seen checked_held, checked_churn;  // the checker client's decisions, after the fault
  double recovered_s = -1;           // from `end` to Redis deciding every tenant again
};

struct Harness {
  Harness(int redis_port, const std::string &url, const std::string &redis_opts = "")
      : port(redis_port), fw(policy_for(url, redis_opts)) {}
  int port;
  floodwall::Client fw;
  Outcome out;

  // An admit that Redis allowed, retried while a loaded machine makes one miss the deadline.
  fw_decision allowed_by_redis(const std::string &tenant, const char *route, Seen &seen) {
    fw_decision d = FW_DECISION_INIT;
    auto t0 = Clock::now();
    while (seconds_since(t0) < 5) {
      d = admit(fw, tenant, route, seen);
      if (by_store(d) && d.allowed) break;
      fw_release(fw.get(), d.ticket);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return d;
  }

  // Redis decides every tenant; `held` takes two slots: one kept to the end, one released during the fault.
  void warm_up(fw_ticket &kept, fw_ticket &to_release) {
    ASSERT_TRUE(by_store(allowed_by_redis("tokens", "/r", out.tokens))) << out.tokens.str();
    fw_decision d = allowed_by_redis("churn", "/held", out.churn);
    ASSERT_TRUE(by_store(d)) << out.churn.str();
    fw_release(fw.get(), d.ticket);
    fw_decision a = allowed_by_redis("held", "/held", out.held), b = allowed_by_redis("held", "/held", out.held);
    ASSERT_TRUE(by_store(a) && by_store(b)) << out.held.str();
    kept = a.ticket;
    to_release = b.ticket;
    ASSERT_TRUE(poll_until(3, [&] { return zcard(port, "churn") == 0; }));
    ASSERT_EQ(zcard(port, "held"), 2);
  }

  void during(const Fault &f, fw_ticket to_release) {
    auto t0 = Clock::now();
    bool released = false;
    // Turn about, a slot admit first: whichever goes first meets the fault on the wire (the other, as
    // often as not, meets the open breaker).
    for (int i = 0; seconds_since(t0) < f.during_s || !released; i++) {
      for (const char *tenant : {i % 2 ? "tokens" : "churn", i % 2 ? "churn" : "tokens"}) {
        bool slot = std::string(tenant) == "churn";
        fw_decision d = admit(fw, tenant, slot ? "/held" : "/r", slot ? out.churn : out.tokens);
        if (!(f.transient && by_store(d))) {
          EXPECT_TRUE(f.reasons.count(d.fail_reason)) << tenant << " during the fault: " << reason(d.fail_reason);
          if (f.closed) {
            EXPECT_TRUE(!d.allowed && d.status == 503 && !d.degraded && !d.failed_open && d.ticket == 0)
                << tenant << ": fallback closed refuses, holding nothing";
          } else {
            EXPECT_TRUE(d.allowed && d.degraded && !d.failed_open) << tenant << ": the local table decides";
          }
        }
        fw_release(fw.get(), d.ticket);
      }
      if (!released && seconds_since(t0) > std::min(0.3, f.during_s)) {
        fw_release(fw.get(), to_release);  // a request that ends during the outage
        released = true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

  // After `end`: Redis decides each tenant again within a few seconds.
  void recover() {
    auto t0 = Clock::now();
    bool tokens = false, churn = false;
    while (!(tokens && churn) && seconds_since(t0) < 8) {
      if (!tokens) tokens = by_store(admit(fw, "tokens", "/r", out.tokens));
      if (!churn) {
        fw_decision d = admit(fw, "churn", "/held", out.churn);
        churn = by_store(d);
        fw_release(fw.get(), d.ticket);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    out.recovered_s = seconds_since(t0);
    EXPECT_TRUE(tokens) << "Redis decides the request rate again: " << out.tokens.str();
    EXPECT_TRUE(churn) << "Redis decides the concurrency again: " << out.churn.str();
  }

  // Exactly `free` more concurrent admits of `tenant` pass. Asked by a client of its own, straight to
  // Redis with a generous deadline, so that what it finds is Redis' state, not a loaded machine's.
  void exactly(floodwall::Client &checker, const std::string &tenant, int free, Seen &seen) {
    std::vector<fw_ticket> got;
    int allowed = 0;
    for (int i = 0; i <= free; i++) {
      fw_decision d = admit(checker, tenant, "/held", seen);
      EXPECT_TRUE(by_store(d)) << tenant << ": " << reason(d.fail_reason);
      allowed += d.allowed;
      if (d.ticket) got.push_back(d.ticket);
    }
    EXPECT_EQ(allowed, free) << tenant << ": concurrent admits that pass after the fault";
    EXPECT_EQ(zcard(port, tenant), kLimit) << tenant;
    for (fw_ticket t : got) fw_release(checker.get(), t);
  }

  void check_slots(fw_ticket kept) {
    std::string why = "release_errors " + std::to_string(metrics(fw)["store"]["release_errors"].get<int64_t>());
    poll_until(2, [&] { return zcard(port, "churn") == 0; });
    EXPECT_EQ(zcard(port, "churn"), 0) << "slots taken during the fault are in Redis though no request holds them ("
                                       << why << ")";
    poll_until(2, [&] { return zcard(port, "held") == 1; });
    EXPECT_EQ(zcard(port, "held"), 1) << "held: the slot released during the fault is still in Redis (" << why << ")";
    {
      floodwall::Client checker(
          policy_for("redis://127.0.0.1:" + std::to_string(port) + "/0", R"("deadline_ms": 2000)"));
      exactly(checker, "held", kLimit - 1, out.checked_held);
      exactly(checker, "churn", kLimit, out.checked_churn);
    }  // its releases are sent before it closes
    fw_release(fw.get(), kept);
    EXPECT_TRUE(poll_until(2, [&] { return zcard(port, "held") == 0 && zcard(port, "churn") == 0; }))
        << "every slot given back: held " << zcard(port, "held") << ", churn " << zcard(port, "churn");
  }

  void check_tokens() {
    struct Tenant {
      const char *name;
      int answered, unanswered;
      std::string seen;
    };
    for (const Tenant &t : {Tenant{"tokens", out.tokens.store_allowed, out.tokens.unanswered(), out.tokens.str()},
                            Tenant{"churn", out.churn.store_allowed + out.checked_churn.store_allowed,
                                   out.churn.unanswered() + out.checked_churn.unanswered(), out.churn.str()}}) {
      int64_t spent = tokens_spent(port, t.name);
      EXPECT_GE(spent, t.answered) << t.name << ": Redis lost tokens it granted; " << t.seen;
      EXPECT_LE(spent, t.answered + t.unanswered)
          << t.name << ": Redis spent tokens for admits it never answered; " << t.seen;
      if (spent != t.answered)
        std::printf(
            "  [%s] %s: Redis spent %lld tokens for %d admits it answered allowed, %lld more for admits "
            "whose reply was late or lost\n",
            ::testing::UnitTest::GetInstance()->current_test_info()->name(), t.name, static_cast<long long>(spent),
            t.answered, static_cast<long long>(spent - t.answered));
    }
  }

  // The metrics count every decision the fallback made, under the reason the decision says.
  void check_metrics(bool closed) {
    json m = metrics(fw);
    std::map<int, int> reasons;
    int fallback = 0, refused = 0;
    for (const Seen *s : {&out.tokens, &out.churn, &out.held}) {
      for (auto [r, n] : s->reasons) reasons[r] += n;
      fallback += s->fallback;
      refused += s->refused;
    }
    for (int r = FW_FAIL_TIMEOUT; r <= FW_FAIL_CLUSTER; r++)
      EXPECT_EQ(m["store_failures"]["request_rate"][reason(r)].get<int>(), reasons[r]) << reason(r);
    EXPECT_EQ(m["sources"]["fallback"].get<int>(), fallback);
    EXPECT_EQ(m["sources"]["refused"].get<int>(), refused);
    EXPECT_EQ(m["sources"]["failed_open"].get<int>(), 0);
    EXPECT_GT(closed ? refused : fallback, 0) << "the fault was seen";
  }

  void survive(const Fault &f) {
    fw_ticket kept = 0, to_release = 0;
    ASSERT_NO_FATAL_FAILURE(warm_up(kept, to_release));
    f.begin();
    during(f, to_release);
    f.end();
    recover();
    check_slots(kept);
    check_tokens();
    check_metrics(f.closed);
    EXPECT_LT(out.tokens.slowest_s, kSlowestS) << "an admit waited past the deadline";
    EXPECT_LT(out.churn.slowest_s, kSlowestS) << "an admit waited past the deadline";
    std::printf("  tokens: %s\n  churn:  %s\n  recovered in %.2f s, slowest admit %.3f s\n", out.tokens.str().c_str(),
                out.churn.str().c_str(), out.recovered_s, std::max(out.tokens.slowest_s, out.churn.slowest_s));
  }
};

// A proxy in front of a real Redis, and a client through it.
struct ThroughProxy {
  explicit ThroughProxy(const std::string &redis_opts = "")
      : proxy(redis.port()), run(redis.port(), proxy.url(), redis_opts) {}
  RedisServer redis;
  FaultProxy proxy;
  Harness run;
  void survive(std::function<void()> fault, Fault f = {}) {
    f.begin = std::move(fault);
    f.end = [this] { proxy.heal(); };
    run.survive(f);
    EXPECT_GT(proxy.accepted(), 0u);
    std::printf(
        "  proxy: %llu connections, %llu bytes up, %llu down, dropped %llu up, %llu down, %llu resets, %llu at heal\n",
        static_cast<unsigned long long>(proxy.accepted()),
        static_cast<unsigned long long>(proxy.forwarded(FaultProxy::kUp)),
        static_cast<unsigned long long>(proxy.forwarded(FaultProxy::kDown)),
        static_cast<unsigned long long>(proxy.dropped(FaultProxy::kUp)),
        static_cast<unsigned long long>(proxy.dropped(FaultProxy::kDown)),
        static_cast<unsigned long long>(proxy.resets()), static_cast<unsigned long long>(proxy.reset_at_heal()));
  }
};

}  // namespace

// ------------------------------------------------------------------------------------ the proxy itself

namespace {

struct Raw {
  explicit Raw(int port, double timeout_s = 2.0) {
    timeval tv{static_cast<time_t>(timeout_s), static_cast<suseconds_t>(std::fmod(timeout_s, 1.0) * 1e6)};
    c = redisConnectWithTimeout("127.0.0.1", port, tv);
    EXPECT_TRUE(c && !c->err);
    if (c) redisSetTimeout(c, tv);
  }
  ~Raw() {
    if (c) redisFree(c);
  }
  // The reply as text, or "<error: ...>" when the connection failed.
  std::string cmd(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    auto *r = static_cast<redisReply *>(redisvCommand(c, fmt, ap));
    va_end(ap);
    if (!r) return std::string("<error: ") + c->errstr + ">";
    std::string out = r->type == REDIS_REPLY_INTEGER ? std::to_string(r->integer)
                      : r->str                       ? std::string(r->str, r->len)
                                                     : "<nil>";
    freeReplyObject(r);
    return out;
  }
  redisContext *c = nullptr;
};

}  // namespace

TEST(FaultProxy, PassesThroughAndCounts) {
  RedisServer redis;
  FaultProxy proxy(redis.port());
  {
    Raw raw(proxy.port());
    EXPECT_EQ(raw.cmd("PING"), "PONG");
    EXPECT_EQ(raw.cmd("SET k %s", "v"), "OK");
    EXPECT_EQ(ask(redis.port(), {"GET", "k"}), "v") << "it reached the real server";
  }
  EXPECT_EQ(proxy.accepted(), 1u);
  EXPECT_EQ(proxy.forwarded(FaultProxy::kUp), 14u + 27u);  // *1 $4 PING, *3 $3 SET $1 k $1 v
  EXPECT_EQ(proxy.forwarded(FaultProxy::kDown), 7u + 5u);  // +PONG, +OK
  EXPECT_TRUE(poll_until(3, [&] { return proxy.open_connections() == 0; })) << "a closed client closes its pair";
}

TEST(FaultProxy, LatencyHoldsEachChunkAndHealSendsItAtOnce) {
  RedisServer redis;
  FaultProxy proxy(redis.port());
  Raw raw(proxy.port(), 5.0);
  proxy.latency(200, FaultProxy::Which::down);
  auto t0 = Clock::now();
  EXPECT_EQ(raw.cmd("PING"), "PONG");
  EXPECT_GE(seconds_since(t0), 0.2);
  proxy.latency(3000);
  std::thread heal([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    proxy.heal();
  });
  t0 = Clock::now();
  EXPECT_EQ(raw.cmd("PING"), "PONG") << "held, then sent whole at heal";
  EXPECT_LT(seconds_since(t0), 2.5);
  heal.join();
}

TEST(FaultProxy, BandwidthPacesEachConnection) {
  RedisServer redis;
  FaultProxy proxy(redis.port());
  ASSERT_EQ(ask(redis.port(), {"SET", "big", std::string(10000, 'x')}), "OK");
  Raw raw(proxy.port(), 10.0);
  proxy.bandwidth(20000, FaultProxy::Which::down);
  auto t0 = Clock::now();
  EXPECT_EQ(raw.cmd("GET big").size(), 10000u);
  EXPECT_GE(seconds_since(t0), 0.45) << "10 kB at 20 kB/s";
}

TEST(FaultProxy, ResetAfterCutsAReplyWithAnRst) {
  RedisServer redis;
  FaultProxy proxy(redis.port());
  Raw raw(proxy.port());
  ASSERT_EQ(raw.cmd("PING"), "PONG");
  uint64_t down = proxy.forwarded(FaultProxy::kDown);
  proxy.reset_after(3);
  std::string r = raw.cmd("INCR n");
  EXPECT_EQ(r.rfind("<error:", 0), 0u) << r;
  EXPECT_EQ(raw.c->err, REDIS_ERR_IO) << "a reset, not an orderly close: " << raw.c->errstr;
  EXPECT_EQ(proxy.forwarded(FaultProxy::kDown) - down, 3u) << "':1\\r\\n' cut after 3 bytes";
  EXPECT_EQ(proxy.resets(), 1u);
  EXPECT_EQ(ask(redis.port(), {"GET", "n"}), "1") << "the command ran; its reply was cut";
}

TEST(FaultProxy, BlackholeAnswersNothingAndHealResetsWhatItBroke) {
  RedisServer redis;
  FaultProxy proxy(redis.port());
  Raw raw(proxy.port(), 0.3);
  ASSERT_EQ(raw.cmd("PING"), "PONG");
  proxy.blackhole();
  EXPECT_EQ(raw.cmd("INCR n").rfind("<error:", 0), 0u) << "no answer within the time-out";
  Raw late(proxy.port(), 0.3);
  EXPECT_EQ(late.cmd("INCR n").rfind("<error:", 0), 0u) << "a new connection is accepted and answered nothing";
  EXPECT_TRUE(poll_until(3, [&] { return proxy.dropped(FaultProxy::kUp) == 2 * 21u; }))
      << "both INCRs read and dropped";
  EXPECT_EQ(ask(redis.port(), {"GET", "n"}), "<nil>") << "nothing reached the server";
  proxy.heal();
  EXPECT_EQ(proxy.reset_at_heal(), 2u) << "both lost bytes: their streams cannot go on";
  Raw fresh(proxy.port());
  EXPECT_EQ(fresh.cmd("INCR n"), "1");
}

TEST(FaultProxy, HalfOpenForwardsCommandsAndDropsReplies) {
  RedisServer redis;
  FaultProxy proxy(redis.port());
  Raw raw(proxy.port(), 0.3);
  ASSERT_EQ(raw.cmd("PING"), "PONG");
  proxy.half_open();
  EXPECT_EQ(raw.cmd("INCR n").rfind("<error:", 0), 0u) << "no reply";
  EXPECT_TRUE(poll_until(3, [&] { return ask(redis.port(), {"GET", "n"}) == "1"; })) << "but the command ran";
  EXPECT_EQ(proxy.open_connections(), 1u) << "and the socket stays open";
}

TEST(FaultProxy, HalfCloseShowsTheClientAnEofWhileCommandsStillRun) {
  RedisServer redis;
  FaultProxy proxy(redis.port());
  Raw raw(proxy.port());
  ASSERT_EQ(raw.cmd("PING"), "PONG");
  proxy.half_close();
  std::string r = raw.cmd("INCR n");
  EXPECT_EQ(r.rfind("<error:", 0), 0u) << r;
  EXPECT_EQ(raw.c->err, REDIS_ERR_EOF) << raw.c->errstr;
  EXPECT_TRUE(poll_until(3, [&] { return ask(redis.port(), {"GET", "n"}) == "1"; })) << "the command still ran";
}

// ------------------------------------------------------------------------------------ through the proxy

TEST(FaultNetwork, LatencyAboveTheDeadline) {
  ThroughProxy t;
  t.survive([&] { t.proxy.latency(150); });  // a 300 ms round trip against a 50 ms deadline
}

TEST(FaultNetwork, BandwidthSqueeze) {
  ThroughProxy t;
  t.survive([&] { t.proxy.bandwidth(100); });  // an admit is ~150 bytes: more than a second each
}

TEST(FaultNetwork, ResetMidReply) {
  ThroughProxy t;
  // Every connection is reset 4 bytes into what Redis sends next: an admit's reply is cut, and so is each
  // new connection's first reply, until heal.
  t.survive([&] { t.proxy.reset_after(4); });
  EXPECT_GT(t.proxy.resets(), 0u);
}

TEST(FaultNetwork, Blackhole) {
  ThroughProxy t;
  t.survive([&] { t.proxy.blackhole(); });
  EXPECT_GT(t.proxy.dropped(FaultProxy::kUp), 0u);
}

TEST(FaultNetwork, HalfOpenRepliesNeverComeBack) {
  ThroughProxy t;
  t.survive([&] { t.proxy.half_open(); });
  EXPECT_GT(t.proxy.dropped(FaultProxy::kDown), 0u) << "Redis ran commands whose replies were dropped";
}

TEST(FaultNetwork, HalfClosedSocketReadsEof) {
  ThroughProxy t;
  t.survive([&] { t.proxy.half_close(); });
}

TEST(FaultNetwork, BlackholeWithFallbackClosedRefusesAndHoldsNothing) {
  ThroughProxy t(R"("fallback": "closed")");
  Fault f;
  f.closed = true;
  t.survive([&] { t.proxy.blackhole(); }, f);
}

// ------------------------------------------------------------------------------------ Redis-side faults

namespace {

// A directory of its own for what a redis-server writes (an RDB), removed at the end.
struct TempDir {
  TempDir() {
    char tmpl[] = "/tmp/floodwall-fault-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string path;
};

std::string info_field(int port, const char *section, const std::string &field) {
  std::string info = ask(port, {"INFO", section});
  auto at = info.find(field + ":");
  if (at == std::string::npos) return "";
  auto end = info.find("\r\n", at);
  return info.substr(at + field.size() + 1, end - at - field.size() - 1);
}

}  // namespace

TEST(FaultRedis, OutOfMemoryWithNoeviction) {
  RedisServer redis;
  Harness run(redis.port(), redis.url());
  Fault f;
  f.reasons = {FW_FAIL_ERROR, FW_FAIL_BREAKER, FW_FAIL_TIMEOUT};  // a time-out: a loaded machine
  f.begin = [&] {
    ASSERT_EQ(ask(redis.port(), {"CONFIG", "SET", "maxmemory-policy", "noeviction"}), "OK");
    ASSERT_EQ(ask(redis.port(), {"CONFIG", "SET", "maxmemory", "1"}), "OK");
    ASSERT_EQ(ask(redis.port(), {"SET", "x", "y"}).rfind("OOM", 0), 0u) << "writes fail with OOM";
  };
  f.end = [&] { ASSERT_EQ(ask(redis.port(), {"CONFIG", "SET", "maxmemory", "0"}), "OK"); };
  run.survive(f);
  EXPECT_GT(metrics(run.fw)["store_failures"]["request_rate"]["error"].get<int>(), 0) << "counted as store errors";
}

TEST(FaultRedis, BusyScriptThenScriptKill) {
  RedisServer redis;
  Harness run(redis.port(), redis.url());
  std::thread busy;
  std::string busy_reply;
  Fault f;
  f.reasons = {FW_FAIL_ERROR, FW_FAIL_BREAKER, FW_FAIL_TIMEOUT};
  f.begin = [&] {
    ASSERT_EQ(ask(redis.port(), {"CONFIG", "SET", "lua-time-limit", "20"}), "OK");
    busy = std::thread([&] { busy_reply = ask(redis.port(), {"EVAL", "while true do end", "0"}, 30); });
    ASSERT_TRUE(poll_until(5, [&] { return ask(redis.port(), {"PING"}, 1).rfind("BUSY", 0) == 0; }))
        << "Redis answers BUSY while the script runs";
  };
  f.end = [&] {
    EXPECT_EQ(ask(redis.port(), {"SCRIPT", "KILL"}), "OK");
    if (busy.joinable()) busy.join();
    EXPECT_NE(busy_reply.find("killed"), std::string::npos) << busy_reply;
  };
  run.survive(f);
  EXPECT_GT(metrics(run.fw)["store_failures"]["request_rate"]["error"].get<int>(), 0) << "BUSY counted as store errors";
}

TEST(FaultRedis, ClientKillOfFloodwallsConnections) {
  RedisServer redis;
  Harness run(redis.port(), redis.url());
  int64_t before = 0;
  Fault f;
  f.transient = true;
  f.during_s = 0;  // the kill is over at once: what follows is the client finding its way back
  f.begin = [&] {
    ASSERT_TRUE(poll_until(3, [&] { return std::stoi(info_field(redis.port(), "clients", "connected_clients")) >= 3; }))
        << "floodwall's two pipelined connections, and ours";
    before = metrics(run.fw)["store"]["reconnects"].get<int64_t>();
    std::string killed = ask(redis.port(), {"CLIENT", "KILL", "TYPE", "normal"});  // SKIPME yes: not ours
    ASSERT_GE(std::stoi(killed), 2) << "floodwall's connections were killed";
  };
  f.end = [] {};
  run.survive(f);
  EXPECT_GE(metrics(run.fw)["store"]["reconnects"].get<int64_t>() - before, 2)
      << "both connections came back by themselves";
}

namespace {
// Runs what follows with `dir` as the working directory, which a redis-server started meanwhile keeps:
// there it saves, and loads at start, dump.rdb (CONFIG SET dir is a protected config).
struct InDir {
  explicit InDir(const std::string &dir) : old(std::filesystem::current_path()) { std::filesystem::current_path(dir); }
  ~InDir() { std::filesystem::current_path(old); }
  std::filesystem::path old;
};
}  // namespace

TEST(FaultRedis, RestartOnTheSamePortKeepingItsData) {
  TempDir dir;
  std::optional<RedisServer> redis;
  {
    InDir in(dir.path);
    redis.emplace();
  }
  Harness run(redis->port(), redis->url());
  bool stopped = false;
  Fault f;
  f.during_s = 0.8;
  f.begin = [&] {
    // A restart that keeps the data (SHUTDOWN SAVE, or an RDB): saved, killed, and started again on its
    // port from that file, so that slots held across it are still there.
    ASSERT_EQ(ask(redis->port(), {"SAVE"}), "OK");
    redis->stop();
    stopped = true;
  };
  f.end = [&] {
    ASSERT_TRUE(stopped);
    InDir in(dir.path);
    redis->start();
  };
  run.survive(f);
  json m = metrics(run.fw);
  EXPECT_GT(m["store"]["reconnects"].get<int64_t>(), 0) << "reconnected by itself";
  // The new process started with an empty script cache; the client loaded its five scripts into it
  // (tenant_admit, release, read_flags, tenant_lease, fleet_report; each connection loads them before its
  // first call, so no caller met NOSCRIPT: none saw an error).
  EXPECT_EQ(info_field(redis->port(), "memory", "number_of_cached_scripts"), "5");
  EXPECT_EQ(m["store_failures"]["request_rate"]["error"].get<int>(), 0) << "NOSCRIPT reached a caller";
  std::printf("  noscript_reloads after the restart: %lld\n",
              static_cast<long long>(m["store"]["noscript_reloads"].get<int64_t>()));
}

TEST(FaultRedis, ReadonlyFromADemotedMaster) {
  TempDir dir;
  std::optional<RedisServer> a, b;
  {
    InDir in(dir.path);  // whatever a sync writes goes there
    a.emplace();
    b.emplace();
  }
  RedisServer &redis = *a, &other = *b;
  Harness run(redis.port(), redis.url());
  auto both = [&](std::initializer_list<std::string> args) {
    for (int port : {redis.port(), other.port()}) ASSERT_EQ(ask(port, args), "OK") << port;
  };
  Fault f;
  f.reasons = {FW_FAIL_ERROR, FW_FAIL_BREAKER, FW_FAIL_TIMEOUT};  // a time-out: a loaded machine
  f.begin = [&] {
    both({"CONFIG", "SET", "repl-diskless-sync", "yes"});
    both({"CONFIG", "SET", "repl-diskless-sync-delay", "0"});
    both({"CONFIG", "SET", "repl-diskless-load", "swapdb"});
    // A failover: the other server takes a copy of this one and is promoted, this one is demoted to its
    // replica. Floodwall still points here, and every write it sends is refused with READONLY.
    ASSERT_EQ(ask(other.port(), {"REPLICAOF", "127.0.0.1", std::to_string(redis.port())}), "OK");
    ASSERT_TRUE(poll_until(10, [&] {
      return info_field(other.port(), "replication", "master_link_status") == "up" &&
             ask(other.port(), {"ZCARD", key("held", "conc")}) == "2";
    })) << "the replica has the data";
    ASSERT_EQ(ask(other.port(), {"REPLICAOF", "NO", "ONE"}), "OK");
    ASSERT_EQ(ask(redis.port(), {"REPLICAOF", "127.0.0.1", std::to_string(other.port())}), "OK");
    ASSERT_TRUE(poll_until(10, [&] { return info_field(redis.port(), "replication", "master_link_status") == "up"; }));
    ASSERT_EQ(ask(redis.port(), {"SET", "x", "y"}).rfind("READONLY", 0), 0u);
  };
  f.end = [&] { ASSERT_EQ(ask(redis.port(), {"REPLICAOF", "NO", "ONE"}), "OK"); };
  run.survive(f);
  json m = metrics(run.fw);
  EXPECT_GT(m["store_failures"]["request_rate"]["error"].get<int>(), 0) << "READONLY counted as store errors";
  std::printf("  noscript_reloads after the failover and back: %lld\n",
              static_cast<long long>(m["store"]["noscript_reloads"].get<int64_t>()));
}
