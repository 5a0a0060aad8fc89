// The parts of core/src/redis/ on their own: the URL parser, RESP, the scripts' replies, and a
// connection (plain TCP here; TLS in tls_test.cpp) against a real redis-server.
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "redis_server.hpp"
#include "stores/redis/connection.hpp"
#include "stores/redis/resp.hpp"
#include "stores/redis/scripts.hpp"
#include "stores/redis/url.hpp"
#include "stores/store_factory.hpp"
#include "util/digests.hpp"

using floodwall::Connection;
using floodwall::parse_redis_url;
using floodwall::RedisUrl;
using floodwall::StoreError;
using floodwall::testing::RedisServer;

namespace {

std::string error_of(const std::string &url) {
  try {
    parse_redis_url(url);
  } catch (const StoreError &e) {
    return e.what();
  }
  return "";
}

int64_t steady_us() {
  using namespace std::chrono;
  return duration_cast<microseconds>(steady_clock::now().time_since_epoch()).count();
}

}  // namespace

TEST(RedisUrl, EveryFormIsParsed) {
  RedisUrl u = parse_redis_url("redis://127.0.0.1:6380/3");
  EXPECT_EQ(u.kind, RedisUrl::Kind::single);
  EXPECT_FALSE(u.tls);
  EXPECT_EQ(u.host(), "127.0.0.1");
  EXPECT_EQ(u.port(), 6380);
  EXPECT_EQ(u.db, 3);

  u = parse_redis_url("rediss://app:s3cret@cache.example.com:6380");
  EXPECT_TRUE(u.tls);
  EXPECT_EQ(u.user, "app");
  EXPECT_EQ(u.password, "s3cret");
  EXPECT_EQ(u.host(), "cache.example.com");
  EXPECT_EQ(u.db, 0);

  u = parse_redis_url("redis+sentinel://:pw@10.0.0.1:26379,10.0.0.2:26380,[::1]:26381/mymaster/2");
  EXPECT_EQ(u.kind, RedisUrl::Kind::sentinel);
  ASSERT_EQ(u.nodes.size(), 3u);
  EXPECT_EQ(u.nodes[1].host, "10.0.0.2");
  EXPECT_EQ(u.nodes[1].port, 26380);
  EXPECT_EQ(u.nodes[2].host, "::1");
  EXPECT_EQ(u.master, "mymaster");
  EXPECT_EQ(u.db, 2);
  EXPECT_EQ(u.password, "pw");
  EXPECT_TRUE(u.user.empty());

  u = parse_redis_url("rediss+cluster://a:7000,b:7001");
  EXPECT_EQ(u.kind, RedisUrl::Kind::cluster);
  EXPECT_TRUE(u.tls);
  EXPECT_EQ(u.nodes.size(), 2u);
  EXPECT_EQ(parse_redis_url("rediss+sentinel://h/m").kind, RedisUrl::Kind::sentinel);
  EXPECT_EQ(parse_redis_url("redis+cluster://h:1").nodes[0].port, 1);
}

TEST(RedisUrl, UserAndPasswordMayBePercentEncoded) {
  RedisUrl u = parse_redis_url("rediss://us%3Aer:p%40ss%2Fw%3Ard%zz@h:1/0");
  EXPECT_EQ(u.user, "us:er");
  EXPECT_EQ(u.password, "p@ss/w:rd%zz");  // a stray % stays as it is
}

TEST(RedisUrl, ErrorsQuoteTheUrlWholeWithoutItsPassword) {
  std::string long_host(100, 'h');
  std::string e = error_of("redis://user:hunter2@" + long_host + ":99999/0");
  EXPECT_NE(e.find("bad port"), std::string::npos) << e;
  EXPECT_NE(e.find("redis://user:***@" + long_host + ":99999/0"), std::string::npos) << e;
  EXPECT_EQ(e.find("hunter2"), std::string::npos) << e;
  e = error_of("redis://:hunter2@h:1,h:2/0");
  EXPECT_NE(e.find("one host:port only"), std::string::npos) << e;
  EXPECT_EQ(e.find("hunter2"), std::string::npos) << e;
  EXPECT_NE(error_of("redis+sentinel://h:1").find("master's name is missing"), std::string::npos);
  EXPECT_NE(error_of("redis+cluster://h:1/3").find("database 0 only"), std::string::npos);
  EXPECT_NE(error_of("redis://h:1/x").find("bad database number"), std::string::npos);
  EXPECT_EQ(floodwall::redact_url("rediss://hunter2@h:1"), "rediss://***@h:1");
  EXPECT_EQ(floodwall::redact_url("redis://h:1/0"), "redis://h:1/0");
}

