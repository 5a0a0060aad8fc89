// Tenants of a real test cluster (cluster_redis.hpp) by the master that serves them, and the check that
// each is decided there by Redis: shared by the cluster tests.
#pragma once

#include <floodwall.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "admits.hpp"
#include "cluster_redis.hpp"
#include "stores/redis/cluster_map.hpp"

namespace floodwall::testing {

// A client's metrics as JSON (null when they cannot be read).
inline nlohmann::json metrics_json(fw_client *c) {
  fw_buf b = FW_BUF_INIT;
  if (fw_metrics_json(c, &b) != FW_OK) return nlohmann::json();
  nlohmann::json m = nlohmann::json::parse(std::string(b.ptr ? b.ptr : "", b.size), nullptr, false);
  fw_buf_dispose(&b);
  return m;
}

// Tenant ids stem-0, stem-1, ... by the master that serves their keys now (CLUSTER SLOTS once, the slot
// computed here: a plain id is written as it is inside the hash tag), `per` of each master.
inline std::map<int, std::vector<std::string>> tenants_on_masters(const ClusterTopology &t, const std::string &stem,
                                                                  size_t per) {
  auto ranges = t.slot_ranges();
  std::map<int, std::vector<std::string>> out;
  for (const auto &r : ranges) out[r.master];
  for (int i = 0; i < 100000; i++) {
    std::string tenant = stem + "-" + std::to_string(i);
    uint16_t slot = floodwall::key_slot(rate_key(tenant));
    for (const auto &r : ranges) {
      if (r.start <= slot && slot <= r.end && out[r.master].size() < per) out[r.master].push_back(tenant);
    }
    bool full = true;
    for (const auto &[master, tenants] : out) full = full && tenants.size() >= per;
    if (full) break;
  }
  return out;
}

// Every tenant of `on` is answered by the store within 5 s, then 20 admits in a row each, its bucket on its
// master.
inline void every_tenant_by_its_master(fw_client *c, const ClusterTopology &t,
                                       const std::map<int, std::vector<std::string>> &on) {
  for (const auto &[master, tenants] : on) {
    for (const auto &tenant : tenants) {
      ASSERT_TRUE(answered_within(c, tenant, 5)) << tenant << " of " << master << ": never by Redis";
      int store = 0;
      for (int i = 0; i < 20; i++) {
        fw_decision d = admit(c, tenant);
        store += by_store(d);
        EXPECT_FALSE(d.degraded) << tenant << " of " << master << ": " << fw_fail_reason_name(d.fail_reason);
      }
      EXPECT_EQ(store, 20) << tenant << " of " << master << ": every decision by its master";
      EXPECT_EQ(t.command(master, {"EXISTS", rate_key(tenant)}), "1") << tenant << " on its master " << master;
    }
  }
}

}  // namespace floodwall::testing
