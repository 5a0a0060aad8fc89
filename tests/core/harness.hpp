// A Guard on the memory store in simulated time, and a policy's error, for the core tests.
#pragma once

#include <memory>
#include <string>

#include "engine/guard.hpp"
#include "policy/policy.hpp"
#include "stores/memory_store.hpp"
#include "util/clock.hpp"

namespace floodwall::testing {

// The error a policy is refused with, "(accepted)" when it is not.
inline std::string policy_error(const std::string &json) {
  try {
    parse_policy(json);
  } catch (const PolicyError &e) {
    return e.what();
  }
  return "(accepted)";
}

struct Sim {
  explicit Sim(const std::string &policy_json, uint64_t seed = 42) : rng(seed) {
    Policy p = parse_policy(policy_json);
    auto store = std::make_unique<MemoryStore>(clock, p.max_tenants);
    guard = std::make_unique<Guard>(std::move(p), std::move(store), clock, rng);
  }
  Decision admit(std::string_view tenant, uint64_t cost = 1, std::string_view route = "",
                 std::string_view method = "GET", bool critical = false, bool sandbox = false) {
    Request r;
    r.tenant = tenant;
    r.cost = cost;
    r.route = route;
    r.method = method;
    r.critical = critical;
    r.sandbox = sandbox;
    return guard->admit(r);
  }
  // Admits n requests at the current instant and returns how many were allowed (releasing each).
  int burst(std::string_view tenant, int n, uint64_t cost = 1) {
    int ok = 0;
    for (int i = 0; i < n; i++) {
      Decision d = admit(tenant, cost);
      ok += d.allowed;
      guard->release(d.ticket);
    }
    return ok;
  }
  ManualClock clock;
  SeededRng rng;
  std::unique_ptr<Guard> guard;
};

}  // namespace floodwall::testing