TEST(RedisUrl, TheStoreFactoryListsEverySchemeAndHidesThePassword) {
  floodwall::Policy p;
  floodwall::SteadyClock clock;
  p.store = "redis+sentinel:/x:hunter2@h:1/0" + std::string(80, 'x');
  try {
    floodwall::make_store(p, clock);
    FAIL() << "an unknown scheme was accepted";
  } catch (const StoreError &e) {
    std::string m = e.what();
    EXPECT_NE(m.find(std::string(80, 'x')), std::string::npos) << "the URL quoted whole: " << m;
    for (const char *s : {"memory://", "shm://NAME", "redis://", "rediss://", "redis+sentinel://", "redis+cluster://"})
      EXPECT_NE(m.find(s), std::string::npos) << s;
    EXPECT_EQ(m.find("hunter2"), std::string::npos) << m;
  }
  // A cluster has one database: a number in its URL is refused, naming the field.
  for (const char *url : {"redis+cluster://h:1/1", "rediss+cluster://u:hunter2@h:1,h:2/3"}) {
    p.store = url;
    try {
      floodwall::make_store(p, clock);
      FAIL() << url << " was accepted";
    } catch (const StoreError &e) {
      std::string m = e.what();
      EXPECT_EQ(m.rfind("store:", 0), 0u) << m;
      EXPECT_NE(m.find("database"), std::string::npos) << m;
      EXPECT_EQ(m.find("hunter2"), std::string::npos) << m;
    }
  }
}

TEST(Resp, WhatTheStoreWritesIsWhatHiredisReads) {
  std::string cmd;
  floodwall::resp_len(cmd, '*', 4);
  floodwall::resp_bulk(cmd, "SET");
  floodwall::resp_bulk(cmd, std::string_view("k\0ey", 4));
  floodwall::resp_int(cmd, -1234567890123);
  floodwall::resp_slot_id(cmd, floodwall::SlotId{1, 2});
  EXPECT_EQ(cmd, floodwall::resp_format({"SET", std::string_view("k\0ey", 4), "-1234567890123",
                                         std::string_view("\1\0\0\0\0\0\0\0\2\0\0\0\0\0\0\0", 16)}));
  std::string head = floodwall::resp_evalsha_head("abc", 2, 3);
  EXPECT_EQ(head, "*8\r\n$7\r\nEVALSHA\r\n$3\r\nabc\r\n$1\r\n2\r\n");
}

TEST(Resp, ErrorsAreSortedIntoConfigurationAndScriptRefusals) {
  EXPECT_TRUE(floodwall::resp_is_config_error("WRONGPASS invalid username-password pair"));
  EXPECT_TRUE(floodwall::resp_is_config_error("NOPERM this user has no permissions to run the 'evalsha' command"));
  EXPECT_TRUE(floodwall::resp_is_config_error("MOVED 3999 127.0.0.1:6381"));
  EXPECT_FALSE(floodwall::resp_is_config_error("BUSY Redis is busy running a script"));
  EXPECT_FALSE(floodwall::resp_is_config_error("READONLY You can't write against a read only replica."));
  EXPECT_TRUE(floodwall::resp_is_script_refusal(
      "ERR Unknown Redis command called from script script: c9a6, on @user_script:48."));
  EXPECT_TRUE(floodwall::resp_is_script_refusal("ERR This Redis command is not allowed from script"));
  EXPECT_FALSE(floodwall::resp_is_script_refusal("NOSCRIPT No matching script. Please use EVAL."));
}

namespace {
std::string read_lua(const std::string &name) {
  std::ifstream in(std::string(FW_SOURCE_DIR) + "/lua/" + name);
  std::stringstream body;
  body << in.rdbuf();
  return body.str();
}
}  // namespace

TEST(Scripts, EachIsCalledByTheSha1OfItsFileInLua) {
  floodwall::Scripts s;
  const std::pair<const floodwall::Script *, const char *> files[] = {{&s.admit, "tenant_admit.lua"},
                                                                      {&s.release, "release.lua"},
                                                                      {&s.flags, "read_flags.lua"},
                                                                      {&s.lease, "tenant_lease.lua"},
                                                                      {&s.report, "fleet_report.lua"}};
  for (auto [script, file] : files) {
    std::string source = read_lua(file), text;
    ASSERT_FALSE(source.empty()) << file;
    // Each line "-- include: lib/X.lua" is that file's text (the bucket's arithmetic, lua/lib/bucket.lua).
    std::istringstream lines(source);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("-- include: ", 0) == 0) {
        std::string lib = read_lua(line.substr(12));
        ASSERT_FALSE(lib.empty()) << file << ": " << line;
        text += lib;
      } else {
        text += line + "\n";
      }
    }
    EXPECT_EQ(script->body, text) << file;
    EXPECT_EQ(script->sha, floodwall::sha1_hex(text)) << file;
    EXPECT_EQ(script->sha.size(), 40u);
  }
  EXPECT_EQ(s.all().size(), 5u);
  // The two scripts that touch a bucket share its arithmetic, from one file.
  EXPECT_NE(s.admit.body.find("local function bucket_write("), std::string_view::npos);
  EXPECT_NE(s.lease.body.find("local function bucket_write("), std::string_view::npos);
}

