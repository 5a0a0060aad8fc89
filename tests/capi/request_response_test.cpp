// The version 2 request and the version 3 decision, the response as name/value pairs, the tenant derived
// in the core, the can-block query and fw_admit_async2's inline flag, through the C ABI.
#include <floodwall.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <floodwall.hpp>
#include <string>
#include <utility>
#include <vector>

namespace {

std::vector<fw_header> headers_of(const std::vector<std::pair<std::string, std::string>> &h) {
  std::vector<fw_header> out;
  for (const auto &[n, v] : h) out.push_back({n.data(), n.size(), v.data(), v.size()});
  return out;
}

// The key of a request whose credential the app verified (a verify hook said yes), unless `check` says
// otherwise.
std::string key_of(fw_client *c, const std::vector<std::pair<std::string, std::string>> &h, const char *peer,
                   int check = FW_CREDENTIAL_VERIFIED) {
  std::vector<fw_header> hs = headers_of(h);
  fw_request r = FW_REQUEST_INIT;
  r.headers = hs.data();
  r.header_count = hs.size();
  r.peer = peer;
  r.peer_len = peer ? std::strlen(peer) : 0;
  r.credential = check;
  fw_buf b = FW_BUF_INIT;
  EXPECT_EQ(fw_tenant_key(c, &r, &b), FW_OK);
  std::string key(b.ptr ? b.ptr : "", b.size);
  fw_buf_dispose(&b);
  return key;
}

}  // namespace

TEST(CApiRequest, AdmitsWithoutATenantDeriveItFromHeadersAndPeer) {
  floodwall::Client fw(R"({"request_rate": {"rate": 0.001, "burst": 2}})");
  std::vector<std::pair<std::string, std::string>> bearer = {{"Host", "api"}, {"authorization", "Bearer s3cret"}};
  std::string key = key_of(fw.get(), bearer, "10.0.0.1");
  EXPECT_EQ(key.rfind("key:", 0), 0u) << key;
  EXPECT_EQ(key.size(), 36u);
  EXPECT_EQ(key.find("s3cret"), std::string::npos) << "a secret never becomes a key";
  EXPECT_EQ(key_of(fw.get(), bearer, "192.0.2.9"), key) << "one credential, one bucket, whatever the address";
  EXPECT_EQ(key_of(fw.get(), {}, "192.0.2.9"), "ip:192.0.2.9");
  EXPECT_EQ(key_of(fw.get(), {}, nullptr), "anonymous");
  // Nobody vouched for the credential, or the app rejected it: the address.
  EXPECT_EQ(key_of(fw.get(), bearer, "192.0.2.9", FW_CREDENTIAL_UNCHECKED), "ip:192.0.2.9");
  EXPECT_EQ(key_of(fw.get(), bearer, "192.0.2.9", FW_CREDENTIAL_REJECTED), "ip:192.0.2.9");

  // Two admits from different peers with one token spend one bucket of 2.
  std::vector<fw_header> hs = headers_of(bearer);
  fw_request r = FW_REQUEST_INIT;
  r.headers = hs.data();
  r.header_count = hs.size();
  r.credential = FW_CREDENTIAL_VERIFIED;
  fw_decision d = FW_DECISION_INIT;
  for (const char *peer : {"10.0.0.1", "10.0.0.2", "10.0.0.3"}) {
    r.peer = peer;
    r.peer_len = std::strlen(peer);
    ASSERT_EQ(fw_admit(fw.get(), &r, &d), FW_OK);
  }
  EXPECT_FALSE(d.allowed) << "the third admit of one token is over the burst of 2";
  // The same key given explicitly is the same bucket.
  fw_request explicit_key = FW_REQUEST_INIT;
  explicit_key.tenant = key.data();
  explicit_key.tenant_len = key.size();
  ASSERT_EQ(fw_admit(fw.get(), &explicit_key, &d), FW_OK);
  EXPECT_FALSE(d.allowed);
}

