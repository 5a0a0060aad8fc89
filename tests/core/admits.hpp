// Admits through the C ABI for the tests of a store deployment (Sentinel, TLS Sentinel): a client made or
// a failure naming why, one admit released at once, whether the store decided it, and waiting until it does.
#pragma once

#include <floodwall.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>

namespace floodwall::testing {

// A client for the policy, or null after a failure quoting the library's message.
inline fw_client *client(const std::string &policy) {
  fw_client *c = nullptr;
  if (fw_client_new(&c, policy.c_str()) != FW_OK) {
    ADD_FAILURE() << fw_error_last()->message;
    return nullptr;
  }
  return c;
}

// One admit of `tenant` whose ticket the caller keeps (a critical one: never counted by the fleet shedder);
// an error from fw_admit aborts the test process.
inline fw_decision admit_held(fw_client *c, const std::string &tenant, bool critical = false) {
  fw_request r = FW_REQUEST_INIT;
  r.tenant = tenant.data();
  r.tenant_len = tenant.size();
  r.critical = critical ? 1 : 0;
  fw_decision d = FW_DECISION_INIT;
  if (fw_admit(c, &r, &d) != FW_OK) std::abort();
  return d;
}

// One admit of `tenant`, its ticket released at once.
inline fw_decision admit(fw_client *c, const std::string &tenant) {
  fw_decision d = admit_held(c, tenant);
  fw_release(c, d.ticket);
  return d;
}

// Decided by the store itself: not the fallback's, not failed open, no failure reason.
inline bool by_store(const fw_decision &d) {
  return !d.degraded && !d.failed_open && d.fail_reason == FW_FAIL_NONE;
}

// Admits until one is answered by the store (true), or timeout_s passes (false).
inline bool answered_within(fw_client *c, const std::string &tenant, double timeout_s) {
  auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < until) {
    if (by_store(admit(c, tenant))) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

// Admits `tenant` until a decision says `reason` (true), or timeout_s passes (false): what a client says
// before its first look at the deployment (sentinels still being asked on a loaded machine) is not yet
// what it will say.
inline bool reason_within(fw_client *c, const std::string &tenant, fw_fail_reason reason, double timeout_s) {
  auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < until) {
    if (admit(c, tenant).fail_reason == reason) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

// One thread admitting on a client until told to stop, counting where each decision came from.
// (tenant "through"; the newest store answer and the longest gap between two, in steady-clock ns)
struct Admitter {
  explicit Admitter(fw_client *c) : c_(c) {
    thread_ = std::thread([this] {
      while (!stop_) {
        fw_decision d = admit(c_, "through");
        total++;
        store += by_store(d);
        fallback += d.degraded;
        failed_open += d.failed_open;
        if (by_store(d)) {
          int64_t now = std::chrono::steady_clock::now().time_since_epoch().count();
          int64_t last = last_store_ns.exchange(now);
          if (last && now - last > max_gap_ns) max_gap_ns = now - last;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(500));
      }
    });
  }
  ~Admitter() { join(); }
  void join() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  fw_client *c_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> total{0}, store{0}, fallback{0}, failed_open{0}, last_store_ns{0};
  std::atomic<int64_t> max_gap_ns{0};  // the longest time between two store answers
  std::thread thread_;
};

// The request-rate bucket's key of a tenant under the default prefix.
inline std::string rate_key(const std::string &tenant) {
  return "floodwall:{" + tenant + "}:rate";
}

}  // namespace floodwall::testing
