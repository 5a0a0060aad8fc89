// A failed invariant in a fuzz target: print it and abort, so that libFuzzer saves the input as a crash.
// (assert() would vanish under NDEBUG.)
#pragma once

#include <cstdio>
#include <cstdlib>

#define FW_FUZZ_CHECK(cond)                                                             \
  do {                                                                                  \
    if (!(cond)) {                                                                      \
      std::fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                     \
    }                                                                                   \
  } while (0)
