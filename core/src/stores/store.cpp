#include "stores/store.hpp"

namespace floodwall {

const char *fail_reason_name(FailReason r) {
  switch (r) {
    case FailReason::none: return "none";
    case FailReason::timeout: return "timeout";
    case FailReason::connection: return "connection";
    case FailReason::breaker: return "breaker";
    case FailReason::config: return "config";
    case FailReason::error: return "error";
    case FailReason::overload: return "overload";
  }
  return "error";
}

}  // namespace floodwall
