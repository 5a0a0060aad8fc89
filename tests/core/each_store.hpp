// A test run on each store a fleet may use: memory://, shm:// (a segment of the test's own, removed after
// it) and a throwaway redis-server. policy() puts the store before the test's sections.
#pragma once

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "redis_server.hpp"
#include "stores/shm_store.hpp"

namespace floodwall::testing {

enum class StoreKind { memory, shm, redis };

class EachStore : public ::testing::TestWithParam<StoreKind> {
 protected:
  void SetUp() override {
    if (GetParam() == StoreKind::redis) redis_ = std::make_unique<RedisServer>();
    if (GetParam() == StoreKind::shm) {
      shm_name_ = "fwtest-each-" + std::to_string(getpid()) + "-" + std::to_string(counter_++);
      shm_unlink(ShmStore::segment_name(shm_name_).c_str());
    }
  }
  void TearDown() override {
    if (!shm_name_.empty()) shm_unlink(ShmStore::segment_name(shm_name_).c_str());
  }
  std::string store() const {
    switch (GetParam()) {
      case StoreKind::memory: return "memory://";
      case StoreKind::shm: return "shm://" + shm_name_;
      case StoreKind::redis: return redis_->url();
    }
    return "";
  }
  // Sections after the store, with a deadline no loaded test machine misses.
  std::string policy(const std::string &sections) const {
    return R"({"store": ")" + store() + R"(", "redis": {"deadline_ms": 2000}, )" + sections + "}";
  }
  // Whether two clients of the test share the store (memory:// is each client's own).
  bool shared() const { return GetParam() != StoreKind::memory; }
  std::unique_ptr<RedisServer> redis_;
  std::string shm_name_;
  static inline int counter_ = 0;
};

inline std::string store_kind_name(const ::testing::TestParamInfo<StoreKind> &i) {
  return i.param == StoreKind::memory ? "memory" : i.param == StoreKind::shm ? "shm" : "redis";
}

}  // namespace floodwall::testing
