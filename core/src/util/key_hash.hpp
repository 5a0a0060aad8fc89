// Hashing and comparing tenant keys (at most 65 bytes, most of them short): shared by the memory store
// and the shared-memory store.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace floodwall {

namespace key_hash_detail {

inline uint64_t load8(const char *p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

inline uint64_t load4(const char *p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

__extension__ typedef unsigned __int128 uint128;  // GCC and Clang; __extension__ keeps -Wpedantic quiet

// 64 x 64 -> 128-bit multiply, folded: the mixing step of wyhash and of rapidhash.
inline uint64_t fold_mul(uint64_t a, uint64_t b) {
  uint128 r = static_cast<uint128>(a) * b;
  return static_cast<uint64_t>(r) ^ static_cast<uint64_t>(r >> 64);
}

constexpr uint64_t kP0 = 0xa0761d6478bd642fULL, kP1 = 0xe7037ed1a0b428dbULL, kP2 = 0x8ebc6af09c88c6e3ULL;

}  // namespace key_hash_detail

// Whether two ids of length n are equal; the short ones with overlapping loads instead of a call to
// memcmp. Every load stays inside both ids (a stored key's buffer is not zeroed past its length).
inline bool same_bytes(const char *a, const char *b, size_t n) {
  using namespace key_hash_detail;
  if (n >= 8 && n <= 16) return load8(a) == load8(b) && load8(a + n - 8) == load8(b + n - 8);
  if (n >= 4 && n < 8) return load4(a) == load4(b) && load4(a + n - 4) == load4(b + n - 4);
  return std::memcmp(a, b, n) == 0;
}

// A seeded hash in the manner of wyhash: the first and last eight bytes of an id (they overlap below
// 16) and its length are one 128-bit multiply; longer ids fold in 16 bytes a round. The seed is drawn
// per table, so that a caller cannot choose ids that pile up in one probe chain.
inline uint64_t key_hash(std::string_view key, uint64_t seed0) {
  using namespace key_hash_detail;
  const char *p = key.data();
  size_t n = key.size();
  uint64_t seed = seed0 ^ (n * kP0), a, b;
  if (n >= 4 && n <= 16) {
    a = n >= 8 ? load8(p) : load4(p);
    b = n >= 8 ? load8(p + n - 8) : load4(p + n - 4);
  } else if (n < 4) {
    a = n ? (uint64_t{static_cast<uint8_t>(p[0])} << 16) | (uint64_t{static_cast<uint8_t>(p[n >> 1])} << 8) |
                static_cast<uint8_t>(p[n - 1])
          : 0;
    b = 0;
  } else {
    size_t i = 0;
    for (; i + 16 < n; i += 16) seed = fold_mul(load8(p + i) ^ kP1, load8(p + i + 8) ^ seed);
    a = load8(p + n - 16);
    b = load8(p + n - 8);
  }
  return fold_mul(kP1 ^ n, fold_mul(a ^ kP1, b ^ seed) ^ kP2);
}

// The least power of two that is at least n (and at least 16): hash table sizes.
inline size_t pow2_at_least(size_t n) {
  size_t p = 16;
  while (p < n) p *= 2;
  return p;
}

}  // namespace floodwall
