// derive_tenant and request_credential on hostile requests. The input's first byte picks one of a few
// policies with trusted proxies (X-Forwarded-For or Forwarded, other source orders and IPv6 prefixes,
// credentials "verified" or "unverified"); the rest, split on NUL bytes, is the peer and then header
// name/value pairs. Every key must be "anonymous", "key:" + 32 hex digits or "ip:" + an address in
// canonical form: printable ASCII, at most 46 bytes, whatever came in. A credential names the tenant only
// when vouched for: the verified key is the credential's key when there is one, and every other answer
// (unchecked under "verified", rejected) is the key of the same request without it.
// The address parsers and normalize_networks are checked on every piece along the way.
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "check.hpp"
#include "policy/policy.hpp"
#include "policy/request_tenant.hpp"

namespace {

using floodwall::Cidr;
using floodwall::IpAddr;
using floodwall::TenantPolicy;

constexpr const char *kProxies =
    R"(["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "127.0.0.1", "::1", "2001:db8::/32", "fd00::/8"])";

std::vector<TenantPolicy> make_policies() {
  std::vector<std::string> docs = {
      std::string(R"({"tenant": {"trusted_proxies": )") + kProxies + "}}",
      std::string(R"({"tenant": {"forwarded_header": "forwarded", "trusted_proxies": )") + kProxies + "}}",
      std::string(R"({"tenant": {"from": ["ip"], "ipv6_prefix": 48, "forwarded_header": "forwarded", )") +
          R"("trusted_proxies": )" + kProxies + "}}",
      std::string(R"({"tenant": {"from": ["x-api-key", "ip", "authorization"], "ipv6_prefix": 128, )") +
          R"("trusted_proxies": )" + kProxies + "}}",
      std::string(R"({"tenant": {"credentials": "unverified", "trusted_proxies": )") + kProxies + "}}",
  };
  std::vector<TenantPolicy> out;
  for (const auto &d : docs) out.push_back(floodwall::parse_policy(d).tenant);
  // Not normalized (unsorted, nested): derive_tenant's linear search instead of the binary one.
  TenantPolicy raw;
  raw.from = {TenantPolicy::From::ip};
  for (const char *c : {"192.168.1.0/24", "10.0.0.0/8", "192.168.0.0/16", "::1", "10.1.0.0/16"})
    raw.trusted_proxies.push_back(*floodwall::parse_cidr(c));
  out.push_back(raw);
  return out;
}