// What a verify hook is asked about, the check the request carries, and the deadline it is given.
TEST(CApiRequest, TheCredentialAHookIsAskedAboutAndWhatItsAnswerDoes) {
  floodwall::Client fw(R"({"request_rate": {"rate": 0.001, "burst": 1}, "redis": {"deadline_ms": 75}})");
  auto credential_of = [&](const std::vector<std::pair<std::string, std::string>> &h, const char *peer, int *found) {
    std::vector<fw_header> hs = headers_of(h);
    fw_request r = FW_REQUEST_INIT;
    r.headers = hs.data();
    r.header_count = hs.size();
    r.peer = peer;
    r.peer_len = peer ? std::strlen(peer) : 0;
    r.credential = FW_CREDENTIAL_REJECTED;  // not read
    fw_buf b = FW_BUF_INIT;
    EXPECT_EQ(fw_request_credential(fw.get(), &r, &b, found), FW_OK) << fw_error_last()->message;
    std::string out(b.ptr ? b.ptr : "", b.size);
    fw_buf_dispose(&b);
    return out;
  };
  int found = -1;
  EXPECT_EQ(credential_of({{"Authorization", " Bearer  s3cret "}}, "10.0.0.1", &found), "s3cret");
  EXPECT_EQ(found, 1);
  EXPECT_EQ(credential_of({{"X-Api-Key", "k-1"}}, nullptr, &found), "k-1");
  EXPECT_EQ(found, 1);
  EXPECT_EQ(credential_of({{"Host", "api"}}, "10.0.0.1", &found), "");
  EXPECT_EQ(found, 0);

  fw_request r = FW_REQUEST_INIT;
  fw_buf b = FW_BUF_INIT;
  EXPECT_EQ(fw_request_credential(fw.get(), &r, &b, nullptr), FW_EINVAL);
  EXPECT_NE(std::string(fw_error_last()->message).find("found"), std::string::npos) << fw_error_last()->message;
  EXPECT_EQ(fw_request_credential(fw.get(), nullptr, &b, &found), FW_EINVAL);
  r.version = 1;  // a version 1 request has no headers
  EXPECT_EQ(fw_request_credential(fw.get(), &r, &b, &found), FW_EINVAL);
  EXPECT_NE(std::string(fw_error_last()->message).find("request.version"), std::string::npos);

  // A check that is none of the three is refused, naming the field; admit and tenant_key alike.
  fw_request bad = FW_REQUEST_INIT;
  bad.credential = 7;
  fw_decision d = FW_DECISION_INIT;
  EXPECT_EQ(fw_admit(fw.get(), &bad, &d), FW_EINVAL);
  EXPECT_NE(std::string(fw_error_last()->message).find("credential"), std::string::npos) << fw_error_last()->message;
  EXPECT_EQ(fw_tenant_key(fw.get(), &bad, &b), FW_EINVAL);
  // A version 2 request has no check field: unchecked, whatever lies beyond its end.
  bad.version = 2;
  EXPECT_EQ(fw_tenant_key(fw.get(), &bad, &b), FW_OK);
  fw_buf_dispose(&b);

  int64_t deadline = 0;
  EXPECT_EQ(fw_client_deadline_ms(fw.get(), &deadline), FW_OK);
  EXPECT_EQ(deadline, 75);
  EXPECT_EQ(fw_client_deadline_ms(fw.get(), nullptr), FW_EINVAL);
}

