#pragma once

#include <memory>
#include <stdexcept>

#include "policy/policy.hpp"
#include "stores/store.hpp"
#include "util/clock.hpp"

namespace floodwall {

// A store URL that cannot be used ("redis://:notaport", "mysql://").
class StoreError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// "memory://" (the default), "shm://NAME", or a Redis URL (redis/url.hpp).
std::unique_ptr<Store> make_store(const Policy &p, const Clock &clock);

}  // namespace floodwall