bool lower_hex(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

void check_key(const std::string &key) {
  FW_FUZZ_CHECK(!key.empty() && key.size() <= 46);
  for (unsigned char c : key) FW_FUZZ_CHECK(c > 0x20 && c < 0x7f);
  if (key == "anonymous") return;
  if (key.rfind("key:", 0) == 0) {
    FW_FUZZ_CHECK(key.size() == 36 && lower_hex(std::string_view(key).substr(4)));
    return;
  }
  FW_FUZZ_CHECK(key.rfind("ip:", 0) == 0);
  std::string_view addr = std::string_view(key).substr(3);
  size_t slash = addr.find('/');
  auto a = floodwall::parse_ip(addr.substr(0, slash));
  FW_FUZZ_CHECK(a);
  FW_FUZZ_CHECK(floodwall::format_ip(*a) == addr.substr(0, slash));  // canonical: one spelling per address
  if (slash != std::string_view::npos) {
    FW_FUZZ_CHECK(!a->is_v4());
    auto c = floodwall::parse_cidr(addr);
    FW_FUZZ_CHECK(c && c->bits < 128 && c->net == *a);  // the host bits beyond the prefix are already zero
  }
}

// The address parsers on one piece of input: what parses formats back to itself.
void check_parsers(std::string_view s, std::vector<Cidr> &nets, std::vector<IpAddr> &addrs) {
  if (auto a = floodwall::parse_ip(s)) {
    auto again = floodwall::parse_ip(floodwall::format_ip(*a));
    FW_FUZZ_CHECK(again && *again == *a);
    addrs.push_back(*a);
  }
  if (auto e = floodwall::parse_endpoint(s)) {
    auto again = floodwall::parse_endpoint(floodwall::format_ip(*e));
    FW_FUZZ_CHECK(again && *again == *e);
    addrs.push_back(*e);
  }
  if (auto c = floodwall::parse_cidr(s)) {
    FW_FUZZ_CHECK(c->contains(c->net) && c->contains(c->last()) && !(c->last().bytes < c->net.bytes));
    if (nets.size() < 64) nets.push_back(*c);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const std::vector<TenantPolicy> policies = make_policies();
  if (size == 0) return 0;
  const TenantPolicy &policy = policies[data[0] % policies.size()];
  std::string_view in(reinterpret_cast<const char *>(data) + 1, size - 1);

  std::vector<std::string_view> pieces;
  for (size_t start = 0;;) {
    size_t nul = in.find('\0', start);
    pieces.push_back(in.substr(start, nul == std::string_view::npos ? std::string_view::npos : nul - start));
    if (nul == std::string_view::npos) break;
    start = nul + 1;
  }
  std::string_view peer = pieces[0];
  std::vector<floodwall::RequestHeader> headers;
  for (size_t i = 1; i < pieces.size(); i += 2) {
    std::string_view name = pieces[i], value = i + 1 < pieces.size() ? pieces[i + 1] : std::string_view();
    headers.push_back(floodwall::RequestHeader{name.data(), name.size(), value.data(), value.size()});
  }
  // A NULL name or value is read as empty (a binding's mistake must not crash): make one now and then.
  if (!headers.empty() && (data[0] & 0x80)) headers.back().value = nullptr;

  using Check = floodwall::CredentialCheck;
  std::string key = floodwall::derive_tenant(policy, headers.data(), headers.size(), peer);
  check_key(key);
  FW_FUZZ_CHECK(floodwall::derive_tenant(policy, headers.data(), headers.size(), peer) == key);
  std::string verified = floodwall::derive_tenant(policy, headers.data(), headers.size(), peer, Check::verified);
  std::string rejected = floodwall::derive_tenant(policy, headers.data(), headers.size(), peer, Check::rejected);
  check_key(verified);
  check_key(rejected);
  FW_FUZZ_CHECK(rejected.rfind("key:", 0) != 0);  // no credential names a tenant the app rejected
  auto credential = floodwall::request_credential(policy, headers.data(), headers.size(), peer);
  if (credential) {
    FW_FUZZ_CHECK(!credential->value.empty());
    FW_FUZZ_CHECK(verified == floodwall::credential_key(credential->value));
  } else {
    FW_FUZZ_CHECK(verified == rejected);  // nothing to vouch for: the answer does not matter
  }
  bool unverified = policy.credentials == TenantPolicy::Credentials::unverified;
  FW_FUZZ_CHECK(key == (unverified ? verified : rejected));
  // No headers: NULL is allowed when the count is 0.
  check_key(floodwall::derive_tenant(policy, nullptr, 0, peer));
  FW_FUZZ_CHECK(!floodwall::request_credential(policy, nullptr, 0, peer));

  std::vector<Cidr> nets;
  std::vector<IpAddr> addrs;
  for (std::string_view p : pieces) check_parsers(p, nets, addrs);
  // normalize_networks drops only networks inside another: it must not change which addresses are inside.
  std::vector<Cidr> normal = nets;
  floodwall::normalize_networks(normal);
  FW_FUZZ_CHECK(normal.size() <= nets.size());
  for (const Cidr &c : nets) {
    addrs.push_back(c.net);
    addrs.push_back(c.last());
  }
  for (const IpAddr &a : addrs) {
    auto in_any = [&](const std::vector<Cidr> &v) {
      return std::any_of(v.begin(), v.end(), [&](const Cidr &c) { return c.contains(a); });
    };
    FW_FUZZ_CHECK(in_any(nets) == in_any(normal));
  }
  return 0;
}
