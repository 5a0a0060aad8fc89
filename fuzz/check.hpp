// A failed invariant in a fuzz target: print it and abort, so that libFuzzer saves the input as a crash.
// (assert() would vanish under NDEBUG.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#define FW_FUZZ_CHECK(cond)                                                             \
  do {                                                                                  \
    if (!(cond)) {                                                                      \
      std::fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                     \
    }                                                                                   \
  } while (0)

// hiredis 0.14 (Debian 12) allocates an array's element pointers as soon as it reads its header: "*1000000000"
// is an 8 GB calloc before one element has arrived (a finding about hiredis, reported, not floodwall's to
// fix here; hiredis 1.x bounds it with maxelements). The targets that feed bytes to hiredis' reader skip
// inputs that declare such an array, so that the rest stays fuzzed instead of every run stopping on that
// one allocation.
inline bool declares_huge_array(const uint8_t *data, size_t size) {
  for (size_t i = 0; i < size; i++) {
    if (data[i] != '*') continue;
    uint64_t n = 0;
    for (size_t j = i + 1; j < size && data[j] >= '0' && data[j] <= '9' && n <= 1'000'000; j++)
      n = n * 10 + (data[j] - '0');
    if (n > 1'000'000) return true;
  }
  return false;
}
