// The tenant key of a request that names none: the policy section's errors name their JSON path, and no
// header or peer bytes (1 MiB values, NUL, CR/LF, 10,000 forwarded entries) crash it or grow its key.
// The rules themselves are checked by tests/vectors.json (vectors_test.cpp).
#include "policy/request_tenant.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "policy/policy.hpp"

using floodwall::Cidr;
using floodwall::derive_tenant;
using floodwall::parse_policy;
using floodwall::PolicyError;
using floodwall::TenantPolicy;

namespace {

// Header storage for a test: the header array points into `bytes`.
struct Headers {
  std::vector<std::pair<std::string, std::string>> bytes;
  std::vector<floodwall::RequestHeader> list;
  Headers &add(std::string name, std::string value) {
    bytes.emplace_back(std::move(name), std::move(value));
    return *this;
  }
  const floodwall::RequestHeader *data() {
    list.clear();
    for (const auto &[n, v] : bytes) list.push_back({n.data(), n.size(), v.data(), v.size()});
    return list.data();
  }
  size_t size() const { return bytes.size(); }
};

std::string derive(const TenantPolicy &p, Headers &h, std::string_view peer) {
  const floodwall::RequestHeader *d = h.data();
  return derive_tenant(p, d, h.size(), peer);
}

TenantPolicy tenant_section(const std::string &json) {
  return parse_policy(R"({"tenant": )" + json + "}").tenant;
}

}  // namespace

TEST(RequestTenantPolicy, DefaultsAndEveryField) {
  TenantPolicy d = parse_policy("{}").tenant;
  EXPECT_EQ(d.from, (std::vector<TenantPolicy::From>{TenantPolicy::From::authorization, TenantPolicy::From::api_key,
                                                     TenantPolicy::From::ip}));
  EXPECT_TRUE(d.trusted_proxies.empty()) << "no forwarded header is believed unless the operator says so";
  EXPECT_EQ(d.forwarded_header, TenantPolicy::ForwardedHeader::x_forwarded_for);
  EXPECT_EQ(d.ipv6_prefix, 64);
  EXPECT_EQ(d.credentials, TenantPolicy::Credentials::verified) << "no credential names a tenant unless vouched for";

  TenantPolicy t = tenant_section(
      R"({"from": ["ip", "x-api-key"], "trusted_proxies": ["10.1.0.0/16", "10.0.0.0/8", "2001:db8::/32", "192.0.2.1"],
          "forwarded_header": "forwarded", "ipv6_prefix": 56, "credentials": "unverified"})");
  EXPECT_EQ(t.credentials, TenantPolicy::Credentials::unverified);
  EXPECT_EQ(t.from, (std::vector<TenantPolicy::From>{TenantPolicy::From::ip, TenantPolicy::From::api_key}));
  // Normalized: sorted (IPv4, being ::ffff:0:0/96, first), the /16 inside the /8 dropped.
  ASSERT_EQ(t.trusted_proxies.size(), 3u);
  EXPECT_EQ(floodwall::format_ip(t.trusted_proxies[0].net), "10.0.0.0");
  EXPECT_EQ(t.trusted_proxies[0].bits, 96 + 8);
  EXPECT_EQ(floodwall::format_ip(t.trusted_proxies[1].net), "192.0.2.1");
  EXPECT_EQ(t.trusted_proxies[1].bits, 128);
  EXPECT_EQ(floodwall::format_ip(t.trusted_proxies[2].net), "2001:db8::");
  EXPECT_EQ(t.trusted_proxies[2].bits, 32);
  EXPECT_EQ(t.forwarded_header, TenantPolicy::ForwardedHeader::forwarded);
  EXPECT_EQ(t.ipv6_prefix, 56);
}