// Every limiter keys on the one derived tenant: made-up keys from one address share its route limit and its
// quota as they share its bucket and its slots, while a verified key has its own of each.
TEST(CApiRequest, MadeUpKeysShareTheAddresssLimitsAndQuotasToo) {
  floodwall::Client fw(R"({"request_rate": {"rate": 1000, "burst": 1000,
      "limits": [{"name": "search", "routes": ["/search*"], "rate": 0.001, "burst": 2}]},
      "quotas": [{"name": "daily", "limit": 3, "period": "day"}],
      "concurrency": {"limit": 100}})");
  auto admit = [&](const std::string &key, const char *route, int check) {
    std::vector<std::pair<std::string, std::string>> h = {{"X-API-Key", key}};
    std::vector<fw_header> hs = headers_of(h);
    fw_request r = FW_REQUEST_INIT;
    r.headers = hs.data();
    r.header_count = hs.size();
    r.peer = "203.0.113.50";
    r.peer_len = std::strlen(r.peer);
    r.route = route;
    r.credential = check;
    fw_decision d = FW_DECISION_INIT;
    EXPECT_EQ(fw_admit(fw.get(), &r, &d), FW_OK) << fw_error_last()->message;
    EXPECT_EQ(fw_release(fw.get(), d.ticket), FW_OK);
    return d;
  };
  // The route limit: 2 for the address, whichever made-up key each request carries.
  EXPECT_TRUE(admit("made-up-1", "/search", FW_CREDENTIAL_UNCHECKED).allowed);
  EXPECT_TRUE(admit("made-up-2", "/search", FW_CREDENTIAL_REJECTED).allowed);
  fw_decision third = admit("made-up-3", "/search", FW_CREDENTIAL_UNCHECKED);
  EXPECT_FALSE(third.allowed);
  EXPECT_EQ(third.limiter, FW_LIMITER_REQUEST_RATE);
  EXPECT_GE(third.rule, 0) << "refused by the route limit";
  // The quota: 3 a day for the address; the two searches spent two of them.
  EXPECT_TRUE(admit("made-up-4", "/home", FW_CREDENTIAL_UNCHECKED).allowed);
  fw_decision over = admit("made-up-5", "/home", FW_CREDENTIAL_UNCHECKED);
  EXPECT_FALSE(over.allowed);
  EXPECT_GE(over.rule, 0) << "refused by the quota";
  // A verified key from that address has its own limit and quota.
  EXPECT_TRUE(admit("issued", "/search", FW_CREDENTIAL_VERIFIED).allowed);
  EXPECT_TRUE(admit("issued", "/home", FW_CREDENTIAL_VERIFIED).allowed);
}

namespace {
std::vector<std::string> tenant_headers(fw_client *c) {
  std::vector<std::string> names;
  const char *name = nullptr;
  for (int i = 0; fw_client_tenant_header(c, i, &name) == FW_OK; i++) names.emplace_back(name);
  return names;
}
}  // namespace

// The header names the tenant derivation reads, which a binding may hand over alone: the credentials the
// policy names, and the forwarded header only when some proxy is trusted. The key from those headers
// alone is the key from all of them.
TEST(CApiRequest, TheTenantHeadersAreTheOnesThePolicysDerivationReads) {
  floodwall::Client plain(R"({"request_rate": {"rate": 1, "burst": 1}})");
  EXPECT_EQ(tenant_headers(plain.get()), (std::vector<std::string>{"authorization", "x-api-key"}));
  floodwall::Client proxied(R"({"request_rate": {"rate": 1, "burst": 1},
      "tenant": {"from": ["x-api-key", "ip"], "trusted_proxies": ["10.0.0.0/8"], "forwarded_header": "forwarded"}})");
  EXPECT_EQ(tenant_headers(proxied.get()), (std::vector<std::string>{"x-api-key", "forwarded"}));
  floodwall::Client ip_only(R"({"request_rate": {"rate": 1, "burst": 1}, "tenant": {"from": ["ip"]}})");
  EXPECT_EQ(tenant_headers(ip_only.get()), std::vector<std::string>{});

  const char *name = nullptr;
  EXPECT_EQ(fw_client_tenant_header(plain.get(), 2, &name), FW_EINVAL);
  EXPECT_NE(std::string(fw_error_last()->message).find("index"), std::string::npos) << fw_error_last()->message;
  EXPECT_EQ(fw_client_tenant_header(plain.get(), -1, &name), FW_EINVAL);
  EXPECT_EQ(fw_client_tenant_header(plain.get(), 0, nullptr), FW_EINVAL);

  std::vector<std::pair<std::string, std::string>> all = {{"Host", "api"},
                                                          {"Cookie", "session=1"},
                                                          {"X-Forwarded-For", "203.0.113.7"},
                                                          {"Forwarded", "for=198.51.100.2"},
                                                          {"X-Api-Key", "k1"}};
  for (fw_client *c : {plain.get(), proxied.get(), ip_only.get()}) {
    std::vector<std::string> wanted = tenant_headers(c);
    std::vector<std::pair<std::string, std::string>> kept;
    for (const auto &[n, v] : all) {
      std::string lower;
      for (char ch : n) lower += static_cast<char>(ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch);
      for (const std::string &w : wanted)
        if (w == lower) kept.emplace_back(n, v);
    }
    EXPECT_EQ(key_of(c, kept, "10.1.2.3"), key_of(c, all, "10.1.2.3"));
  }
  all.pop_back();  // no API key: the address, through the trusted proxy's Forwarded header
  EXPECT_EQ(key_of(proxied.get(), all, "10.1.2.3"), "ip:198.51.100.2");
}

