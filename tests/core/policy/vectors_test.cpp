// tests/vectors.json, the vectors every binding checks itself against, run against the core directly:
// derive_tenant, backoff_delay and parse_retry_after. The expected values come from an independent oracle
// (Python's hashlib, ipaddress and calendar), not from this code.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "engine/guard.hpp"
#include "http/backoff.hpp"
#include "policy/policy.hpp"
#include "policy/request_tenant.hpp"
#include "policy/route.hpp"

using nlohmann::json;

namespace {

json load_vectors() {
  std::ifstream in(FW_VECTORS_FILE);
  if (!in) {
    ADD_FAILURE() << "cannot open " << FW_VECTORS_FILE;
    return json::object();
  }
  std::stringstream text;
  text << in.rdbuf();
  return json::parse(text.str());
}

const json &vectors() {
  static const json doc = load_vectors();
  return doc;
}

}  // namespace

TEST(Vectors, FileHasEverySection) {
  const json &v = vectors();
  ASSERT_TRUE(v.is_object());
  EXPECT_GE(v.at("tenant_keys").size(), 30u);
  EXPECT_GE(v.at("backoff").size(), 10u);
  EXPECT_GE(v.at("retry_after").size(), 10u);
  EXPECT_GE(v.at("routes").size(), 30u);
}

TEST(Vectors, Routes) {
  for (const json &c : vectors().at("routes")) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    std::string route = c.value("route", ""), path = c.value("path", ""), buf;
    EXPECT_EQ(floodwall::request_route(route, path, buf), c.at("route_family").get<std::string>());
  }
}

TEST(Vectors, TenantKeys) {
  for (const json &c : vectors().at("tenant_keys")) {
    std::string name = c.at("name").get<std::string>();
    SCOPED_TRACE(name);
    // The tenant section goes through parse_policy, so the vectors also hold the parser to the schema.
    floodwall::TenantPolicy policy;
    if (c.contains("tenant")) policy = floodwall::parse_policy(json{{"tenant", c.at("tenant")}}.dump()).tenant;
    std::vector<std::string> bytes;
    bytes.reserve(2 * c.at("headers").size());
    for (const json &h : c.at("headers")) {
      bytes.push_back(h.at(0).get<std::string>());
      bytes.push_back(h.at(1).get<std::string>());
    }
    std::vector<floodwall::RequestHeader> headers;
    for (size_t i = 0; i < bytes.size(); i += 2)
      headers.push_back({bytes[i].data(), bytes[i].size(), bytes[i + 1].data(), bytes[i + 1].size()});
    std::string peer = c.at("peer").is_null() ? "" : c.at("peer").get<std::string>();
    std::string check = c.value("check", std::string());
    ASSERT_TRUE(check.empty() || check == "verified" || check == "rejected") << check;
    auto said = check == "verified"   ? floodwall::CredentialCheck::verified
                : check == "rejected" ? floodwall::CredentialCheck::rejected
                                      : floodwall::CredentialCheck::unchecked;
    EXPECT_EQ(floodwall::derive_tenant(policy, headers.data(), headers.size(), peer, said),
              c.at("key").get<std::string>());
    // What a verify hook would be asked about.
    auto credential = floodwall::request_credential(policy, headers.data(), headers.size(), peer);
    ASSERT_TRUE(c.contains("credential"));
    if (c.at("credential").is_null()) {
      EXPECT_FALSE(credential.has_value());
    } else {
      ASSERT_TRUE(credential.has_value());
      EXPECT_EQ(credential->value, c.at("credential").get<std::string>());
    }
  }
}

TEST(Vectors, Backoff) {
  for (const json &c : vectors().at("backoff")) {
    SCOPED_TRACE(c.dump());
    floodwall::Backoff b;
    if (c.contains("base_s")) b.base_s = c.at("base_s").get<double>();
    if (c.contains("cap_s")) b.cap_s = c.at("cap_s").get<double>();
    double got = floodwall::backoff_delay(b, c.at("attempt").get<unsigned>(), c.at("retry_after_s").get<double>(),
                                          c.at("random").get<double>());
    EXPECT_DOUBLE_EQ(got, c.at("delay_s").get<double>());
  }
}