TEST(RequestTenantPolicy, EveryBadValueNamesItsPath) {
  const std::pair<const char *, const char *> cases[] = {
      {R"("ip")", "tenant"},
      {R"({"form": ["ip"]})", "tenant.form"},
      {R"({"from": []})", "tenant.from"},
      {R"({"from": "ip"})", "tenant.from"},
      {R"({"from": ["ip", "cookie"]})", "tenant.from[1]"},
      {R"({"from": ["ip", 3]})", "tenant.from[1]"},
      {R"({"from": ["authorization", "ip", "authorization"]})", "tenant.from[2]"},
      {R"({"from": ["X-API-Key"]})", "tenant.from[0]"},
      {R"({"trusted_proxies": "10.0.0.0/8"})", "tenant.trusted_proxies"},
      {R"({"trusted_proxies": ["10.0.0.0/8", "::1", "10.0.0.0/33"]})", "tenant.trusted_proxies[2]"},
      {R"({"trusted_proxies": ["2001:db8::/129"]})", "tenant.trusted_proxies[0]"},
      {R"({"trusted_proxies": ["10.0.0.0/"]})", "tenant.trusted_proxies[0]"},
      {R"({"trusted_proxies": ["10.0.0.0/08"]})", "tenant.trusted_proxies[0]"},
      {R"({"trusted_proxies": ["10.0.0.1:80"]})", "tenant.trusted_proxies[0]"},
      {R"({"trusted_proxies": ["[::1]"]})", "tenant.trusted_proxies[0]"},
      {R"({"trusted_proxies": ["fe80::1%eth0"]})", "tenant.trusted_proxies[0]"},
      {R"({"trusted_proxies": ["proxy.internal"]})", "tenant.trusted_proxies[0]"},
      {R"({"trusted_proxies": [""]})", "tenant.trusted_proxies[0]"},
      {R"({"trusted_proxies": [10]})", "tenant.trusted_proxies[0]"},
      {R"({"forwarded_header": "x-real-ip"})", "tenant.forwarded_header"},
      {R"({"forwarded_header": true})", "tenant.forwarded_header"},
      {R"({"ipv6_prefix": 0})", "tenant.ipv6_prefix"},
      {R"({"ipv6_prefix": 129})", "tenant.ipv6_prefix"},
      {R"({"ipv6_prefix": 64.5})", "tenant.ipv6_prefix"},
      {R"({"ipv6_prefix": "64"})", "tenant.ipv6_prefix"},
      {R"({"credentials": "trusted"})", "tenant.credentials"},
      {R"({"credentials": true})", "tenant.credentials"},
  };
  for (const auto &[section, field] : cases) {
    try {
      tenant_section(section);
      ADD_FAILURE() << "accepted: " << section;
    } catch (const PolicyError &e) {
      EXPECT_EQ(e.field(), field) << section << " -> " << e.what();
    }
  }
  try {
    tenant_section(R"({"trusted_proxies": ["10.0.0.0/8", "::1", "10.0.0.0/33"]})");
    ADD_FAILURE();
  } catch (const PolicyError &e) {
    EXPECT_STREQ(e.what(), R"(tenant.trusted_proxies[2]: must be an IP address or CIDR (got "10.0.0.0/33"))");
  }
  try {
    tenant_section(R"({"from": ["ip", "cookie"]})");
    ADD_FAILURE();
  } catch (const PolicyError &e) {
    EXPECT_EQ(std::string(e.what()).rfind(R"(tenant.from[1]: must be "authorization", "x-api-key" or "ip")", 0), 0u)
        << e.what();
  }
  std::string many = R"({"trusted_proxies": [)";
  for (int i = 0; i < 1025; i++)
    many += std::string(i ? "," : "") + "\"10.0." + std::to_string(i / 256) + "." + std::to_string(i % 256) + "\"";
  EXPECT_THROW(tenant_section(many + "]}"), PolicyError) << "at most 1024 networks";
}

TEST(RequestTenant, AddressSyntax) {
  using floodwall::parse_endpoint;
  for (const char *bad : {"",
                          "1.2.3",
                          "1.2.3.4.5",
                          "256.1.1.1",
                          "1.2.3.-4",
                          "01.2.3.4",
                          "1.2.3.4:",
                          "1.2.3.4:65536",
                          "1.2.3.4:x",
                          "1.2.3.4 :80",
                          "[1.2.3.4]",
                          "[::1",
                          "[::1]80",
                          "[::1]:",
                          "1:2:3:4:5:6:7:8:9",
                          "1::2::3",
                          ":1::",
                          "1::2:",
                          "12345::1",
                          "::ffff:1.2.3.4:80",
                          "fe80::1%",
                          "fe80::1%et h0",
                          "::g",
                          "unknown",
                          "_hidden",
                          "1.2.3.4\r\n",
                          "[::1]:80 ",
                          "/run/app.sock"})
    EXPECT_FALSE(parse_endpoint(bad)) << bad;
  for (const char *good :
       {"0.0.0.0", "255.255.255.255", "1.2.3.4:0", "1.2.3.4:_x1", "::", "::1", "1::", "[::]:1", "1:2:3:4:5:6:7:8",
        "1:2:3:4:5:6:7::", "::2:3:4:5:6:7:8", "1:2:3:4:5:6:1.2.3.4", "FE80::1%25eth0", "[fe80::1%eth0]:443"})
    EXPECT_TRUE(parse_endpoint(good)) << good;
  EXPECT_EQ(floodwall::format_ip(*parse_endpoint("1:0:0:2:0:0:0:3")), "1:0:0:2::3");
  EXPECT_EQ(floodwall::format_ip(*parse_endpoint("0:0:1:0:0:1:0:0")), "::1:0:0:1:0:0");
  EXPECT_EQ(floodwall::format_ip(*parse_endpoint("::ffff:0:0")), "0.0.0.0");
  auto c = floodwall::parse_cidr("10.1.2.3/8");
  ASSERT_TRUE(c);
  EXPECT_EQ(floodwall::format_ip(c->net), "10.0.0.0") << "host bits are cleared";
  EXPECT_TRUE(c->contains(*parse_endpoint("10.255.255.255")));
  EXPECT_FALSE(c->contains(*parse_endpoint("11.0.0.0")));
  EXPECT_FALSE(c->contains(*parse_endpoint("::a01:203"))) << "IPv4 networks hold no IPv6 address";
}

