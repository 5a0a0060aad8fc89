#include "util/sha1.hpp"

#include <cstdint>
#include <cstring>

#include "policy/tenant_key.hpp"

namespace floodwall {

namespace {

uint32_t rol(uint32_t x, int n) {
  return (x << n) | (x >> (32 - n));
}

void block(uint32_t h[5], const uint8_t *p) {
  uint32_t w[80];
  for (int i = 0; i < 16; i++)
    w[i] = (uint32_t{p[4 * i]} << 24) | (uint32_t{p[4 * i + 1]} << 16) | (uint32_t{p[4 * i + 2]} << 8) | p[4 * i + 3];
  for (int i = 16; i < 80; i++) w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
  uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
  for (int i = 0; i < 80; i++) {
    uint32_t f, k;
    if (i < 20)
      f = (b & c) | (~b & d), k = 0x5a827999;
    else if (i < 40)
      f = b ^ c ^ d, k = 0x6ed9eba1;
    else if (i < 60)
      f = (b & c) | (b & d) | (c & d), k = 0x8f1bbcdc;
    else
      f = b ^ c ^ d, k = 0xca62c1d6;
    uint32_t t = rol(a, 5) + f + e + k + w[i];
    e = d;
    d = c;
    c = rol(b, 30);
    b = a;
    a = t;
  }
  h[0] += a;
  h[1] += b;
  h[2] += c;
  h[3] += d;
  h[4] += e;
}

}  // namespace

std::string sha1_hex(std::string_view data) {
  uint32_t h[5] = {0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476, 0xc3d2e1f0};
  const auto *p = reinterpret_cast<const uint8_t *>(data.data());
  size_t n = data.size(), full = n / 64;
  for (size_t i = 0; i < full; i++) block(h, p + 64 * i);
  uint8_t tail[128] = {};
  size_t rest = n - full * 64;
  if (rest) std::memcpy(tail, p + full * 64, rest);
  tail[rest] = 0x80;
  size_t len = rest + 9 <= 64 ? 64 : 128;
  uint64_t bits = static_cast<uint64_t>(n) * 8;
  for (int i = 0; i < 8; i++) tail[len - 1 - i] = static_cast<uint8_t>(bits >> (8 * i));
  block(h, tail);
  if (len == 128) block(h, tail + 64);
  char digest[20];
  for (int i = 0; i < 5; i++)
    for (int j = 0; j < 4; j++) digest[4 * i + j] = static_cast<char>(h[i] >> (24 - 8 * j));
  return hex({digest, 20});
}

}  // namespace floodwall
