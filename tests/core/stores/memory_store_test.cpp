// stores/memory_store: memory://, the embedded default. Its tenant bound is exact and its evictions are
// counted; an evicted tenant is never one with a request in flight; a tenant moved by an eviction's gap
// closing is still found with its slot and its bucket. (Exactness under threads: guard_test.cpp's
// Concurrency and TokenBucketThreads tests, which run on this store.)
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "harness.hpp"

using floodwall::Decision;
using floodwall::Limiter;
using floodwall::testing::Sim;

TEST(MemoryStore, TenantCountIsBoundedAndEvictionsAreCounted) {
  Sim s(R"({"max_tenants": 100, "request_rate": {"rate": 1, "burst": 5}})");
  for (int i = 0; i < 250; i++) s.admit("tenant-" + std::to_string(i));
  auto st = s.guard->store().stats();
  EXPECT_EQ(st.tenants, 100u);
  EXPECT_EQ(st.evictions, 150u);
  EXPECT_NE(s.guard->metrics_prometheus().find("floodwall_store_evictions_total 150"), std::string::npos);
}

TEST(MemoryStore, EvictionSparesTenantsWithRequestsInFlight) {
  Sim s(R"({"max_tenants": 2, "concurrency": {"limit": 1}})");
  Decision held = s.admit("busy");
  ASSERT_TRUE(held.allowed);
  for (int i = 0; i < 10; i++) s.guard->release(s.admit("idle-" + std::to_string(i)).ticket);
  EXPECT_FALSE(s.admit("busy").allowed) << "the busy tenant kept its slot through the churn";
}

TEST(MemoryStore, TenantsHoldingSlotsStayFindableThroughHeavyChurn) {
  // Every eviction closes its gap in the open-addressing table by moving entries back; a tenant that
  // moved must still be found, with its slot and its bucket.
  Sim s(R"({"max_tenants": 64, "request_rate": {"rate": 0.001, "burst": 3}, "concurrency": {"limit": 1}})");
  std::vector<std::string> busy;
  for (int i = 0; i < 40; i++) {
    busy.push_back("busy-" + std::to_string(i));
    ASSERT_TRUE(s.admit(busy.back()).allowed);
  }
  for (int i = 0; i < 5000; i++) s.guard->release(s.admit("idle-" + std::to_string(i)).ticket);
  auto st = s.guard->store().stats();
  EXPECT_EQ(st.tenants, 64u);
  EXPECT_EQ(st.evictions, 5000u - 24u);
  for (const auto &t : busy) {
    Decision d = s.admit(t);
    EXPECT_FALSE(d.allowed) << t << " kept its slot";
    EXPECT_EQ(d.limiter, Limiter::concurrency) << t;
    EXPECT_EQ(d.remaining, 2) << t << " kept its bucket: one token spent, the rejection spent none";
  }
}
