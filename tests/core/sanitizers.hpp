// Whether this test binary runs under a sanitizer (ASan or TSan), which makes every thread several
// times slower. The tests that measure what the shipped defaults do under ordinary load (how many
// decisions meet a 50 ms deadline) keep their exactness assertions under a sanitizer and give the
// deadline the room the instrumentation takes; the Release run asserts the defaults themselves.
#pragma once

namespace floodwall::testing {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif

}  // namespace floodwall::testing
