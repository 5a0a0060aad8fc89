// What the admin API reads and writes through a store (engine/admin.cpp, `floodwall`): a tenant's control
// record, a change to it, a tenant's state, the store's status for an operator and its counters (StoreStats, in the
// metrics). Part of the Store interface (store.hpp).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "policy/policy.hpp"
#include "policy/tenant_key.hpp"

namespace floodwall {

enum class BreakerState : uint8_t { closed = 0, open = 1, half_open = 2 };

struct StoreStats {
  uint64_t evictions = 0;       // memory store: tenants evicted beyond max_tenants
  uint64_t tenants = 0;         // memory store: tenants held now
  uint64_t release_errors = 0;  // releases the store could not apply (their slots heal after ttl_s)
  uint64_t repairs = 0;         // shm store: locks taken over from a process that died holding them
  uint64_t reconnects = 0;
  uint64_t noscript_reloads = 0;
  uint64_t connections_in_use = 0;                    // Redis store: the connections calls are spread over now
  int64_t waiting = 0;                                // Redis store: admits waiting on a reply now
  int64_t waiting_cap = 0;                            // Redis store: beyond this many, admits do not wait
  std::array<uint64_t, kFailReasonCount> failures{};  // by reason
  BreakerState breaker = BreakerState::closed;
};

// A tenant's control record, kept in the store (Redis: the hash <prefix>:{<tenant>}:ctl, which the admit
// script reads itself): its tier, its own bucket, its block. Written by the admin API.
struct TenantControl {
  std::string tier;                 // "": none
  int64_t rate_m = 0, burst_m = 0;  // a runtime override of the bucket (0: none)
  bool blocked = false;
  int64_t blocked_until_s = 0;  // 0: until unblocked
  bool empty() const { return tier.empty() && rate_m == 0 && !blocked; }
};

// An admin call's change to one tenant's control record: each field left alone unless its flag says.
struct ControlChange {
  bool set_tier = false, set_override = false, set_block = false;
  std::string tier;                 // "": back to none
  int64_t rate_m = 0, burst_m = 0;  // 0: removes the override
  bool blocked = false;
  int64_t blocked_until_s = 0;
};

// What the admin API shows of a tenant: its control record and each limiter's state now.
struct TenantState {
  TenantControl control;
  int64_t tokens_m = -1;           // the bucket (-1: not asked)
  int64_t in_flight = 0;           // live concurrency slots
  std::vector<int64_t> rule_left;  // per rule asked (as in AdmitOp::rules): micro-tokens or units left
  std::vector<int64_t> rule_reset_s;
  int64_t now_s = 0;  // the store's clock
};

// -1: no fleet-wide mode is set for that limiter, else a Mode.
using FleetModes = std::array<int8_t, kLimiterCount>;

// What the store holds for the fleet as a whole, read at once for an operator (`floodwall status`).
struct StoreStatus {
  FleetModes modes{};             // the fleet-wide modes the store holds now (-1: none)
  bool fleet_wide_modes = false;  // whether they are every client's (Redis), not only this process's (memory, shm)
  int64_t fleet_in_flight = -1;   // the fleet shedder's live slots plus the clients' live reports; -1: unknown
  int64_t reporting_clients = 0;  // clients whose report of in-process fleet usage is live (leases)
  int64_t controlled = 0;         // tenants with a control record
  std::string server;             // what answers: "redis 7.0.15", "memory (this process)", ...
  std::string topology;           // "standalone", "cluster of 3 masters", "sentinel: master at 10.0.0.5:6379"
  int64_t round_trip_us = -1;     // one PING's round trip over the admin connection; -1: not measured
};

}  // namespace floodwall
