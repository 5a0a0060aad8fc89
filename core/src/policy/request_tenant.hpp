// The tenant key of a request that named none, derived from its headers and peer address (policy section
// "tenant"). One set of rules for every language, checked against tests/vectors.json:
//
// - The sources of TenantPolicy::from are tried in order; the first that applies gives the key. None
//   applies: "anonymous".
// - A credential (authorization, x-api-key) applies only when it is vouched for (CredentialCheck): the app
//   verified it (a middleware's verify hook said yes), or the app checked nothing and the policy's
//   tenant.credentials is "unverified" (a gateway in front already refuses unknown keys). Otherwise it is
//   skipped as if absent, and the request falls to the next source (the client address): a client that
//   invents a key per request gets no bucket of its own, and the state such a flood creates is one tenant.
// - authorization: the first Authorization header (header names are case-insensitive everywhere), trimmed of
//   spaces and tabs. "Bearer <token>" (scheme case-insensitive, token non-empty) gives the token, trimmed;
//   any other value is the credential as a whole (so "Bearer" alone is its own credential). Only the first
//   header is read: an empty one does not apply, even when a later one is not empty.
// - api_key ("x-api-key"): the first X-API-Key header, trimmed; empty does not apply.
// - A credential becomes "key:" + the first 32 lower-case hex digits of its SHA-256: the same secret sent as
//   a Bearer token or as an API key is one tenant, and no secret is kept raw in a store or a metric.
// - ip: "ip:" + the client address. IPv4 (and IPv4-mapped IPv6) as a dotted quad; other IPv6 masked to
//   ipv6_prefix bits (one /64 is usually one customer), in RFC 5952 form, with "/<prefix>" below 128:
//   "ip:2001:db8:1:2::/64". The peer may be "1.2.3.4", "1.2.3.4:80", "::1", "[::1]", "[::1]:80" or
//   "fe80::1%eth0" (the zone is dropped); anything else (empty, a Unix socket path) does not apply.
// - Forwarded chains are read only when the peer is inside trusted_proxies, and only from the one header
//   forwarded_header names (a client can write either header itself): every X-Forwarded-For line in order,
//   joined by ",", or the for= parameter of every element of every Forwarded line (RFC 7239; an element
//   without for= adds no entry, one with two is garbage). Empty list entries are ignored (RFC 9110 #rule).
//   Walking from the right, entries that are addresses inside trusted_proxies are skipped; the first other
//   entry is the client when it is an address. When it is not ("unknown", "_hidden", garbage), the last
//   trusted address seen is (the hop that reported it: the peer when none was skipped). Every entry trusted:
//   the left-most. No entry: the peer.
// - Entries and peers take the same address syntax; IPv4 parts have no leading zeros (01.2.3.4 is octal to
//   some parsers, decimal to others, so it is no address at all). A port is 1-5 digits up to 65535 or an
//   RFC 7239 obfuscated port ("_abc").
//
// Cost: one pass over the headers, no allocation that grows with them (a 1 MiB header or 100,000 entries
// are fine), and a key of at most 46 bytes.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace floodwall {

// An IP address; IPv4 is kept as IPv4-mapped IPv6 (::ffff:a.b.c.d), so one comparison serves both families.
struct IpAddr {
  std::array<uint8_t, 16> bytes{};
  bool is_v4() const;
  friend bool operator==(const IpAddr &a, const IpAddr &b) { return a.bytes == b.bytes; }
};

// A network: the address with every bit beyond `bits` cleared, and the prefix length in IPv6 terms (an IPv4
// /8 is bits 104).
struct Cidr {
  IpAddr net;
  uint8_t bits = 128;
  bool contains(const IpAddr &a) const;
  IpAddr last() const;  // the highest address inside
};

// A bare address, no port, brackets or zone; nullopt when it is not one.
std::optional<IpAddr> parse_ip(std::string_view text);
// An address as a peer or a forwarded entry names it: a bare address, "v4:port", "[v6]", "[v6]:port",
// "v6%zone"; nullopt otherwise.
std::optional<IpAddr> parse_endpoint(std::string_view text);
// "10.0.0.0/8", "2001:db8::/32" or a bare address (/32, /128). Host bits beyond the prefix are cleared
// ("10.1.2.3/8" is 10.0.0.0/8), as most proxy configurations read them.
std::optional<Cidr> parse_cidr(std::string_view text);
// As in a key: dotted quad for IPv4, RFC 5952 for IPv6.
std::string format_ip(const IpAddr &a);

// Sorts networks and drops the ones inside another: the rest are disjoint, and derive_tenant finds the one
// holding an address by binary search instead of trying each of up to 1024 networks for each entry.
void normalize_networks(std::vector<Cidr> &nets);

struct TenantPolicy {
  enum class From : uint8_t { authorization, api_key, ip };
  std::vector<From> from{From::authorization, From::api_key, From::ip};
  // Empty by default: X-Forwarded-For and Forwarded are ignored. parse_policy leaves it normalized
  // (normalize_networks); any order works, a normalized one is faster.
  std::vector<Cidr> trusted_proxies;
  enum class ForwardedHeader : uint8_t {
    x_forwarded_for,
    forwarded
  } forwarded_header = ForwardedHeader::x_forwarded_for;
  int ipv6_prefix = 64;  // 1..128
  // "verified" (the default): a credential names a tenant only when the request says the app verified it.
  // "unverified": every credential does unless the app said it rejected it (opt-in, behind a gateway that
  // already refuses unknown keys).
  enum class Credentials : uint8_t { verified, unverified } credentials = Credentials::verified;
};

// What the app said of a request's credential (fw_request.credential).
enum class CredentialCheck : uint8_t {
  unchecked,  // nothing: the policy's tenant.credentials decides
  verified,   // the app vouches for it: it names the tenant
  rejected    // the app does not: the request is keyed as if it carried none
};

// One field of a request's header as the caller holds it: bytes that need not end in NUL. A NULL pointer
// reads as empty. Laid out as the C ABI's fw_header (capi/src checks it), so a caller's array is read in
// place.
struct RequestHeader {
  const char *name;
  size_t name_len;
  const char *value;
  size_t value_len;
};

// The request header names (lower case, static) that derive_tenant reads under this policy: a caller may
// hand over only these, since no other header is ever looked at.
std::vector<const char *> tenant_header_names(const TenantPolicy &p);

// The credential a request's tenant would be keyed on if the app vouched for it: the first source of
// TenantPolicy::from that applies, when that source is authorization or x-api-key (the raw token or key,
// trimmed, as the rules above read it); nullopt when an address comes first or nothing applies. This is
// what a verify hook is asked about. The view points into the headers.
struct Credential {
  TenantPolicy::From from;
  std::string_view value;
};
std::optional<Credential> request_credential(const TenantPolicy &p, const RequestHeader *headers, size_t header_count,
                                             std::string_view peer);

// The tenant id for a request that named none (rules above). Never throws for any input bytes (hostile
// headers, 1 MiB values, NUL, CR/LF); headers may be NULL when header_count is 0.
std::string derive_tenant(const TenantPolicy &p, const RequestHeader *headers, size_t header_count,
                          std::string_view peer, CredentialCheck check = CredentialCheck::unchecked);

// A credential (an API key, a Bearer token) as its tenant: "key:" + the first 32 hex digits of its SHA-256.
std::string credential_key(std::string_view credential);

}  // namespace floodwall
