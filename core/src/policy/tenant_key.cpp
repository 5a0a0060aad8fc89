#include "policy/tenant_key.hpp"

#include <algorithm>
#include <cstring>

#include "util/digests.hpp"

namespace floodwall {

void TenantKey::assign_other(std::string_view tenant) {
  if (tenant.size() <= kMaxRaw) {
    std::memcpy(buf_.data(), tenant.data(), tenant.size());
    len_ = static_cast<uint8_t>(tenant.size());
    return;
  }
  auto digest = sha256(tenant);
  std::string h = hex({reinterpret_cast<const char *>(digest.data()), digest.size()});
  buf_[0] = 'H';
  std::memcpy(buf_.data() + 1, h.data(), h.size());
  len_ = kSize;
}

TenantKey TenantKey::from_canonical(std::string_view canonical) {
  TenantKey k;
  size_t n = std::min(canonical.size(), kSize);
  std::memcpy(k.buf_.data(), canonical.data(), n);
  k.len_ = static_cast<uint8_t>(n);
  return k;
}

namespace {
// Bytes an id may have and still appear in a Redis key as it is: never a brace, a space, a control byte
// or '~' (which starts an encoded id, so the two forms cannot collide). ASCII by hand, not isalnum():
// a process's locale must never change which key a tenant has.
bool key_safe(std::string_view id) {
  if (id.empty()) return false;
  for (char c : id) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
              c == '.' || c == ':' || c == '@';
    if (!ok) return false;
  }
  return true;
}
}  // namespace

void TenantKey::append_encoded(std::string &out) const {
  std::string_view id = view();
  if (key_safe(id)) {
    out.append(id);
  } else {
    out.push_back('~');
    out.append(base64url(id));
  }
}

std::string TenantKey::encoded() const {
  std::string out;
  append_encoded(out);
  return out;
}

std::string TenantKey::escaped() const {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : view()) {
    if (c >= 0x20 && c < 0x7f && c != '\\' && c != '"') {
      out.push_back(static_cast<char>(c));
    } else {
      out += "\\x";
      out.push_back(digits[c >> 4]);
      out.push_back(digits[c & 15]);
    }
  }
  return out;
}

}  // namespace floodwall
