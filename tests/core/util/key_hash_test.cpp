// Hashing and comparing tenant keys (util/key_hash.hpp), as the memory and shared-memory stores do: every
// length a key can have (0 to 65 bytes, and longer), a difference at every position, loads that stay inside
// each key (ASan sees each key in a buffer of exactly its size), and a seed that changes every hash.
#include "util/key_hash.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>

using floodwall::key_hash;
using floodwall::pow2_at_least;
using floodwall::same_bytes;

namespace {

// A key of exactly n bytes on the heap, no byte past it: an overread is ASan's to report.
std::unique_ptr<char[]> exact(const std::string &s) {
  auto p = std::make_unique<char[]>(s.size() ? s.size() : 1);
  s.copy(p.get(), s.size());
  return p;
}

std::string key_of(size_t n, char fill = 'k') {
  std::string s(n, fill);
  for (size_t i = 0; i < n; i++) s[i] = static_cast<char>('a' + (i * 7 + 3) % 26);
  return s;
}

}  // namespace

TEST(KeyHash, EqualBytesAreEqualAndOneDifferentByteAnywhereIsNot) {
  for (size_t n = 0; n <= 80; n++) {
    std::string s = key_of(n);
    auto a = exact(s), b = exact(s);
    EXPECT_TRUE(same_bytes(a.get(), b.get(), n)) << n;
    for (size_t i = 0; i < n; i++) {
      std::string t = s;
      t[i] = static_cast<char>(t[i] ^ 0x01);
      auto c = exact(t);
      EXPECT_FALSE(same_bytes(a.get(), c.get(), n)) << "length " << n << ", byte " << i;
    }
  }
}

TEST(KeyHash, AOneByteChangeAtAnyPositionChangesTheHash) {
  const uint64_t seed = 0x9e3779b97f4a7c15ULL;
  std::set<uint64_t> seen;
  size_t keys = 0;
  for (size_t n = 0; n <= 80; n++) {
    std::string s = key_of(n);
    auto a = exact(s);
    seen.insert(key_hash(std::string_view(a.get(), n), seed));
    keys++;
    for (size_t i = 0; i < n; i++) {
      std::string t = s;
      t[i] = static_cast<char>(t[i] ^ 0x20);
      auto c = exact(t);
      seen.insert(key_hash(std::string_view(c.get(), n), seed));
      keys++;
    }
  }
  EXPECT_EQ(seen.size(), keys) << "no two of " << keys << " keys (each length, each one-byte change) collide";
}

TEST(KeyHash, TheLengthIsPartOfTheHash) {
  // Keys of zero bytes: "", "\0", "\0\0", ... must not all land on one hash.
  std::set<uint64_t> seen;
  for (size_t n = 0; n <= 65; n++) seen.insert(key_hash(std::string(n, '\0'), 42));
  EXPECT_EQ(seen.size(), 66u);
}

TEST(KeyHash, TheSeedChangesEveryHashAndTheSameSeedGivesTheSame) {
  for (size_t n : {0u, 1u, 3u, 4u, 7u, 8u, 15u, 16u, 17u, 32u, 33u, 65u}) {
    std::string s = key_of(n);
    EXPECT_EQ(key_hash(s, 1), key_hash(s, 1)) << n;
    EXPECT_NE(key_hash(s, 1), key_hash(s, 2)) << n;
  }
}

TEST(KeyHash, TableSizesArePowersOfTwoOfAtLeastSixteen) {
  EXPECT_EQ(pow2_at_least(0), 16u);
  EXPECT_EQ(pow2_at_least(16), 16u);
  EXPECT_EQ(pow2_at_least(17), 32u);
  EXPECT_EQ(pow2_at_least(1000), 1024u);
  EXPECT_EQ(pow2_at_least(1024), 1024u);
  EXPECT_EQ(pow2_at_least(1025), 2048u);
}
