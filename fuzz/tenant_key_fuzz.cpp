// TenantKey on any bytes: the canonical form, its Redis-key encoding and its escaped form. The
// encoding is what keeps a caller's bytes out of Redis keys and the escaped form what keeps them out
// of metrics and logs, so both are checked by decoding them back.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "check.hpp"
#include "policy/tenant_key.hpp"
#include "util/digests.hpp"

namespace {

bool key_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
         c == ':' || c == '@' || c == '~' || c == '-';
}

std::optional<std::string> unbase64url(std::string_view s) {
  static const std::string_view alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  if (s.size() % 4 == 1) return std::nullopt;
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : s) {
    size_t v = alphabet.find(c);
    if (v == std::string_view::npos) return std::nullopt;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return out;
}

// The inverse of escaped(): "\xNN" back to the byte.
std::optional<std::string> unprintable(std::string_view s) {
  auto hexval = [](char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1; };
  std::string out;
  for (size_t i = 0; i < s.size(); i++) {
    if (s[i] != '\\') {
      out.push_back(s[i]);
      continue;
    }
    if (i + 3 >= s.size()) return std::nullopt;
    if (s[i + 1] != 'x' || hexval(s[i + 2]) < 0 || hexval(s[i + 3]) < 0) return std::nullopt;
    out.push_back(static_cast<char>(hexval(s[i + 2]) * 16 + hexval(s[i + 3])));
    i += 3;
  }
  return out;
}

void check_key(const floodwall::TenantKey &k, std::string_view id) {
  std::string_view v = k.view();
  FW_FUZZ_CHECK(v.size() <= floodwall::TenantKey::kSize);
  if (id.size() <= floodwall::TenantKey::kMaxRaw) {
    FW_FUZZ_CHECK(v == id);  // short ids are kept as they are, every byte
  } else {
    auto d = floodwall::sha256(id);
    FW_FUZZ_CHECK(v == "H" + floodwall::hex({reinterpret_cast<const char *>(d.data()), d.size()}));
  }

  std::string enc = k.encoded();
  FW_FUZZ_CHECK(!enc.empty());
  for (char c : enc) FW_FUZZ_CHECK(key_char(c));
  std::string appended = "prefix:{";
  k.append_encoded(appended);
  FW_FUZZ_CHECK(appended == "prefix:{" + enc);
  // One id, one encoding, and back: '~' + base64url of the canonical bytes, or the bytes themselves.
  if (enc[0] == '~') {
    auto back = unbase64url(std::string_view(enc).substr(1));
    FW_FUZZ_CHECK(back && *back == v);
  } else {
    FW_FUZZ_CHECK(enc == v);
    FW_FUZZ_CHECK(enc.find('~') == std::string::npos);
  }

  std::string pr = k.escaped();
  for (unsigned char c : pr) FW_FUZZ_CHECK(c >= 0x20 && c < 0x7f && c != '"');
  auto back = unprintable(pr);
  FW_FUZZ_CHECK(back && *back == v);

  FW_FUZZ_CHECK(floodwall::TenantKey::from_canonical(v) == k);
  FW_FUZZ_CHECK(floodwall::TenantKey::from_canonical(v).view() == v);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view in(reinterpret_cast<const char *>(data), size);
  floodwall::TenantKey k(in);
  check_key(k, in);
  // assign() reuses the buffer in place: a second, shorter or longer id must leave nothing of the first.
  std::string_view second = in.substr(size / 2);
  k.assign(second);
  check_key(k, second);
  FW_FUZZ_CHECK(k == floodwall::TenantKey(second));
  // from_canonical takes at most kSize bytes of whatever it is given.
  FW_FUZZ_CHECK(floodwall::TenantKey::from_canonical(in).view() == in.substr(0, floodwall::TenantKey::kSize));
  return 0;
}