TEST(RequestTenant, AnyOrderOfTrustedProxiesGivesTheSameKey) {
  // A hand-built policy need not be normalized; it is only slower.
  TenantPolicy sorted = tenant_section(R"({"trusted_proxies": ["10.0.0.0/8", "172.16.0.0/12", "10.9.0.0/16"]})");
  TenantPolicy raw;
  for (const char *n : {"10.9.0.0/16", "172.16.0.0/12", "10.0.0.0/8"})
    raw.trusted_proxies.push_back(*floodwall::parse_cidr(n));
  Headers h;
  h.add("X-Forwarded-For", "198.51.100.7, 10.9.1.1, 172.20.0.1");
  EXPECT_EQ(derive(sorted, h, "10.0.0.1"), "ip:198.51.100.7");
  EXPECT_EQ(derive(raw, h, "10.0.0.1"), "ip:198.51.100.7");
  EXPECT_EQ(derive(raw, h, "172.31.255.255"), "ip:198.51.100.7");
  EXPECT_EQ(derive(raw, h, "172.32.0.0"), "ip:172.32.0.0");
}

TEST(RequestTenant, AClientsUnbalancedQuoteCannotSwallowTheProxysEntry) {
  TenantPolicy p = tenant_section(R"({"trusted_proxies": ["10.0.0.0/8"], "forwarded_header": "forwarded"})");
  Headers h;
  // The client wrote up to the second comma; the proxy appended the address it saw, quoted.
  h.add("Forwarded", R"(for=6.6.6.6;x=", for="[2001:db8::1]:4711")");
  EXPECT_EQ(derive(p, h, "10.0.0.1"), "ip:2001:db8::/64");
  Headers h2;
  h2.add("Forwarded", R"(for="6.6.6.6, for=198.51.100.2)");
  EXPECT_EQ(derive(p, h2, "10.0.0.1"), "ip:198.51.100.2");
  Headers h3;
  h3.add("Forwarded", R"(for=198.51.100.2;for=6.6.6.6)");  // two for= in one element: garbage, the hop that reported it
  EXPECT_EQ(derive(p, h3, "10.0.0.1"), "ip:10.0.0.1");
  Headers h4;
  h4.add("Forwarded", R"(for="\[2001:db8::9\]")");  // quoted-pair escapes are undone
  EXPECT_EQ(derive(p, h4, "10.0.0.1"), "ip:2001:db8::/64");
}

TEST(RequestTenant, NullPointersAreEmpty) {
  TenantPolicy p;
  EXPECT_EQ(derive_tenant(p, nullptr, 5, "1.2.3.4"), "ip:1.2.3.4");
  floodwall::RequestHeader h[2] = {{nullptr, 13, nullptr, 10}, {"X-API-Key", 9, nullptr, 4}};
  EXPECT_EQ(derive_tenant(p, h, 2, ""), "anonymous");
}