TEST(Vectors, RetryAfter) {
  for (const json &c : vectors().at("retry_after")) {
    SCOPED_TRACE(c.dump());
    auto got = floodwall::parse_retry_after(c.at("value").get<std::string>(), c.at("now").get<double>());
    if (c.at("seconds").is_null()) {
      EXPECT_FALSE(got.has_value()) << *got;
    } else {
      ASSERT_TRUE(got.has_value());
      EXPECT_DOUBLE_EQ(*got, c.at("seconds").get<double>());
    }
  }
}

TEST(Backoff, EveryBadArgumentNamesItsField) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  struct Case {
    double base, cap;
    unsigned attempts;
    double retry_after, random;
    const char *field;
  };
  const Case cases[] = {
      {0, 20, 5, -1, 0.5, "backoff.base_s:"},   {-1, 20, 5, -1, 0.5, "backoff.base_s:"},
      {nan, 20, 5, -1, 0.5, "backoff.base_s:"}, {inf, inf, 5, -1, 0.5, "backoff.base_s:"},
      {1, 0.5, 5, -1, 0.5, "backoff.cap_s:"},   {0.1, inf, 5, -1, 0.5, "backoff.cap_s:"},
      {0.1, nan, 5, -1, 0.5, "backoff.cap_s:"}, {0.1, 20, 0, -1, 0.5, "backoff.attempts:"},
      {0.1, 20, 5, -1, 1, "random:"},           {0.1, 20, 5, -1, -0.1, "random:"},
      {0.1, 20, 5, -1, nan, "random:"},         {0.1, 20, 5, nan, 0.5, "retry_after_s:"},
      {0.1, 20, 5, inf, 0.5, "retry_after_s:"}, {0.1, 20, 5, -inf, 0.5, "retry_after_s:"},
  };
  for (const Case &c : cases) {
    floodwall::Backoff b;
    b.base_s = c.base;
    b.cap_s = c.cap;
    b.attempts = c.attempts;
    try {
      floodwall::backoff_delay(b, 0, c.retry_after, c.random);
      ADD_FAILURE() << "accepted " << c.field;
    } catch (const floodwall::BadRequest &e) {
      EXPECT_EQ(std::string(e.what()).rfind(c.field, 0), 0u) << e.what();
    }
  }
}

TEST(Backoff, GrowsToTheCapAndNeverBelowRetryAfter) {
  floodwall::Backoff b;
  double prev = 0;
  for (unsigned a = 0; a < 200; a++) {
    double d = floodwall::backoff_delay(b, a, -1, 0.999999);
    EXPECT_GE(d, prev);
    EXPECT_LT(d, b.cap_s);
    prev = d;
  }
  EXPECT_DOUBLE_EQ(floodwall::backoff_delay(b, 3, 7, 0), 7);
  EXPECT_DOUBLE_EQ(floodwall::backoff_delay(b, ~0u, -1, 0.5), 10);
}

TEST(Backoff, RetryAfterIsHostileInputProof) {
  using floodwall::parse_retry_after;
  EXPECT_DOUBLE_EQ(*parse_retry_after(std::string(100000, '9'), 0), 1e12);
  EXPECT_FALSE(parse_retry_after(std::string(100000, 'x'), 0));
  EXPECT_FALSE(parse_retry_after(std::string("12\0003", 4), 0));
  EXPECT_FALSE(parse_retry_after("12\r\n", 0));
  EXPECT_FALSE(parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", std::numeric_limits<double>::quiet_NaN()));
  EXPECT_DOUBLE_EQ(*parse_retry_after("5", std::numeric_limits<double>::quiet_NaN()), 5)
      << "delay-seconds do not depend on the clock";
  // A far-future date is capped like delay-seconds; the clock a million years back is refused.
  EXPECT_DOUBLE_EQ(*parse_retry_after("Fri, 31 Dec 9999 23:59:59 GMT", -2e13), 1e12);
  EXPECT_FALSE(parse_retry_after("Fri, 31 Dec 9999 23:59:59 GMT", -1e300));
  EXPECT_DOUBLE_EQ(*parse_retry_after("Fri, 31 Dec 9999 23:59:59 GMT", 0), 253402300799.0);
}