TEST(CApiRequest, AnEmptyTenantIsTheAnonymousOneAndNeverSkipped) {
  floodwall::Client fw(R"({"request_rate": {"rate": 0.001, "burst": 1}})");
  fw_request r = FW_REQUEST_INIT;
  r.tenant = "";
  fw_decision d = FW_DECISION_INIT;
  ASSERT_EQ(fw_admit(fw.get(), &r, &d), FW_OK);
  EXPECT_TRUE(d.allowed);
  ASSERT_EQ(fw_admit(fw.get(), &r, &d), FW_OK);
  EXPECT_FALSE(d.allowed) << "every empty key shares one bucket";
  fw_request derived = FW_REQUEST_INIT;  // no tenant, no headers, no peer: anonymous too
  ASSERT_EQ(fw_admit(fw.get(), &derived, &d), FW_OK);
  EXPECT_FALSE(d.allowed);
}

TEST(CApiRequest, NullArraysWithLengthsAreErrorsNamingTheField) {
  floodwall::Client fw(R"({"request_rate": {"rate": 1, "burst": 1}})");
  fw_request r = FW_REQUEST_INIT;
  r.header_count = 3;
  fw_decision d = FW_DECISION_INIT;
  EXPECT_EQ(fw_admit(fw.get(), &r, &d), FW_EINVAL);
  EXPECT_NE(std::string(fw_error_last()->message).find("headers"), std::string::npos);
  r.header_count = 0;
  r.peer_len = 4;
  EXPECT_EQ(fw_admit(fw.get(), &r, &d), FW_EINVAL);
  EXPECT_NE(std::string(fw_error_last()->message).find("peer"), std::string::npos);
}

// A caller built against the version 1 header passes the smaller struct: the library reads nothing past
// it (the bytes after it here would be wild pointers), and a NULL tenant stays an error for it.
TEST(CApiRequest, AVersionOneRequestIsReadAsVersionOne) {
  floodwall::Client fw(R"({"request_rate": {"rate": 1, "burst": 3}})");
  alignas(fw_request) unsigned char buf[sizeof(fw_request)];
  std::memset(buf, 0xAB, sizeof buf);
  fw_request v1 = FW_REQUEST_INIT;
  v1.version = 1;
  v1.tenant = "old";
  v1.tenant_len = 3;
  std::memcpy(buf, &v1, offsetof(fw_request, headers));
  fw_decision d = FW_DECISION_INIT;
  ASSERT_EQ(fw_admit(fw.get(), reinterpret_cast<fw_request *>(buf), &d), FW_OK);
  EXPECT_TRUE(d.allowed);
  v1.tenant = nullptr;
  v1.tenant_len = 0;
  std::memcpy(buf, &v1, offsetof(fw_request, headers));
  EXPECT_EQ(fw_admit(fw.get(), reinterpret_cast<fw_request *>(buf), &d), FW_EINVAL);
}

