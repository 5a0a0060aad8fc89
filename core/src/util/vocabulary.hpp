// The words every part of the core speaks: the limiters (the seed's four and the adaptive limit), a limiter's mode, and
// why the store did not decide. The C ABI's fw_limiter, fw_mode and fw_fail_reason carry the same values (capi/src
// checks each with a static_assert), so a value crosses the ABI as a cast.
#pragma once

#include <cstdint>

namespace floodwall {

enum class Limiter : uint8_t {
  none = 0,
  request_rate = 1,
  concurrency = 2,
  fleet = 3,
  utilization = 4,
  adaptive = 5  // the adaptive concurrency limit (engine/adaptive_limit.hpp)
};
constexpr int kLimiterCount = 6;
constexpr Limiter kLimiters[] = {Limiter::request_rate, Limiter::concurrency, Limiter::fleet, Limiter::utilization,
                                 Limiter::adaptive};  // every one but none, in the path's order of building
const char *limiter_name(Limiter l);                  // "request_rate", ...; "none"

enum class Mode : uint8_t { enforce = 0, dark = 1, off = 2 };
const char *mode_name(Mode m);

// Why the store did not decide: it did not answer within the deadline (timeout), the connection broke or
// could not be made (connection), the breaker is open after repeated failures (breaker), the deployment is
// wrong (config: a script or command refused, TLS or AUTH refused), Redis answered with an error (error),
// or more admits were waiting on the store than it answers within the deadline, so this one was decided
// at once instead of waiting for a deadline it would miss (overload), or a Redis Cluster could not serve
// the tenant's slot now (cluster: CLUSTERDOWN, TRYAGAIN during a migration, or no master known for it).
enum class FailReason : uint8_t {
  none = 0,
  timeout = 1,
  connection = 2,
  breaker = 3,
  config = 4,
  error = 5,
  overload = 6,
  cluster = 7
};
constexpr int kFailReasonCount = 8;
const char *fail_reason_name(FailReason r);

}  // namespace floodwall
