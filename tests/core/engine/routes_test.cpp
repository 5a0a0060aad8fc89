// The route a request's rules match (policy/route.hpp): one canonical spelling of every framework's
// pattern syntax, and a middleware mounted app-wide that knows only the path still has every route rule
// apply (request_rate.limits, quotas, concurrency.routes, adaptive.routes), with the metrics' route
// families as few as the policy's globs.
#include <floodwall.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <floodwall.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "harness.hpp"
#include "policy/policy.hpp"
#include "policy/route.hpp"

using floodwall::canonical_route;
using floodwall::Client;
using floodwall::RouteText;
using floodwall::testing::policy_error;

namespace {

TEST(RouteCanonical, EveryFrameworksParameterIsOneSpelling) {
  for (const char *p : {"/orders/:id", "/orders/{id}", "/orders/{id:int}", "/orders/<id>", "/orders/<int:id>",
                        "/orders/<int:id>/", "/orders/:id(.:format)", "/orders/:id(\\d+)", "/orders/:id?",
                        "/orders/:id(^\\d+$)", "/orders/:id+", "/orders/<regex('[0-9]+'):id>"})
    EXPECT_EQ(canonical_route(p), "/orders/:id") << p;
  EXPECT_EQ(canonical_route("/orders{/:id}"), "/orders") << "an Express 5 optional part";
  EXPECT_EQ(canonical_route("/files/*rest(.:format)"), "/files/*rest");
  EXPECT_EQ(canonical_route("/files/*"), "/files/*");
  EXPECT_EQ(canonical_route("/"), "/");
  EXPECT_EQ(canonical_route("//"), "/");
  EXPECT_EQ(canonical_route(""), "");
  EXPECT_EQ(canonical_route("checkout"), "checkout") << "a family's name is not a path";
  EXPECT_EQ(canonical_route("checkout/"), "checkout/");
}

TEST(RouteCanonical, UnbalancedOrOddSyntaxIsKeptAsText) {
  EXPECT_EQ(canonical_route("/a/{b"), "/a/{b");
  EXPECT_EQ(canonical_route("/a/(b"), "/a/(b");
  EXPECT_EQ(canonical_route("/a/<b"), "/a/<b");
  EXPECT_EQ(canonical_route("/a/<1x>"), "/a/<1x>") << "not a parameter's name";
  EXPECT_EQ(canonical_route("/a/:"), "/a/:");
  EXPECT_EQ(canonical_route("/a/:id(\\d+"), "/a/:id") << "an unterminated regex ends the pattern";
  EXPECT_EQ(canonical_route("/v1/things:batchGet"), "/v1/things:batchGet");
}

TEST(RouteCanonical, APathIsItsOwnTextAndAGlobKeepsItsWildcards) {
  EXPECT_EQ(canonical_route("/wiki/Foo_(bar)/{x}/<y>/", RouteText::path), "/wiki/Foo_(bar)/{x}/<y>");
  EXPECT_EQ(canonical_route("/orders/42/", RouteText::path), "/orders/42");
  EXPECT_EQ(canonical_route("/orders/{id}/*", RouteText::glob), "/orders/:id/*");
  EXPECT_EQ(canonical_route("/v?/:id*", RouteText::glob), "/v?/:id*") << "'?' and '*' are the glob's own";
  std::string buf;
  std::string_view same = canonical_route("/orders/:id", RouteText::pattern, buf);
  EXPECT_TRUE(buf.empty()) << "a canonical route is not copied";
  EXPECT_EQ(same, "/orders/:id");
}

TEST(RoutePolicy, GlobsInAnySyntaxAreOneAndNamedByTheirField) {
  EXPECT_EQ(policy_error(R"({"concurrency": {"limit": 1, "routes": ["/a/{x}", "/a/:x"]}})"),
            "concurrency.routes[1]: names \"/a/:x\" twice");
  EXPECT_EQ(policy_error(R"({"adaptive": {"routes": ["/a/<int:x>", "/a/{x}"]}})"),
            "adaptive.routes[1]: names \"/a/{x}\" twice (as \"/a/:x\")");
  EXPECT_EQ(
      policy_error(R"({"concurrency": {"limit": 1, "routes": [")" + std::string(257, 'a') + R"("]}})").substr(0, 22),
      "concurrency.routes[0]:");
  floodwall::Policy p = floodwall::parse_policy(R"({"request_rate": {"rate": 1, "burst": 1, "limits": [
      {"name": "orders", "routes": ["/orders/{id}", "/orders"], "rate": 1, "burst": 1}]},
      "concurrency": {"limit": 2, "routes": ["/uploads/*", "/orders"]}})");
  EXPECT_EQ(p.rules.at(0).routes, (std::vector<std::string>{"/orders/:id", "/orders"}));
  EXPECT_EQ(p.route_globs, (std::vector<std::string>{"/orders/:id", "/orders", "/uploads/*"}));
  EXPECT_EQ(p.family_of_path("/uploads/a/b"), "/uploads/*");
  EXPECT_EQ(p.family_of_path("/elsewhere"), "");
}