TEST(CApiRequest, AVersionTwoDecisionGetsItsFieldsAndNothingBeyond) {
  floodwall::Client fw(R"({"request_rate": {"rate": 1, "burst": 3}})");
  constexpr size_t kV2 = offsetof(fw_decision, cost);
  alignas(fw_decision) unsigned char buf[sizeof(fw_decision) + 16];
  std::memset(buf, 0xAB, sizeof buf);
  fw_decision init = FW_DECISION_INIT;
  init.version = 2;
  std::memcpy(buf, &init, kV2);
  fw_request r = FW_REQUEST_INIT;
  r.tenant = "v2";
  r.tenant_len = 2;
  ASSERT_EQ(fw_admit(fw.get(), &r, reinterpret_cast<fw_decision *>(buf)), FW_OK);
  for (size_t i = kV2; i < sizeof buf; i++) ASSERT_EQ(buf[i], 0xAB) << "byte " << i << " written";
  fw_decision zero = FW_DECISION_INIT;
  zero.version = 0;
  EXPECT_EQ(fw_admit(fw.get(), &r, &zero), FW_EINVAL);
  EXPECT_NE(std::string(fw_error_last()->message).find("decision.version"), std::string::npos);
}

TEST(CApiResponse, HeadersComeAsNameValuePairsWithTheBodyAndItsType) {
  floodwall::Client fw(R"({"request_rate": {"rate": 100, "burst": 1}, "body_format": "problem+json"})");
  fw_request r = FW_REQUEST_INIT;
  r.tenant = "t";
  r.tenant_len = 1;
  fw_decision d = FW_DECISION_INIT;
  ASSERT_EQ(fw_admit(fw.get(), &r, &d), FW_OK);
  fw_response resp = FW_RESPONSE_INIT;
  ASSERT_EQ(fw_format_response(fw.get(), &d, &resp), FW_OK);
  EXPECT_EQ(resp.status, 200);
  ASSERT_EQ(resp.header_count, 5u);
  EXPECT_EQ(std::string(resp.headers[0].name, resp.headers[0].name_len), "RateLimit-Policy");
  EXPECT_EQ(std::string(resp.headers[0].value, resp.headers[0].value_len), "\"request_rate\";q=1;w=1");
  EXPECT_EQ(std::string(resp.headers[1].name, resp.headers[1].name_len), "RateLimit");
  EXPECT_STREQ(resp.content_type, "");
  EXPECT_EQ(resp.body_len, 0u);

  ASSERT_EQ(fw_admit(fw.get(), &r, &d), FW_OK);
  ASSERT_EQ(d.status, 429);
  ASSERT_EQ(fw_format_response(fw.get(), &d, &resp), FW_OK) << "reusing a filled response frees its contents";
  EXPECT_EQ(resp.status, 429);
  ASSERT_EQ(resp.header_count, 6u);
  EXPECT_EQ(std::string(resp.headers[5].name, resp.headers[5].name_len), "Retry-After");
  EXPECT_STREQ(resp.content_type, "application/problem+json");
  fw_buf text = FW_BUF_INIT;
  ASSERT_EQ(fw_format_body(fw.get(), &d, &text), FW_OK);
  EXPECT_EQ(std::string(resp.body, resp.body_len), std::string(text.ptr, text.size)) << "one formatter";
  fw_buf_dispose(&text);
  ASSERT_EQ(fw_format_headers(fw.get(), &d, &text), FW_OK);
  std::string joined;
  for (size_t i = 0; i < resp.header_count; i++)
    joined += std::string(resp.headers[i].name, resp.headers[i].name_len) + ": " +
              std::string(resp.headers[i].value, resp.headers[i].value_len) + "\r\n";
  EXPECT_EQ(joined, std::string(text.ptr, text.size));
  fw_buf_dispose(&text);
  fw_response_dispose(&resp);
  EXPECT_EQ(resp.header_count, 0u);
  fw_response_dispose(&resp);
  fw_response_dispose(nullptr);

  fw_response bad = FW_RESPONSE_INIT;
  bad.version = 7;
  EXPECT_EQ(fw_format_response(fw.get(), &d, &bad), FW_EINVAL);
  EXPECT_NE(std::string(fw_error_last()->message).find("response.version"), std::string::npos);
}

