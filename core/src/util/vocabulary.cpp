#include "util/vocabulary.hpp"

namespace floodwall {

const char *limiter_name(Limiter l) {
  switch (l) {
    case Limiter::request_rate: return "request_rate";
    case Limiter::concurrency: return "concurrency";
    case Limiter::fleet: return "fleet";
    case Limiter::utilization: return "utilization";
    case Limiter::adaptive: return "adaptive";
    case Limiter::none: break;
  }
  return "none";
}

const char *mode_name(Mode m) {
  switch (m) {
    case Mode::enforce: return "enforce";
    case Mode::dark: return "dark";
    case Mode::off: return "off";
  }
  return "enforce";
}

const char *fail_reason_name(FailReason r) {
  switch (r) {
    case FailReason::none: return "none";
    case FailReason::timeout: return "timeout";
    case FailReason::connection: return "connection";
    case FailReason::breaker: return "breaker";
    case FailReason::config: return "config";
    case FailReason::error: return "error";
    case FailReason::overload: return "overload";
    case FailReason::cluster: return "cluster";
  }
  return "error";
}

}  // namespace floodwall