// A request as a middleware mounted app-wide sends it: no route yet, only its path.
fw_decision admit_path(Client &fw, const char *tenant, const char *path, const char *method = "GET") {
  fw_request r = FW_REQUEST_INIT;
  r.tenant = tenant;
  r.tenant_len = std::char_traits<char>::length(tenant);
  r.path = path;
  r.path_len = std::char_traits<char>::length(path);
  r.method = method;
  fw_decision d = FW_DECISION_INIT;
  EXPECT_EQ(fw_admit(fw.get(), &r, &d), FW_OK) << fw_error_last()->message;
  return d;
}

TEST(RouteRules, APathAloneHasEveryRouteRuleApply) {
  Client fw(R"({"request_rate": {"rate": 100, "burst": 100, "limits": [
      {"name": "orders", "routes": ["/orders", "/orders/*"], "rate": 0.001, "burst": 2}]},
      "quotas": [{"name": "exports", "routes": ["/exports/*"], "limit": 1, "period": "day"}],
      "concurrency": {"limit": 1, "routes": ["/uploads/*"]}})");
  // request_rate.limits: GET /orders/42 and /orders/7/ are under "orders", whatever the id.
  fw_decision a = admit_path(fw, "acct", "/orders/42");
  EXPECT_TRUE(a.allowed);
  EXPECT_EQ(a.rules, 1u);
  fw_release(fw.get(), a.ticket);
  fw_decision b = admit_path(fw, "acct", "/orders/7/");
  EXPECT_TRUE(b.allowed);
  fw_release(fw.get(), b.ticket);
  fw_decision c = admit_path(fw, "acct", "/orders");
  EXPECT_FALSE(c.allowed);
  EXPECT_EQ(c.status, 429);
  EXPECT_EQ(c.rule, 0);
  // quotas
  fw_decision e = admit_path(fw, "acct", "/exports/1");
  EXPECT_TRUE(e.allowed);
  fw_release(fw.get(), e.ticket);
  EXPECT_FALSE(admit_path(fw, "acct", "/exports/2").allowed);
  // concurrency.routes: one upload at a time; other routes are not counted.
  fw_decision up = admit_path(fw, "acct", "/uploads/a");
  ASSERT_TRUE(up.allowed);
  fw_decision second = admit_path(fw, "acct", "/uploads/b");
  EXPECT_FALSE(second.allowed);
  EXPECT_EQ(second.limiter, FW_LIMITER_CONCURRENCY);
  fw_decision other = admit_path(fw, "acct", "/profile");
  EXPECT_TRUE(other.allowed);
  fw_release(fw.get(), other.ticket);
  fw_release(fw.get(), up.ticket);
  fw_decision after = admit_path(fw, "acct", "/uploads/b");
  EXPECT_TRUE(after.allowed);
  fw_release(fw.get(), after.ticket);
}

