#include "policy/request_tenant.hpp"

#include <algorithm>
#include <cstring>

#include "policy/tenant_key.hpp"
#include "util/digests.hpp"

namespace floodwall {

namespace {

// ASCII by hand, never <cctype>: a process's locale must not change which tenant a request is.
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
char lower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

bool iequals(std::string_view a, std::string_view lower_b) {
  if (a.size() != lower_b.size()) return false;
  for (size_t i = 0; i < a.size(); i++)
    if (lower(a[i]) != lower_b[i]) return false;
  return true;
}

bool is_ows(char c) {
  return c == ' ' || c == '\t';
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_ows(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_ows(s.back())) s.remove_suffix(1);
  return s;
}

// A NULL pointer is read as empty: a binding's mistake must not become a crash here.
std::string_view name_of(const RequestHeader &h) {
  return h.name ? std::string_view(h.name, h.name_len) : "";
}
std::string_view value_of(const RequestHeader &h) {
  return h.value ? std::string_view(h.value, h.value_len) : "";
}

const RequestHeader *first_header(const RequestHeader *headers, size_t n, std::string_view lower_name) {
  for (size_t i = 0; i < n; i++)
    if (iequals(name_of(headers[i]), lower_name)) return &headers[i];
  return nullptr;
}

bool parse_v4(std::string_view s, uint8_t out[4]) {
  size_t i = 0;
  for (int part = 0; part < 4; part++) {
    if (part > 0) {
      if (i >= s.size() || s[i] != '.') return false;
      i++;
    }
    size_t start = i;
    unsigned v = 0;
    while (i < s.size() && is_digit(s[i]) && i - start < 3) v = v * 10 + static_cast<unsigned>(s[i++] - '0');
    size_t len = i - start;
    if (len == 0 || v > 255 || (len > 1 && s[start] == '0')) return false;
    out[part] = static_cast<uint8_t>(v);
  }
  return i == s.size();
}

// RFC 4291 text: hex groups, at most one "::", an optional dotted quad in the last 32 bits.
bool parse_v6(std::string_view s, uint8_t out[16]) {
  // The longest valid text is "ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255".
  if (s.size() < 2 || s.size() > 45) return false;
  uint16_t groups[8] = {};
  int n = 0, gap = -1;
  size_t i = 0;
  if (s[0] == ':') {
    if (s[1] != ':') return false;
    gap = 0;
    i = 2;
  }
  while (i < s.size()) {
    size_t start = i;
    unsigned v = 0;
    while (i < s.size() && hex_value(s[i]) >= 0 && i - start < 5) v = v * 16 + static_cast<unsigned>(hex_value(s[i++]));
    if (i < s.size() && s[i] == '.') {
      uint8_t q[4];
      if (n > 6 || !parse_v4(s.substr(start), q)) return false;
      groups[n++] = static_cast<uint16_t>(q[0] << 8 | q[1]);
      groups[n++] = static_cast<uint16_t>(q[2] << 8 | q[3]);
      break;
    }
    size_t len = i - start;
    if (len == 0 || len > 4 || n == 8) return false;
    groups[n++] = static_cast<uint16_t>(v);
    if (i == s.size()) break;
    if (s[i] != ':') return false;
    i++;
    if (i < s.size() && s[i] == ':') {
      if (gap >= 0) return false;
      gap = n;
      i++;
    } else if (i == s.size()) {
      return false;  // a trailing single ':'
    }
  }
  if (gap < 0 ? n != 8 : n > 7) return false;
  std::memset(out, 0, 16);
  int head = gap < 0 ? n : gap;
  for (int g = 0; g < head; g++) {
    out[2 * g] = static_cast<uint8_t>(groups[g] >> 8);
    out[2 * g + 1] = static_cast<uint8_t>(groups[g]);
  }
  for (int g = head; g < n; g++) {
    int at = 8 - (n - g);
    out[2 * at] = static_cast<uint8_t>(groups[g] >> 8);
    out[2 * at + 1] = static_cast<uint8_t>(groups[g]);
  }
  return true;
}

IpAddr mapped(const uint8_t q[4]) {
  IpAddr a;
  a.bytes[10] = a.bytes[11] = 0xff;
  std::memcpy(a.bytes.data() + 12, q, 4);
  return a;
}

std::optional<IpAddr> parse_v6_addr(std::string_view s) {
  IpAddr a;
  if (!parse_v6(s, a.bytes.data())) return std::nullopt;
  return a;
}

// A port: 1-5 digits up to 65535, or an RFC 7239 obfuscated port ("_" then [A-Za-z0-9._-]).
bool valid_port(std::string_view p) {
  if (p.empty() || p.size() > 64) return false;
  if (p[0] == '_') {
    if (p.size() == 1) return false;
    for (char c : p.substr(1))
      if (!(is_digit(c) || (lower(c) >= 'a' && lower(c) <= 'z') || c == '.' || c == '_' || c == '-')) return false;
    return true;
  }
  if (p.size() > 5) return false;
  unsigned v = 0;
  for (char c : p) {
    if (!is_digit(c)) return false;
    v = v * 10 + static_cast<unsigned>(c - '0');
  }
  return v <= 65535;
}

// An IPv6 text with an optional "%zone", which names a link, not a host: dropped.
std::optional<IpAddr> parse_v6_zoned(std::string_view s) {
  size_t pct = s.find('%');
  if (pct != std::string_view::npos) {
    std::string_view zone = s.substr(pct + 1);
    if (zone.empty() || zone.size() > 64) return std::nullopt;
    for (char c : zone)
      if (!(is_digit(c) || (lower(c) >= 'a' && lower(c) <= 'z') || c == '.' || c == '_' || c == '-' || c == '~'))
        return std::nullopt;
    s = s.substr(0, pct);
  }
  return parse_v6_addr(s);
}

void mask(IpAddr &a, int bits) {
  for (int i = 0; i < 16; i++) {
    int keep = std::clamp(bits - 8 * i, 0, 8);
    a.bytes[i] &= static_cast<uint8_t>(0xff00 >> keep);
  }
}

bool normalized(const std::vector<Cidr> &nets) {
  for (size_t i = 1; i < nets.size(); i++)
    if (!(nets[i - 1].last().bytes < nets[i].net.bytes)) return false;
  return true;
}

// The trusted networks of one call: binary search when they are sorted and disjoint (parse_policy leaves
// them so), else one comparison each.
class Networks {
 public:
  explicit Networks(const std::vector<Cidr> &nets) : nets_(nets), sorted_(normalized(nets)) {}
  bool contains(const IpAddr &a) const {
    if (!sorted_) return std::any_of(nets_.begin(), nets_.end(), [&](const Cidr &c) { return c.contains(a); });
    auto it = std::upper_bound(nets_.begin(), nets_.end(), a,
                               [](const IpAddr &x, const Cidr &c) { return x.bytes < c.net.bytes; });
    return it != nets_.begin() && std::prev(it)->contains(a);
  }

