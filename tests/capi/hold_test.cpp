// fw_client_hold / fw_client_flush against a real redis-server: a held turn's admits and releases reach Redis
// in one write (Redis reads them at once), every one decided by the store; a blocking admit of the holding
// thread is never held; another thread's calls are never held, nor do they send the held ones; a turn
// longer than the deadline is still Redis'; the in-process stores ignore both.
#include <floodwall.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "../core/redis_server.hpp"

namespace {

using floodwall::testing::command_at;
using floodwall::testing::RedisServer;

int64_t reads_processed(int port) {
  std::string info = command_at(port, {"INFO", "stats"});
  size_t at = info.find("total_reads_processed:");
  return at == std::string::npos ? -1 : std::stoll(info.substr(at + 22));
}

struct Done {
  std::atomic<int> calls{0}, by_store{0};
  std::atomic<fw_ticket> ticket{0};  // the last decision's
};

void on_decision(void *payload, int status, const fw_decision *d, const char *) {
  auto *done = static_cast<Done *>(payload);
  if (status == FW_OK && d->allowed && d->fail_reason == FW_FAIL_NONE && !d->degraded) done->by_store++;
  if (status == FW_OK) done->ticket = d->ticket;
  done->calls++;
}

// A client of the redis-server at `port`; `rest` is the policy's other fields. By default a held call waits
// for its flush however long the turn (redis.batch_window_us 1 s), so that what a hold keeps back is seen.
fw_client *redis_client(int port, const std::string &rest =
                                      "\"request_rate\": {\"rate\": 1000, \"burst\": 1000}, "
                                      "\"concurrency\": {\"limit\": 100}, "
                                      "\"redis\": {\"deadline_ms\": 2000, \"flags_poll_ms\": 3600000, "
                                      "\"batch_window_us\": 1000000}") {
  std::string policy = "{\"store\": \"redis://127.0.0.1:" + std::to_string(port) + "\", " + rest + "}";
  fw_client *c = nullptr;
  EXPECT_EQ(fw_client_new(&c, policy.c_str()), FW_OK);
  return c;
}

// A request naming `tenant`, which must outlive it.
fw_request request_for(const std::string &tenant) {
  fw_request r = FW_REQUEST_INIT;
  r.tenant = tenant.data();
  r.tenant_len = tenant.size();
  return r;
}

// Starts an admit of `tenant` that the I/O thread answers later, into `done` (a Redis store does not
// decide it at once).
void admit_later(fw_client *c, const std::string &tenant, Done &done) {
  fw_request q = request_for(tenant);
  fw_decision out = FW_DECISION_INIT;
  int decided = 0;
  ASSERT_EQ(fw_admit_async3(c, &q, &out, &decided, on_decision, &done), FW_OK);
  ASSERT_EQ(decided, 0);
}

void wait_for(const std::atomic<int> &n, int want) {
  for (int i = 0; i < 1000 && n.load() < want; i++) std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

TEST(Hold, AHeldTurnReachesRedisInOneWrite) {
  RedisServer redis;
  fw_client *c = redis_client(redis.port());
  const std::string warm = "warm";
  fw_request r = request_for(warm);
  fw_decision d = FW_DECISION_INIT;
  ASSERT_EQ(fw_admit(c, &r, &d), FW_OK);  // connected, scripts loaded
  fw_release(c, d.ticket);

  constexpr int kAdmits = 100;
  Done done;
  std::vector<std::string> tenants;
  for (int i = 0; i < kAdmits; i++) tenants.push_back("t" + std::to_string(i));
  int64_t before = reads_processed(redis.port());
  ASSERT_EQ(fw_client_hold(c), FW_OK);
  for (const std::string &t : tenants) {
    admit_later(c, t, done);
    // An event loop's turn runs a request's JavaScript between two admits: time for the I/O thread to
    // write each one by itself, were it woken for each.
    std::this_thread::sleep_for(std::chrono::microseconds(300));
  }
  ASSERT_EQ(fw_client_flush(c), FW_OK);
  wait_for(done.calls, kAdmits);
  EXPECT_EQ(done.calls.load(), kAdmits);
  EXPECT_EQ(done.by_store.load(), kAdmits);  // every one decided by Redis, none by the fallback
  int64_t reads = reads_processed(redis.port()) - before;
  // One write of 100 admits: Redis reads it in a few reads of its buffer (16 KiB each at most, and the
  // INFO calls of this test), never one per admit (about 100 reads without the hold).
  EXPECT_LE(reads, 20) << "Redis read the held turn in " << reads << " reads";
  fw_client_free(c);
}

TEST(Hold, BlockingAdmitsAndOtherThreadsAreNeverHeld) {
  RedisServer redis;
  fw_client *c = redis_client(redis.port());
  const std::string a = "a";
  fw_request r = request_for(a);
  Done done;
  // This thread holds, with an async admit queued: its own blocking admit is sent (and the held one with it).
  ASSERT_EQ(fw_client_hold(c), FW_OK);
  admit_later(c, a, done);
  fw_decision d = FW_DECISION_INIT;
  ASSERT_EQ(fw_admit(c, &r, &d), FW_OK);
  EXPECT_EQ(d.fail_reason, FW_FAIL_NONE);
  EXPECT_FALSE(d.degraded);
  wait_for(done.calls, 1);
  EXPECT_EQ(done.by_store.load(), 1);
  fw_release(c, d.ticket);

  // Held again, with an async admit queued: another thread's admit is never held, and the I/O thread it
  // wakes leaves this thread's held admit alone (were it taken, a reply arriving mid-turn would split the
  // turn into small writes); the flush sends it.
  ASSERT_EQ(fw_client_hold(c), FW_OK);
  admit_later(c, a, done);
  fw_decision other = FW_DECISION_INIT;
  std::thread t([&] {
    for (int i = 0; i < 5; i++) {  // a few round trips, well within the 1 s window
      EXPECT_EQ(fw_admit(c, &r, &other), FW_OK);
      EXPECT_EQ(other.fail_reason, FW_FAIL_NONE);
      EXPECT_FALSE(other.degraded);
      fw_release(c, other.ticket);
    }
  });
  t.join();
  std::this_thread::sleep_for(std::chrono::milliseconds(5));  // time for a reply, had it been sent
  EXPECT_EQ(done.calls.load(), 1) << "the held admit went out before its turn's flush";
  EXPECT_EQ(fw_client_flush(c), FW_OK);
  wait_for(done.calls, 2);
  EXPECT_EQ(done.by_store.load(), 2);
  fw_client_free(c);
}

TEST(Hold, ALongTurnIsNotTakenForASilentRedis) {
  // A turn that holds its calls longer than the store's deadline (a long callback, a collector's pause;
  // here within a 1 s batch window, so that only the flush sends them): the deadline counts from when a
  // call leaves the hold, so Redis still decides them and the breaker stays closed.
  RedisServer redis;
  fw_client *c = redis_client(redis.port(),
                              "\"request_rate\": {\"rate\": 1000, \"burst\": 1000}, \"concurrency\": {\"limit\": 100}, "
                              "\"redis\": {\"deadline_ms\": 20, \"breaker_min_calls\": 1, \"flags_poll_ms\": 3600000, "
                              "\"batch_window_us\": 1000000}");
  ASSERT_NE(c, nullptr);
  const std::string warm = "warm";
  fw_request r = request_for(warm);
  fw_decision d = FW_DECISION_INIT;
  ASSERT_EQ(fw_admit(c, &r, &d), FW_OK);  // connected, scripts loaded
  ASSERT_EQ(d.fail_reason, FW_FAIL_NONE);
  fw_release(c, d.ticket);

  Done done;
  std::vector<std::string> tenants;
  for (int i = 0; i < 10; i++) tenants.push_back("long" + std::to_string(i));
  ASSERT_EQ(fw_client_hold(c), FW_OK);
  for (const std::string &t : tenants) {
    admit_later(c, t, done);
    std::this_thread::sleep_for(std::chrono::milliseconds(15));  // the turn lasts 150 ms: 7 deadlines
  }
  ASSERT_EQ(fw_client_flush(c), FW_OK);
  wait_for(done.calls, static_cast<int>(tenants.size()));
  EXPECT_EQ(done.calls.load(), static_cast<int>(tenants.size()));
  EXPECT_EQ(done.by_store.load(), static_cast<int>(tenants.size()));
  ASSERT_EQ(fw_admit(c, &r, &d), FW_OK);  // and the next admit is Redis' too: no breaker opened
  EXPECT_EQ(d.fail_reason, FW_FAIL_NONE);
  EXPECT_FALSE(d.degraded);
  fw_release(c, d.ticket);
  fw_client_free(c);
}

TEST(Hold, AHoldNeverFlushedStillGoesOut) {
  // An event loop that stopped between a hold and its flush (asyncio.run ending with the flush still
  // scheduled): its admit and its release still reach Redis once past the batch window (the default,
  // 200 us), instead of waiting for a flush that never comes (the released slot would stay taken).
  RedisServer redis;
  fw_client *c = redis_client(redis.port(), "\"concurrency\": {\"limit\": 1}, \"redis\": {\"deadline_ms\": 2000}");
  ASSERT_NE(c, nullptr);
  const std::string t = "one";
  fw_request r = request_for(t);
  fw_decision d = FW_DECISION_INIT;
  ASSERT_EQ(fw_admit(c, &r, &d), FW_OK);  // connected, scripts loaded
  ASSERT_TRUE(d.allowed);
  ASSERT_EQ(fw_client_hold(c), FW_OK);
  fw_release(c, d.ticket);  // held, never flushed
  Done done;
  admit_later(c, "other", done);
  wait_for(done.calls, 1);
  EXPECT_EQ(done.by_store.load(), 1);
  // The release went out too: from another thread (never held), the slot is free.
  std::thread([&] {
    fw_decision again = FW_DECISION_INIT;
    for (int i = 0; i < 200; i++) {
      ASSERT_EQ(fw_admit(c, &r, &again), FW_OK);
      if (again.allowed) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_TRUE(again.allowed);
    EXPECT_EQ(again.fail_reason, FW_FAIL_NONE);
    fw_release(c, again.ticket);
  }).join();
  fw_release(c, done.ticket.load());
  fw_client_free(c);
}

// How many tenants have a slot taken in Redis (their concurrency sets; an emptied set is gone).
int64_t tenants_with_slots(int port) {
  return std::stoll(command_at(port, {"EVAL", "return #redis.call('KEYS', '*:conc')", "0"}));
}

// Releases `ticket` while an admit (tenant "waits", answered into `done`) waits on Redis: CLIENT PAUSE holds
// it there for 300 ms, and the release is made once the admit is written (a release queued with it would
// go with it). Returns once that admit is answered, by Redis.
void release_while_an_admit_waits(fw_client *c, int port, fw_ticket ticket, Done &done) {
  ASSERT_EQ(command_at(port, {"CLIENT", "PAUSE", "300", "ALL"}), "OK");
  admit_later(c, "waits", done);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  fw_release(c, ticket);
  wait_for(done.calls, 1);
  ASSERT_EQ(done.by_store.load(), 1);
}

// A client whose blocking callers go through the I/O thread (redis.direct_connections 0), as every call of
// a thread that holds does, and a blocking caller's when its own connection is busy.
const std::string kThroughIo =
    "\"request_rate\": {\"rate\": 1000, \"burst\": 1000}, \"concurrency\": {\"limit\": 100}, "
    "\"redis\": {\"deadline_ms\": 2000, \"flags_poll_ms\": 3600000, \"batch_window_us\": 1000000, "
    "\"direct_connections\": 0}";

TEST(Hold, AReleaseRidesWithTheNextCall) {
  // A release that the I/O thread sends, made while another request's admit waits on Redis, is not
  // written alone; it goes out with the next call anyone makes, ahead of it.
  RedisServer redis;
  fw_client *c = redis_client(redis.port(), kThroughIo);
  const std::string a = "a", b = "b";
  fw_request ra = request_for(a), rb = request_for(b);
  fw_decision da = FW_DECISION_INIT;
  ASSERT_EQ(fw_admit(c, &ra, &da), FW_OK);
  ASSERT_EQ(da.fail_reason, FW_FAIL_NONE);
  ASSERT_NE(da.ticket, 0u);

  Done done;  // the admit of tenant "waits"
  release_while_an_admit_waits(c, redis.port(), da.ticket, done);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // time for Redis to run it, had it been sent
  EXPECT_EQ(tenants_with_slots(redis.port()), 2) << "the release was written alone";  // a's and waits'

  // The next call takes it along, ahead of itself: by b's answer, a's slot is free.
  fw_decision db = FW_DECISION_INIT;
  ASSERT_EQ(fw_admit(c, &rb, &db), FW_OK);
  EXPECT_EQ(db.fail_reason, FW_FAIL_NONE);
  EXPECT_EQ(tenants_with_slots(redis.port()), 2);  // waits' and b's
  fw_release(c, db.ticket);
  fw_release(c, done.ticket.load());
  fw_client_free(c);
}

TEST(Hold, AReleaseWithNoRideGoesOutByTheWindow) {
  // A release with no call after it goes out alone once it has waited redis.batch_window_us (50 ms here):
  // one made while an admit waits on Redis (that admit's reply brings the I/O thread round), and one made
  // when nothing does (the I/O thread is woken to time it).
  RedisServer redis;
  fw_client *c = redis_client(redis.port(),
                              "\"concurrency\": {\"limit\": 100}, \"redis\": {\"deadline_ms\": 2000, "
                              "\"flags_poll_ms\": 3600000, \"batch_window_us\": 50000, \"direct_connections\": 0}");
  ASSERT_NE(c, nullptr);
  auto slots_become = [&](int64_t want) {
    int64_t now = -1;
    for (int i = 0; i < 200 && (now = tenants_with_slots(redis.port())) != want; i++)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return now;
  };
  const std::string a = "a";
  fw_request ra = request_for(a);
  fw_decision da = FW_DECISION_INIT;
  ASSERT_EQ(fw_admit(c, &ra, &da), FW_OK);
  ASSERT_EQ(da.fail_reason, FW_FAIL_NONE);
  Done done;  // the admit of tenant "waits"
  release_while_an_admit_waits(c, redis.port(), da.ticket, done);
  EXPECT_EQ(slots_become(1), 1) << "a's release never went out";  // waits' slot alone

  fw_release(c, done.ticket.load());  // nothing waits on Redis now
  EXPECT_EQ(slots_become(0), 0) << "waits' release never went out";
  fw_client_free(c);
}

TEST(Hold, AThreadsReleaseStaysAheadOfItsNextAdmit) {
  // One slot, one thread, a 1 s window: each release goes ahead of the thread's next admit, so that it
  // finds the slot free: through the I/O thread (the release waits for a ride, and the admit is that
  // ride), and on the thread's own connection (the direct path: both written there, in order).
  for (const char *direct : {"0", "8"}) {
    SCOPED_TRACE(std::string("direct_connections ") + direct);
    RedisServer redis;
    fw_client *c = redis_client(redis.port(), std::string("\"concurrency\": {\"limit\": 1}, \"redis\": {") +
                                                  "\"deadline_ms\": 2000, \"flags_poll_ms\": 3600000, "
                                                  "\"batch_window_us\": 1000000, \"direct_connections\": " +
                                                  direct + "}");
    ASSERT_NE(c, nullptr);
    const std::string t = "one";
    fw_request r = request_for(t);
    for (int i = 0; i < 50; i++) {
      fw_decision d = FW_DECISION_INIT;
      ASSERT_EQ(fw_admit(c, &r, &d), FW_OK);
      EXPECT_TRUE(d.allowed) << "admit " << i;
      EXPECT_EQ(d.fail_reason, FW_FAIL_NONE);
      EXPECT_FALSE(d.degraded);
      fw_release(c, d.ticket);
    }
    fw_client_free(c);
  }
}

TEST(Hold, InProcessStoresAndBadArguments) {
  fw_client *c = nullptr;
  ASSERT_EQ(fw_client_new(&c, "{\"request_rate\": {\"rate\": 1, \"burst\": 2}}"), FW_OK);
  EXPECT_EQ(fw_client_hold(c), FW_OK);
  const std::string m = "m";
  fw_request r = request_for(m);
  fw_decision d = FW_DECISION_INIT;
  ASSERT_EQ(fw_admit(c, &r, &d), FW_OK);  // decided at once all the same
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(fw_client_flush(c), FW_OK);
  fw_client_close(c);
  EXPECT_EQ(fw_client_hold(c), FW_ECLOSED);
  EXPECT_EQ(fw_client_flush(c), FW_ECLOSED);
  fw_client_free(c);
  EXPECT_EQ(fw_client_hold(nullptr), FW_EINVAL);
}

}  // namespace