TEST(RouteRules, APatternInAnySyntaxMatchesThePolicysGlobInAnother) {
  Client fw(R"({"request_rate": {"rate": 100, "burst": 100, "limits": [
      {"name": "orders", "routes": ["/orders/{id}"], "rate": 0.001, "burst": 3}]}})");
  for (const char *route : {"/orders/:id", "/orders/<int:id>", "/orders/:id(.:format)"}) {
    floodwall::Admission a = fw.admit("acct", route);
    EXPECT_TRUE(a.allowed()) << route;
    EXPECT_EQ(a.decision().rules, 1u) << route;
  }
  EXPECT_FALSE(fw.admit("acct", "/orders/{id}").allowed());
}

TEST(RouteRules, AdaptiveRoutesAreGlobs) {
  Client fw(R"({"adaptive": {"initial_limit": 3, "min_limit": 3, "max_limit": 3, "critical_reserve": 0,
                 "routes": ["/slow/*"]}})");
  std::vector<fw_decision> held;
  for (int i = 0; i < 3; i++) held.push_back(admit_path(fw, "acct", "/slow/x"));
  for (const auto &d : held) EXPECT_TRUE(d.allowed);
  fw_decision over = admit_path(fw, "acct", "/slow/y", "POST");
  EXPECT_FALSE(over.allowed) << "the fourth request in flight on /slow/*";
  EXPECT_EQ(over.limiter, FW_LIMITER_ADAPTIVE);
  fw_decision fast = admit_path(fw, "acct", "/fast");
  EXPECT_TRUE(fast.allowed) << "a route the adaptive limit does not cover";
  fw_release(fw.get(), fast.ticket);
  for (const auto &d : held) fw_release(fw.get(), d.ticket);
}

TEST(RouteMetrics, PathsAreCountedUnderTheGlobTheyMatch) {
  Client fw(R"({"request_rate": {"rate": 1000, "burst": 1000, "limits": [
      {"name": "orders", "routes": ["/orders/*"], "rate": 1000, "burst": 1000}]}})");
  for (int i = 0; i < 200; i++) {
    std::string path = "/orders/" + std::to_string(i);
    fw_release(fw.get(), admit_path(fw, "acct", path.c_str()).ticket);
    path = "/unmatched/" + std::to_string(i);
    fw_release(fw.get(), admit_path(fw, "acct", path.c_str()).ticket);
  }
  fw.admit("acct", "/orders/{id}");  // a pattern is its own family
  auto routes = nlohmann::json::parse(fw.metrics_json()).at("routes");
  std::vector<std::string> names;
  for (auto it = routes.begin(); it != routes.end(); ++it) names.push_back(it.key());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"/orders/*", "/orders/:id", "default"})) << routes.dump();
  EXPECT_EQ(routes.at("/orders/*").at("request_rate").at("allowed"), 200);
  EXPECT_EQ(routes.at("default").at("request_rate").at("allowed"), 200);
}

TEST(RouteAbi, FwRequestRouteSaysWhatTheRulesMatch) {
  Client fw("{}");
  fw_request r = FW_REQUEST_INIT;
  r.tenant = "acct";
  r.tenant_len = 4;
  fw_buf b = FW_BUF_INIT;
  auto route_of = [&]() {
    EXPECT_EQ(fw_request_route(fw.get(), &r, &b), FW_OK) << fw_error_last()->message;
    std::string s(b.ptr ? b.ptr : "", b.size);
    fw_buf_dispose(&b);
    return s;
  };
  EXPECT_EQ(route_of(), "");
  r.path = "/orders/42/";
  r.path_len = 11;
  EXPECT_EQ(route_of(), "/orders/42");
  r.route = "/orders/<int:id>";
  EXPECT_EQ(route_of(), "/orders/:id");
  r.path = nullptr;
  EXPECT_EQ(fw_request_route(fw.get(), &r, &b), FW_EINVAL);
  EXPECT_NE(std::string(fw_error_last()->message).find("path"), std::string::npos) << fw_error_last()->message;
  EXPECT_EQ(fw_request_route(fw.get(), nullptr, &b), FW_EINVAL);
  r.path_len = 0;
  r.version = 3;  // an older binding's request has no path
  r.route = nullptr;
  EXPECT_EQ(route_of(), "");
}

}  // namespace