TEST(CApiClient, CanBlockOnlyOnANetworkStore) {
  int out = -1;
  floodwall::Client memory(R"({"request_rate": {"rate": 1, "burst": 1}})");
  ASSERT_EQ(fw_client_can_block(memory.get(), &out), FW_OK);
  EXPECT_EQ(out, 0);
  // Nothing listens on port 1; a Redis store that cannot connect yet is still a Redis store.
  floodwall::Client redis(R"({"store": "redis://127.0.0.1:1/0", "request_rate": {"rate": 1, "burst": 1}})");
  ASSERT_EQ(fw_client_can_block(redis.get(), &out), FW_OK);
  EXPECT_EQ(out, 1);
  EXPECT_EQ(fw_client_can_block(nullptr, &out), FW_EINVAL);
  EXPECT_EQ(fw_client_can_block(memory.get(), nullptr), FW_EINVAL);
}

TEST(CApiClient, AdmitAsync2SaysWhenItCompletedInline) {
  floodwall::Client fw(R"({"request_rate": {"rate": 1, "burst": 1}})");
  int calls = 0;
  auto cb = [](void *p, int, const fw_decision *) { ++*static_cast<int *>(p); };
  fw_request r = FW_REQUEST_INIT;
  r.tenant = "t";
  r.tenant_len = 1;
  int completed = -1;
  ASSERT_EQ(fw_admit_async2(fw.get(), &r, cb, &calls, &completed), FW_OK);
  EXPECT_EQ(completed, 1) << "the memory store decides inline";
  EXPECT_EQ(calls, 1);
  r.cost = 5;  // above the burst: a bad request, reported through the callback, inline
  completed = -1;
  ASSERT_EQ(fw_admit_async2(fw.get(), &r, cb, &calls, &completed), FW_OK);
  EXPECT_EQ(completed, 1);
  EXPECT_EQ(calls, 2);
  completed = -1;
  EXPECT_EQ(fw_admit_async2(fw.get(), &r, nullptr, nullptr, &completed), FW_EINVAL);
  EXPECT_EQ(completed, 0);
}

TEST(CApiBackoff, TheStructIsCheckedAtTheBoundaryAndItsFieldsReachTheCore) {
  fw_backoff b = FW_BACKOFF_INIT;
  double s = -1;
  ASSERT_EQ(fw_backoff_delay(&b, 3, -1, 0.5, &s), FW_OK);
  EXPECT_DOUBLE_EQ(s, 0.4);  // 0.5 x min(20, 0.1 x 2^3)
  b.cap_s = 0.3;
  ASSERT_EQ(fw_backoff_delay(&b, 3, 2, 0.5, &s), FW_OK);
  EXPECT_DOUBLE_EQ(s, 2.15);
  b.attempts = 0;
  EXPECT_EQ(fw_backoff_delay(&b, 0, -1, 0.5, &s), FW_EINVAL);
  EXPECT_EQ(std::string(fw_error_last()->message).rfind("backoff.attempts:", 0), 0u) << fw_error_last()->message;
  fw_backoff zero = FW_BACKOFF_INIT;
  zero.version = 0;  // a struct nobody initialised
  EXPECT_EQ(fw_backoff_delay(&zero, 0, -1, 0.5, &s), FW_EINVAL);
  EXPECT_NE(std::string(fw_error_last()->message).find("backoff.version"), std::string::npos);
  EXPECT_EQ(fw_backoff_delay(nullptr, 0, -1, 0.5, &s), FW_EINVAL);
}