TEST(RequestTenant, HostileInputNeverCrashesAndGivesABoundedKey) {
  TenantPolicy trusting = tenant_section(R"({"trusted_proxies": ["10.0.0.0/8", "2001:db8::/32"]})");
  TenantPolicy forwarded =
      tenant_section(R"({"trusted_proxies": ["0.0.0.0/0", "2001:db8::/32"], "forwarded_header": "forwarded"})");
  const std::string mib(1 << 20, 'a');
  std::string bytes;
  for (int i = 0; i < 1 << 20; i++) bytes.push_back(static_cast<char>(i * 131 % 256));
  std::string entries;  // 10,000 entries, every one a trusted proxy
  for (int i = 0; i < 10000; i++)
    entries += (i ? ", 10.0." : "10.0.") + std::to_string(i / 250) + "." + std::to_string(i % 250);
  std::string fwd;
  for (int i = 0; i < 10000; i++) fwd += (i ? ",for=\"[2001:db8::" : "for=\"[2001:db8::") + std::to_string(i) + "]:1\"";

  struct Case {
    const char *what;
    const TenantPolicy *policy;
    Headers headers;
    std::string peer;
    std::string expect;  // "" when any bounded key will do
  };
  std::vector<Case> cases;
  cases.push_back({"1 MiB bearer token", &trusting, Headers().add("Authorization", "Bearer " + mib), "", ""});
  cases.push_back({"1 MiB api key of every byte", &trusting, Headers().add("X-API-Key", bytes), "", ""});
  cases.push_back(
      {"1 MiB x-forwarded-for entry", &trusting, Headers().add("X-Forwarded-For", mib), "10.0.0.1", "ip:10.0.0.1"});
  cases.push_back({"1 MiB of commas", &trusting, Headers().add("X-Forwarded-For", std::string(1 << 20, ',')),
                   "10.0.0.1", "ip:10.0.0.1"});
  cases.push_back(
      {"1 MiB of every byte as x-forwarded-for", &trusting, Headers().add("X-Forwarded-For", bytes), "10.0.0.1", ""});
  cases.push_back({"1 MiB of every byte as forwarded", &forwarded, Headers().add("Forwarded", bytes), "10.0.0.1", ""});
  cases.push_back({"1 MiB of quotes and separators", &forwarded,
                   Headers().add("Forwarded", std::string(1 << 19, '"') + std::string(1 << 19, ';')), "10.0.0.1",
                   "ip:10.0.0.1"});
  cases.push_back({"1 MiB header name", &trusting, Headers().add(mib, mib), "1.2.3.4", "ip:1.2.3.4"});
  cases.push_back({"1 MiB peer", &trusting, Headers(), mib, "anonymous"});
  cases.push_back({"1 MiB peer of every byte", &trusting, Headers(), bytes, "anonymous"});
  cases.push_back({"10,000 trusted entries: the left-most", &trusting, Headers().add("X-Forwarded-For", entries),
                   "10.0.0.1", "ip:10.0.0.0"});
  cases.push_back({"10,000 forwarded v6 entries, all trusted", &forwarded, Headers().add("Forwarded", fwd), "10.0.0.1",
                   "ip:2001:db8::/64"});
  Headers lines;
  for (int i = 0; i < 10000; i++) lines.add("x-forwarded-for", "10.1.0." + std::to_string(i % 250));
  lines.add("X-Forwarded-For", "198.51.100.9");
  cases.push_back({"10,000 header lines", &trusting, lines, "10.0.0.1", "ip:198.51.100.9"});
  cases.push_back(
      {"NUL in a bearer token", &trusting, Headers().add("Authorization", std::string("Bearer a\0b", 10)), "", ""});
  cases.push_back({"CR/LF in an api key", &trusting, Headers().add("X-API-Key", "k\r\nX-Evil: 1"), "", ""});
  cases.push_back({"NUL in a peer", &trusting, Headers(), std::string("1.2.3.4\0", 8), "anonymous"});
  cases.push_back({"CR/LF in a peer", &trusting, Headers(), "1.2.3.4\r\n", "anonymous"});
  cases.push_back({"NUL in a header name", &trusting, Headers().add(std::string("Authorization\0", 14), "Bearer t"),
                   "1.2.3.4", "ip:1.2.3.4"});
  cases.push_back({"NUL and CR/LF in x-forwarded-for", &trusting,
                   Headers().add("X-Forwarded-For", std::string("1.2.3.4\0, 5.6.7.8\r\n, 10.0.0.2", 29)), "10.0.0.1",
                   "ip:10.0.0.2"});

  for (auto &c : cases) {
    SCOPED_TRACE(c.what);
    auto start = std::chrono::steady_clock::now();
    std::string key = derive(*c.policy, c.headers, c.peer);
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LE(key.size(), 46u) << key;
    EXPECT_FALSE(key.empty());
    for (unsigned char ch : key) EXPECT_TRUE(ch > 0x20 && ch < 0x7f) << "a key is printable ASCII";
    if (!c.expect.empty()) {
      EXPECT_EQ(key, c.expect);
    }
    EXPECT_LT(ms, 1000) << "linear in the input";
  }
}
