// The calls of a store shared over the network that hot tenants make (engine/hot_tenants*): a lease of
// tokens and slots (lua/tenant_lease.lua) and a report of the fleet usage decided in process
// (lua/fleet_report.lua), each with its result and completion. Part of the Store interface (store.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "policy/policy.hpp"
#include "policy/tenant_key.hpp"
#include "stores/store_rules.hpp"

namespace floodwall {

// One lease call on a tenant (lua/tenant_lease.lua): gives back what the process no longer holds, then
// takes what it asks for. Nothing is rejected: each part grants what exists.
struct LeaseOp {
  TenantKey tenant;
  bool tokens = false;  // ask for tokens
  int64_t rate_m = 0, burst_m = 0;
  int64_t min_m = 0;        // grant none unless the bucket holds this many (whole tokens)
  int64_t want_m = 0;       // grant at most this many (whole tokens)
  int64_t give_back_m = 0;  // unspent tokens of the previous lease, credited first
  bool slots = false;       // ask for slot ids (`wanted`)
  int64_t conc_limit = 0, conc_ttl_us = 0;
  std::vector<SlotId> released;  // slots given back
  std::vector<SlotId> wanted;    // ids to add, at most kMaxLeasedSlots; the first `slots` granted are used
  bool gives_back() const { return give_back_m > 0 || !released.empty(); }
};

struct LeaseResult {
  bool decided = false;  // false: the store could not answer; the waiting requests go to redis.fallback
  FailReason reason = FailReason::none;
  int64_t granted_m = 0;     // tokens now leased to the process
  int64_t tokens_m = 0;      // what the bucket holds after the grant (or held, when it granted none)
  int64_t slots = 0;         // slots granted: the first `slots` ids of `wanted`
  int64_t conc_count = 0;    // the tenant's live slots after the grant
  int64_t store_now_us = 0;  // the store's clock when it granted (Redis' TIME)
  bool controlled = false;   // the tenant has a control record: nothing granted; its requests go exact
};

class LeaseCompletion {
 public:
  virtual ~LeaseCompletion() = default;
  virtual void complete(LeaseResult &&r) = 0;
};

// This client's fleet usage decided in process, and what the rest of the fleet holds (lua/fleet_report.lua).
struct FleetReportOp {
  std::string client;      // this client's id
  int64_t in_flight = 0;   // its in-process non-critical requests in flight
  int64_t expires_us = 0;  // how long the report counts; 0 withdraws this client's report
  int64_t fleet_ttl_us = 0;
};

struct FleetReportResult {
  bool decided = false;
  int64_t others = 0;     // the other clients' live reports
  int64_t set_live = 0;   // the fleet set's live slots
  int64_t reporting = 0;  // how many other clients have a live report
};

class FleetReportCompletion {
 public:
  virtual ~FleetReportCompletion() = default;
  virtual void complete(FleetReportResult &&r) = 0;
};

}  // namespace floodwall
