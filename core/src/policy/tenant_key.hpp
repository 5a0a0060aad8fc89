// The canonical form of a tenant id, shared by every store.
//
// Ids of up to 64 bytes are kept as they are (any bytes: NUL, braces, CR/LF). Longer ids (a 1 MB header
// value, say) become "H" + the hex SHA-256 of the id: exactly 65 bytes, so no short id can equal a
// hashed one, and memory per tenant stays bounded whatever a caller sends. The Redis store then writes
// the canonical form inside the hash tag: as it is when it has only [A-Za-z0-9._:@-] (an operator can
// read `floodwall:{acme}:rate`), otherwise as '~' + base64url, so no id can move a key to another slot, collide
// with another tenant or put a byte of its own into a key.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace floodwall {

class TenantKey {
 public:
  static constexpr size_t kMaxRaw = 64;
  static constexpr size_t kSize = 65;

  TenantKey() = default;
  explicit TenantKey(std::string_view tenant) { assign(tenant); }
  // Makes this the canonical form of `tenant`, in place (no temporary to copy). Ids of 8 to 16 bytes,
  // the usual API key or account id, are two overlapping eight-byte moves instead of a memcpy call.
  void assign(std::string_view tenant) {
    size_t n = tenant.size();
    if (n >= 8 && n <= 16) {
      uint64_t head, tail;
      std::memcpy(&head, tenant.data(), 8);
      std::memcpy(&tail, tenant.data() + n - 8, 8);
      std::memcpy(buf_.data(), &head, 8);
      std::memcpy(buf_.data() + n - 8, &tail, 8);
      len_ = static_cast<uint8_t>(n);
      return;
    }
    assign_other(tenant);
  }
  // From bytes that are already canonical (at most kSize bytes, as view() returned them).
  static TenantKey from_canonical(std::string_view canonical);

  std::string_view view() const { return {buf_.data(), len_}; }
  // The id as it appears in a Redis key: itself when it has only [A-Za-z0-9._:@-], else '~' and its
  // base64url (no padding). Never a brace, a space or a control byte.
  std::string encoded() const;
  void append_encoded(std::string &out) const;
  // For metrics and logs: printable ASCII kept, everything else as \xNN (never raw caller bytes).
  std::string escaped() const;

  friend bool operator==(const TenantKey &a, const TenantKey &b) { return a.view() == b.view(); }

 private:
  void assign_other(std::string_view tenant);

  std::array<char, kSize> buf_;  // only the first len_ bytes are ever read: no need to zero the rest
  uint8_t len_ = 0;
};

}  // namespace floodwall
