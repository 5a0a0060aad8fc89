// The core's error types, where every part can throw them without pulling in the part that catches them.
// capi/src/floodwall.cpp maps each to its status code (PolicyError, in policy/policy.hpp, to FW_EPOLICY).
#pragma once

#include <stdexcept>

namespace floodwall {

// A request the core refuses to decide (an empty tenant, a cost above the burst, a bad argument); the
// message names the field. FW_EINVAL.
class BadRequest : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// A store URL that cannot be used ("redis://:notaport", "mysql://"), or a store that cannot be set up (a
// TLS file OpenSSL cannot use). FW_ESTORE.
class StoreError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace floodwall