TEST(Scripts, RepliesOfAnotherShapeAreRefused) {
  redisReader *reader = redisReaderCreate();
  auto read = [&](const std::string &bytes) {
    redisReaderFeed(reader, bytes.data(), bytes.size());
    void *r = nullptr;
    EXPECT_EQ(redisReaderGetReply(reader, &r), REDIS_OK);
    return static_cast<redisReply *>(r);
  };
  floodwall::AdmitResult a;
  redisReply *r = read(":-2000001\r\n");  // a bucket that had 2 tokens, too few
  EXPECT_TRUE(floodwall::parse_admit_reply(r, false, 0, true, a));
  EXPECT_FALSE(a.rate_ok);
  EXPECT_FALSE(a.committed);
  EXPECT_EQ(a.tokens_m, 2000000);
  EXPECT_FALSE(floodwall::parse_admit_reply(r, true, 0, true, a)) << "a slot admit expects six elements";
  freeReplyObject(r);
  r = read("*2\r\n$7\r\nblocked\r\n:0\r\n");  // the control record: blocked for good
  EXPECT_TRUE(floodwall::parse_admit_reply(r, false, 0, true, a));
  EXPECT_TRUE(a.blocked);
  EXPECT_FALSE(a.committed);
  freeReplyObject(r);
  r = read("*2\r\n$4\r\ntier\r\n$3\r\npro\r\n");  // another tier
  EXPECT_TRUE(floodwall::parse_admit_reply(r, true, 2, true, a));
  EXPECT_TRUE(a.other_tier);
  EXPECT_EQ(a.tier, "pro");
  freeReplyObject(r);
  r = read("*2\r\n$5\r\nnoise\r\n:0\r\n");
  EXPECT_FALSE(floodwall::parse_admit_reply(r, false, 0, true, a)) << "an unknown answer";
  freeReplyObject(r);
  r = read("*8\r\n:1\r\n:1\r\n:5\r\n:1\r\n:0\r\n:1\r\n:7000000\r\n:9000000\r\n");  // an override applied
  EXPECT_TRUE(floodwall::parse_admit_reply(r, false, 0, true, a));
  EXPECT_EQ(a.rate_m, 7000000);
  EXPECT_EQ(a.burst_m, 9000000);
  freeReplyObject(r);
  r = read("*6\r\n:1\r\n:2\r\n:3\r\n:4\r\n:5\r\n:0\r\n");
  floodwall::LeaseResult l;
  EXPECT_TRUE(floodwall::parse_lease_reply(r, l));
  EXPECT_EQ(l.granted_m, 1);
  EXPECT_EQ(l.store_now_us, 5);
  EXPECT_FALSE(l.controlled);
  freeReplyObject(r);
  r = read("*6\r\n:1\r\n:2\r\n$1\r\n3\r\n:4\r\n:5\r\n:0\r\n");
  EXPECT_FALSE(floodwall::parse_lease_reply(r, l)) << "a string where an integer belongs";
  freeReplyObject(r);
  redisReaderFree(reader);
}

TEST(RedisConnection, CarriesCommandsAndHoldsWhatIsBehindTheBarrier) {
  RedisServer redis;
  Connection c;
  ASSERT_TRUE(c.connect_blocking({"127.0.0.1", redis.port()}, nullptr, steady_us() + 2'000'000)) << c.error();
  redisReply *r = c.roundtrip(floodwall::resp_format({"PING"}), steady_us() + 1'000'000);
  ASSERT_NE(r, nullptr) << c.error();
  EXPECT_EQ(std::string(r->str, r->len), "PONG");
  freeReplyObject(r);

  // Behind the barrier nothing is written: SET waits until it is lifted.
  c.append(floodwall::resp_format({"ECHO", "first"}));
  c.set_barrier();
  c.append(floodwall::resp_format({"SET", "held", "1"}));
  bool all = false;
  ASSERT_TRUE(c.write(all));
  EXPECT_TRUE(all) << "everything before the barrier is written";
  EXPECT_FALSE(c.has_output());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(redis.command({"GET", "held"}), "<nil>");
  c.clear_barrier();
  EXPECT_TRUE(c.has_output());
  ASSERT_TRUE(c.write(all));
  int got = 0;
  for (int i = 0; i < 200 && got < 2; i++) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ASSERT_TRUE(c.read());
    while (c.next_reply(&r) == 1) {
      got++;
      freeReplyObject(r);
    }
  }
  EXPECT_EQ(got, 2);
  EXPECT_EQ(redis.command({"GET", "held"}), "1");

  // The server goes away: a read says so, as a connection failure.
  redis.stop();
  bool failed = false;
  for (int i = 0; i < 100 && !failed; i++) {
    failed = !c.read();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(failed);
  EXPECT_EQ(c.failure(), floodwall::FailReason::connection);
}

TEST(RedisConnection, ANameThatDoesNotResolveOrAPortThatRefusesIsAConnectionFailure) {
  Connection c;
  EXPECT_FALSE(c.connect_blocking({"no-such-host.invalid", 6379}, nullptr, steady_us() + 2'000'000));
  EXPECT_EQ(c.failure(), floodwall::FailReason::connection);
  EXPECT_NE(c.error().find("no-such-host.invalid"), std::string::npos) << c.error();
  EXPECT_FALSE(c.connect_blocking({"127.0.0.1", floodwall::testing::free_port()}, nullptr, steady_us() + 2'000'000));
  EXPECT_EQ(c.failure(), floodwall::FailReason::connection);
}
