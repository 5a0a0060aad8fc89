#pragma once

#include <memory>
#include <stdexcept>

#include "policy/policy.hpp"
#include "stores/store.hpp"
#include "util/clock.hpp"
#include "util/errors.hpp"

namespace floodwall {

// "memory://" (the default), "shm://NAME", or a Redis URL (redis/url.hpp).
std::unique_ptr<Store> make_store(const Policy &p, const Clock &clock);

}  // namespace floodwall