 private:
  const std::vector<Cidr> &nets_;
  bool sorted_;
};

// The walk from the right, done in one pass from the left so that it keeps three addresses, not the chain:
// the answer is the right-most entry that is not a trusted address (when it is an address), else the trusted
// address to its right (else the peer), and the left-most entry when every entry is trusted.
class Chain {
 public:
  explicit Chain(const Networks &trusted) : trusted_(trusted) {}
  void add(const std::optional<IpAddr> &entry) {
    bool trusted = entry && trusted_.contains(*entry);
    if (!any_) {
      any_ = true;
      if (trusted) first_ = entry;
    }
    if (!trusted) {
      have_other_ = true;
      other_ = entry;
      after_other_.reset();
    } else if (!after_other_) {
      after_other_ = entry;
    }
  }
  IpAddr client(const IpAddr &peer) const {
    if (!any_) return peer;
    if (!have_other_) return *first_;
    if (other_) return *other_;
    return after_other_ ? *after_other_ : peer;
  }

 private:
  const Networks &trusted_;
  bool any_ = false, have_other_ = false;
  std::optional<IpAddr> first_, other_, after_other_;
};

void read_x_forwarded_for(std::string_view v, Chain &chain) {
  while (true) {
    size_t comma = v.find(',');
    std::string_view entry = trim(v.substr(0, comma));
    if (!entry.empty()) chain.add(parse_endpoint(entry));
    if (comma == std::string_view::npos) return;
    v.remove_prefix(comma + 1);
  }
}

// A for= value: a token, or a quoted string whose backslash escapes are undone into `buf` (no address is
// longer than it, so a longer value is garbage anyway).
std::optional<IpAddr> forwarded_node(std::string_view value, char (&buf)[72]) {
  if (value.empty() || value[0] != '"') return parse_endpoint(value);
  if (value.size() < 2 || value.back() != '"') return std::nullopt;
  value = value.substr(1, value.size() - 2);
  size_t len = 0;
  for (size_t i = 0; i < value.size(); i++) {
    char c = value[i];
    if (c == '"') return std::nullopt;
    if (c == '\\') {
      if (++i == value.size()) return std::nullopt;
      c = value[i];
    }
    if (len == sizeof buf) return std::nullopt;
    buf[len++] = c;
  }
  return parse_endpoint({buf, len});
}

// One Forwarded field line (RFC 7239): elements split by ',', pairs by ';', each element adding its for=
// value. The split ignores quotes on purpose: a node (address, "unknown", "_hidden", port) never holds a
// ',' or a ';', and a client's unbalanced quote in the left part must not swallow the elements that the
// proxies append after it, nor turn them into part of a value it chose.
void read_forwarded(std::string_view v, Chain &chain) {
  char buf[72];
  while (true) {
    size_t comma = v.find(',');
    std::string_view element = v.substr(0, comma);
    bool seen_for = false, twice = false;
    std::string_view for_value;
    while (true) {
      size_t semi = element.find(';');
      std::string_view pair = element.substr(0, semi);
      size_t eq = pair.find('=');
      if (eq != std::string_view::npos && iequals(trim(pair.substr(0, eq)), "for")) {
        twice = seen_for;  // two for= in one element: which hop is it?
        seen_for = true;
        if (!twice) for_value = trim(pair.substr(eq + 1));
      }
      if (semi == std::string_view::npos || twice) break;
      element.remove_prefix(semi + 1);
    }
    if (twice)
      chain.add(std::nullopt);
    else if (seen_for)
      chain.add(forwarded_node(for_value, buf));
    if (comma == std::string_view::npos) return;
    v.remove_prefix(comma + 1);
  }
}

std::optional<IpAddr> client_address(const TenantPolicy &p, const RequestHeader *headers, size_t n,
                                     std::string_view peer) {
  auto peer_addr = parse_endpoint(trim(peer));
  if (!peer_addr || p.trusted_proxies.empty()) return peer_addr;
  Networks trusted(p.trusted_proxies);
  if (!trusted.contains(*peer_addr)) return peer_addr;
  Chain chain(trusted);
  bool xff = p.forwarded_header == TenantPolicy::ForwardedHeader::x_forwarded_for;
  std::string_view wanted = xff ? "x-forwarded-for" : "forwarded";
  for (size_t i = 0; i < n; i++) {
    if (!iequals(name_of(headers[i]), wanted)) continue;
    if (xff)
      read_x_forwarded_for(value_of(headers[i]), chain);
    else
      read_forwarded(value_of(headers[i]), chain);
  }
  return chain.client(*peer_addr);
}

std::optional<std::string_view> authorization_credential(const RequestHeader *headers, size_t n) {
  const RequestHeader *h = first_header(headers, n, "authorization");
  if (!h) return std::nullopt;
  std::string_view v = trim(value_of(*h));
  if (v.empty()) return std::nullopt;
  size_t sp = v.find_first_of(" \t");
  if (sp != std::string_view::npos && iequals(v.substr(0, sp), "bearer")) {
    std::string_view token = trim(v.substr(sp));
    if (!token.empty()) return token;
  }
  return v;
}

std::optional<std::string_view> api_key_credential(const RequestHeader *headers, size_t n) {
  const RequestHeader *h = first_header(headers, n, "x-api-key");
  if (!h) return std::nullopt;
  std::string_view v = trim(value_of(*h));
  if (v.empty()) return std::nullopt;
  return v;
}

}  // namespace

std::string credential_key(std::string_view credential) {
  auto digest = sha256(credential);
  // 128 bits: no two tenants collide by chance, and the key stays short in Redis and in metrics.
  std::string out = "key:";
  return out += hex({reinterpret_cast<const char *>(digest.data()), 16});
}

namespace {

// Appended, not "ip:" + format_ip(a): GCC 12 at -O3 warns (-Wrestrict, a false positive) on the latter.
std::string ip_key(IpAddr a, int ipv6_prefix) {
  std::string out = "ip:";
  if (a.is_v4()) return out += format_ip(a);
  int bits = std::clamp(ipv6_prefix, 1, 128);
  mask(a, bits);
  out += format_ip(a);
  if (bits < 128) {
    out += '/';
    out += std::to_string(bits);
  }
  return out;
}

}  // namespace

bool IpAddr::is_v4() const {
  static constexpr uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(bytes.data(), prefix, 12) == 0;
}

bool Cidr::contains(const IpAddr &a) const {
  IpAddr m = a;
  mask(m, bits);
  return m == net;
}

IpAddr Cidr::last() const {
  IpAddr a = net;
  for (int i = 0; i < 16; i++) {
    int keep = std::clamp(static_cast<int>(bits) - 8 * i, 0, 8);
    a.bytes[i] |= static_cast<uint8_t>(0xff >> keep);
  }
  return a;
}

std::optional<IpAddr> parse_ip(std::string_view text) {
  if (text.find(':') != std::string_view::npos) return parse_v6_addr(text);
  uint8_t q[4];
  if (!parse_v4(text, q)) return std::nullopt;
  return mapped(q);
}

std::optional<IpAddr> parse_endpoint(std::string_view s) {
  // No valid endpoint is this long; refusing early keeps a hostile entry from costing more than its length.
  if (s.empty() || s.size() > 128) return std::nullopt;
  if (s[0] == '[') {
    size_t close = s.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    std::string_view rest = s.substr(close + 1);
    if (!rest.empty() && (rest[0] != ':' || !valid_port(rest.substr(1)))) return std::nullopt;
    std::string_view inside = s.substr(1, close - 1);
    // Brackets hold IPv6 only (RFC 3986), so "[1.2.3.4]" is no address.
    if (inside.find(':') == std::string_view::npos) return std::nullopt;
    return parse_v6_zoned(inside);
  }
  size_t colon = s.find(':');
  if (colon == std::string_view::npos) return parse_ip(s);
  if (s.find(':', colon + 1) == std::string_view::npos) {  // one colon: "v4:port"
    if (!valid_port(s.substr(colon + 1))) return std::nullopt;
    uint8_t q[4];
    if (!parse_v4(s.substr(0, colon), q)) return std::nullopt;
    return mapped(q);
  }
  return parse_v6_zoned(s);
}

std::optional<Cidr> parse_cidr(std::string_view text) {
  size_t slash = text.find('/');
  std::string_view addr = text.substr(0, slash);
  bool v6 = addr.find(':') != std::string_view::npos;
  auto a = parse_ip(addr);
  if (!a) return std::nullopt;
  Cidr c;
  c.net = *a;
  c.bits = 128;
  if (slash != std::string_view::npos) {
    std::string_view bits = text.substr(slash + 1);
    if (bits.empty() || bits.size() > 3 || (bits.size() > 1 && bits[0] == '0')) return std::nullopt;
    int b = 0;
    for (char ch : bits) {
      if (!is_digit(ch)) return std::nullopt;
      b = b * 10 + (ch - '0');
    }
    if (b > (v6 ? 128 : 32)) return std::nullopt;
    c.bits = static_cast<uint8_t>(v6 ? b : 96 + b);
  }
  mask(c.net, c.bits);
  return c;
}

std::string format_ip(const IpAddr &a) {
  std::string out;
  if (a.is_v4()) {
    for (int i = 12; i < 16; i++) {
      if (i > 12) out.push_back('.');
      out += std::to_string(a.bytes[i]);
    }
    return out;
  }
  unsigned g[8];
  for (int i = 0; i < 8; i++) g[i] = unsigned{a.bytes[2 * i]} << 8 | a.bytes[2 * i + 1];
  // RFC 5952: the longest run of two or more zero groups becomes "::", the first of equal runs.
  int best = -1, best_len = 1;
  for (int i = 0; i < 8;) {
    if (g[i] != 0) {
      i++;
      continue;
    }
    int j = i;
    while (j < 8 && g[j] == 0) j++;
    if (j - i > best_len) {
      best = i;
      best_len = j - i;
    }
    i = j;
  }
  static const char digits[] = "0123456789abcdef";
  for (int i = 0; i < 8;) {
    if (i == best) {
      out += "::";
      i += best_len;
      continue;
    }
    if (!out.empty() && out.back() != ':') out.push_back(':');
    bool started = false;
    for (int shift = 12; shift >= 0; shift -= 4) {
      unsigned d = (g[i] >> shift) & 15;
      if (d || started || shift == 0) {
        out.push_back(digits[d]);
        started = true;
      }
    }
    i++;
  }
  return out;
}

void normalize_networks(std::vector<Cidr> &nets) {
  std::sort(nets.begin(), nets.end(), [](const Cidr &x, const Cidr &y) {
    return x.net.bytes != y.net.bytes ? x.net.bytes < y.net.bytes : x.bits < y.bits;
  });
  // Two networks are nested or disjoint; sorted by first address, one inside another comes right after the
  // last one kept.
  std::vector<Cidr> kept;
  kept.reserve(nets.size());
  for (const Cidr &c : nets)
    if (kept.empty() || !kept.back().contains(c.net) || kept.back().bits > c.bits) kept.push_back(c);
  nets = std::move(kept);
}

std::vector<const char *> tenant_header_names(const TenantPolicy &p) {
  std::vector<const char *> names;
  for (TenantPolicy::From s : p.from) {
    switch (s) {
      case TenantPolicy::From::authorization: names.push_back("authorization"); break;
      case TenantPolicy::From::api_key: names.push_back("x-api-key"); break;
      case TenantPolicy::From::ip:  // the forwarded header is believed only from a trusted proxy
        if (!p.trusted_proxies.empty())
          names.push_back(p.forwarded_header == TenantPolicy::ForwardedHeader::x_forwarded_for ? "x-forwarded-for"
                                                                                               : "forwarded");
        break;
    }
  }
  return names;
}

namespace {

bool credentials_apply(const TenantPolicy &p, CredentialCheck check) {
  return check == CredentialCheck::verified ||
         (check == CredentialCheck::unchecked && p.credentials == TenantPolicy::Credentials::unverified);
}

}  // namespace

std::optional<Credential> request_credential(const TenantPolicy &p, const RequestHeader *headers, size_t header_count,
                                             std::string_view peer) {
  if (!headers) header_count = 0;
  for (TenantPolicy::From s : p.from) {
    switch (s) {
      case TenantPolicy::From::authorization:
        if (auto c = authorization_credential(headers, header_count)) return Credential{s, *c};
        break;
      case TenantPolicy::From::api_key:
        if (auto c = api_key_credential(headers, header_count)) return Credential{s, *c};
        break;
      case TenantPolicy::From::ip:
        if (client_address(p, headers, header_count, peer)) return std::nullopt;
        break;
    }
  }
  return std::nullopt;
}

std::string derive_tenant(const TenantPolicy &p, const RequestHeader *headers, size_t header_count,
                          std::string_view peer, CredentialCheck check) {
  if (!headers) header_count = 0;
  bool credentials = credentials_apply(p, check);
  for (TenantPolicy::From s : p.from) {
    switch (s) {
      case TenantPolicy::From::authorization:
        if (!credentials) break;
        if (auto c = authorization_credential(headers, header_count)) return credential_key(*c);
        break;
      case TenantPolicy::From::api_key:
        if (!credentials) break;
        if (auto c = api_key_credential(headers, header_count)) return credential_key(*c);
        break;
      case TenantPolicy::From::ip:
        if (auto a = client_address(p, headers, header_count, peer)) return ip_key(*a, p.ipv6_prefix);
        break;
    }
  }
  return "anonymous";
}

}  // namespace floodwall
