// The seed's stories, replayed on the embedded memory store in simulated time: each scene prints what
// the limiter decided, with the headers and body a client would see.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "engine/guard.hpp"
#include "floodwall.h"  // FW_VERSION_STRING
#include "http/formatter.hpp"
#include "policy/policy.hpp"
#include "stores/memory_store.hpp"
#include "util/clock.hpp"

using namespace floodwall;

namespace {

struct Scene {
  ManualClock clock;
  SeededRng rng{7};
  std::unique_ptr<Guard> guard;

  explicit Scene(const char *title, const std::string &policy) {
    std::printf("\n== %s\n   policy: %s\n", title, policy.c_str());
    Policy p = parse_policy(policy);
    auto store = std::make_unique<MemoryStore>(clock, p.max_tenants);
    guard = std::make_unique<Guard>(std::move(p), std::move(store), clock, rng);
  }
  Decision admit(const std::string &tenant, uint64_t cost = 1, const char *route = "", const char *method = "GET",
                 bool critical = false, bool sandbox = false) {
    Request r;
    r.tenant = tenant;
    r.cost = cost;
    r.route = route;
    r.method = method;
    r.critical = critical;
    r.sandbox = sandbox;
    return guard->admit(r);
  }
  void show(const char *label, const Decision &d) {
    std::printf("   %s -> %d\n", label, d.status);
    std::string h = format_headers(d);
    for (size_t at = 0; at < h.size();) {
      size_t end = h.find("\r\n", at);
      std::printf("      %s\n", h.substr(at, end - at).c_str());
      at = end + 2;
    }
    std::string body = format_body(d, guard->policy());
    if (!body.empty()) std::printf("      %s\n", body.c_str());
  }
  double t() const { return static_cast<double>(clock.now_us() - 1'000'000'000) / 1e6; }
};

void token_bucket_timeline() {
  Scene s("Token bucket: capacity 500, refill 100/s", R"({"request_rate": {"rate": 100, "burst": 500}})");
  int ok = 0;
  for (int i = 0; i < 500; i++) ok += s.admit("dispatcher").allowed;
  std::printf("   t=0.0s  500 at once: %d allowed\n", ok);
  s.show("the 501st", s.admit("dispatcher"));
  s.clock.advance_s(0.5);
  ok = 0;
  for (int i = 0; i < 60; i++) ok += s.admit("dispatcher").allowed;
  std::printf("   t=0.5s  60 more: %d allowed (50 tokens refilled)\n", ok);
  for (int sec = 1; sec <= 3; sec++) {
    s.clock.advance_s(1);
    ok = 0;
    for (int i = 0; i < 101; i++) ok += s.admit("dispatcher").allowed;
    std::printf("   t=%.1fs  101 requests: %d allowed, the 101st gets 429\n", s.t(), ok);
  }
}

void morning_burst() {
  Scene s("A dispatcher's morning burst: 300 route requests in 4 s",
          R"({"request_rate": {"rate": 100, "burst": 500}})");
  int ok = 0;
  Decision last{};
  for (int i = 0; i < 300; i++) {
    last = s.admit("dispatcher", 1, "/v1/routes", "POST");
    ok += last.allowed;
    s.clock.advance_us(4'000'000 / 300);
  }
  std::printf("   %d of 300 allowed; bursting is what the capacity is for\n", ok);
  s.show("the 300th", last);
}

void while_true_loop() {
  Scene s("A sandbox script in a while-true loop (1,000 requests/s for 10 s)",
          R"({"request_rate": {"rate": 100, "burst": 500}})");
  int ok = 0, sent = 0;
  Decision rejected{};
  for (int i = 0; i < 10'000; i++) {
    Decision d = s.admit("sandbox-script");
    ok += d.allowed;
    sent++;
    if (!d.allowed) rejected = d;
    s.clock.advance_us(1000);
  }
  std::printf("   %d sent, %d allowed: the burst, then held to 100/s\n", sent, ok);
  s.show("a rejected one", rejected);
}

void weighted_cost() {
  Scene s("Cost by stop count: a 2,000-stop optimisation against a 5-stop one (1 token per 10 stops)",
          R"({"request_rate": {"rate": 100, "burst": 500}})");
  Decision small = s.admit("tenant-a", 1), big = s.admit("tenant-b", 200);
  std::printf("   5 stops costs 1 token: %lld left; 2,000 stops costs 200 tokens: %lld left\n",
              static_cast<long long>(small.remaining), static_cast<long long>(big.remaining));
  s.admit("tenant-b", 200);
  s.show("a third 2,000-stop request", s.admit("tenant-b", 200));
}

void concurrency_cap() {
  Scene s("Concurrency: 20 slow solves in flight, the 21st rejected at once",
          R"({"concurrency": {"limit": 20, "ttl_s": 60, "routes": ["/v1/routes"]}})");
  std::vector<Ticket> held;
  for (int i = 0; i < 20; i++) held.push_back(s.admit("solver", 1, "/v1/routes", "POST").ticket);
  s.show("the 21st solve", s.admit("solver", 1, "/v1/routes", "POST"));
  s.show("a cheap read meanwhile (not counted)", s.admit("solver", 1, "/v1/routes/:id", "GET"));
  s.guard->release(held[0]);
  s.show("after one solve finishes", s.admit("solver", 1, "/v1/routes", "POST"));
}

void fleet_shedder() {
  Scene s("Fleet: analytics may hold 80 of 100 workers; route solving keeps the rest",
          R"({"fleet": {"capacity": 80}})");
  int ok = 0;
  Decision rejected{};
  for (int i = 0; i < 120; i++) {
    Decision d = s.admit("analyst-" + std::to_string(i % 7), 1, "/v1/analytics", "GET");
    ok += d.allowed;
    if (!d.allowed) rejected = d;
  }
  int critical = 0;
  for (int i = 0; i < 20; i++) critical += s.admit("dispatcher", 1, "/v1/routes", "POST", true).allowed;
  std::printf("   analytics flood: %d of 120 allowed; critical route solving: %d of 20 allowed\n", ok, critical);
  s.show("an analytics request over the share", rejected);
}

void utilization_shedder() {
  Scene s("Utilization: a box pinned at 100% (sampled every 8 s, 28 s delay, 120 s ramp)",
          R"({"utilization": {"workers": 16}})");
  struct Traffic {
    const char *name;
    bool sandbox, critical;
    const char *method;
  } kinds[] = {{"sandbox", true, false, "GET"},
               {"GET", false, false, "GET"},
               {"POST", false, false, "POST"},
               {"critical", false, true, "POST"}};
  s.guard->report_utilization(1.0);
  std::printf("   shed of 100 requests of each tier, every 10 s:\n");
  std::printf("   %5s %8s %8s %5s %5s %9s\n", "t", "amount", "sandbox", "GET", "POST", "critical");
  Decision sample{};
  for (int sec = 0; sec <= 160; sec++) {
    if (sec == 150) s.guard->report_utilization(0.75);  // back in the dead zone
    if (sec % 10 == 0) {
      int shed[4] = {};
      for (int k = 0; k < 4; k++)
        for (int i = 0; i < 100; i++) {
          Decision d = s.admit("t", 1, "", kinds[k].method, kinds[k].critical, kinds[k].sandbox);
          if (!d.allowed) {
            shed[k]++;
            sample = d;
          }
          s.guard->release(d.ticket);
        }
      std::printf("   %4ds %8.3f %8d %5d %5d %9d\n", sec, s.guard->shedding_amount(), shed[0], shed[1], shed[2],
                  shed[3]);
    }
    s.clock.advance_s(1);
  }
  std::printf("   nothing for the first ~28 s, then tiers in order; in the dead zone the amount holds still\n");
  s.show("a shed request", sample);
}

}  // namespace

int main() {
  std::printf("floodwall %s: the seed's stories on the embedded memory store, in simulated time\n", FW_VERSION_STRING);
  token_bucket_timeline();
  morning_burst();
  while_true_loop();
  weighted_cost();
  concurrency_cap();
  fleet_shedder();
  utilization_shedder();
  return 0;
}
