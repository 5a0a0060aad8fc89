// The policy's rules: request_rate.limits, quotas and tiers (each tier's own limits and quotas), the route
// globs they and concurrency.routes and adaptive.routes name, and the glob list the metrics count paths by.
#include <algorithm>
#include <cctype>

#include "policy/policy_section.hpp"
#include "policy/route.hpp"

namespace floodwall::policy_parse {

namespace {

// A rule's name is written into Redis keys, RateLimit-Policy and bodies as it is: a short token.
std::string rule_name(const Section &s, std::set<std::string> &seen) {
  std::string name = s.string("name", "");
  if (!s.has("name")) throw PolicyError(s.field("name"), "is required");
  if (name.empty() || name.size() > 32 || !std::all_of(name.begin(), name.end(), [](unsigned char c) {
        return std::isalnum(c) || c == '_' || c == '-' || c == '.';
      }))
    throw PolicyError(s.field("name"), "must be 1-32 characters of [A-Za-z0-9_.-] (got " + show(s.at("name")) + ")");
  if (name == "request_rate" || name == "concurrency")
    throw PolicyError(s.field("name"),
                      "\"" + name + "\" names a limiter's own policy in RateLimit-Policy: choose another");
  if (!seen.insert(name).second)
    throw PolicyError(s.field("name"), "\"" + name + "\" names another limit or quota too: names must be unique");
  return name;
}

std::vector<std::string> rule_routes(const Section &s, bool required) {
  std::vector<std::string> out;
  if (!s.has("routes")) {
    if (required)
      throw PolicyError(s.field("routes"),
                        "is required (a limit applies to the routes it names; the tenant's own bucket is "
                        "request_rate.rate and burst)");
    return out;
  }
  const json &r = s.at("routes");
  if (!r.is_array() || r.empty() || r.size() > 64)
    throw PolicyError(s.field("routes"), "must be an array of 1 to 64 route globs (got " + show(r) + ")");
  for (size_t i = 0; i < r.size(); i++) {
    std::string path = s.field("routes") + "[" + std::to_string(i) + "]";
    if (!r[i].is_string() || r[i].get<std::string>().empty() || r[i].get<std::string>().size() > 256)
      throw PolicyError(path, "must be a non-empty string of at most 256 bytes (got " + show(r[i]) + ")");
    out.push_back(canonical_route(r[i].get<std::string>(), RouteText::glob));
  }
  return out;
}

std::vector<std::string> rule_methods(const Section &s) {
  std::vector<std::string> out;
  if (!s.has("methods")) return out;
  const json &m = s.at("methods");
  if (!m.is_array() || m.empty() || m.size() > 16)
    throw PolicyError(s.field("methods"), "must be an array of 1 to 16 HTTP methods (got " + show(m) + ")");
  for (size_t i = 0; i < m.size(); i++) {
    std::string path = s.field("methods") + "[" + std::to_string(i) + "]";
    std::string v = m[i].is_string() ? m[i].get<std::string>() : "";
    if (v.empty() || v.size() > 16 || !std::all_of(v.begin(), v.end(), [](unsigned char c) { return std::isalpha(c); }))
      throw PolicyError(path, "must be an HTTP method such as \"GET\" (got " + show(m[i]) + ")");
    std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
    out.push_back(v);
  }
  return out;
}

// "UTC", or a fixed offset from it ("UTC+09:00", "UTC-05:30"): a zone with daylight saving time moves
// its boundaries, which the store's scripts cannot know.
int32_t utc_offset(const Section &s) {
  std::string tz = s.string("timezone", "UTC");
  if (tz == "UTC") return 0;
  auto digit = [&](size_t i) { return i < tz.size() && tz[i] >= '0' && tz[i] <= '9'; };
  if (tz.size() == 9 && tz.compare(0, 3, "UTC") == 0 && (tz[3] == '+' || tz[3] == '-') && digit(4) && digit(5) &&
      tz[6] == ':' && digit(7) && digit(8)) {
    int h = (tz[4] - '0') * 10 + (tz[5] - '0'), m = (tz[7] - '0') * 10 + (tz[8] - '0');
    if (h <= 14 && m < 60 && h * 60 + m <= 14 * 60) return (tz[3] == '-' ? -1 : 1) * (h * 3600 + m * 60);
  }
  throw PolicyError(s.field("timezone"),
                    "must be \"UTC\" or a fixed offset such as \"UTC+09:00\" (got " + show(s.at("timezone")) +
                        "; zones with daylight saving time are not supported, since their boundaries move)");
}

uint64_t rule_id(const std::string &name) {
  uint64_t h = 14695981039346656037ull;  // FNV-1a: the same id in every process and build
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  return h ? h : 1;
}

// `tier`: -1 for the policy's own limits and quotas, else the tier's index.
void add_rule(Policy &p, Rule r, const std::string &path, int tier) {
  if (std::count_if(p.rules.begin(), p.rules.end(), [&](const Rule &x) { return x.tier == tier; }) >=
      static_cast<std::ptrdiff_t>(kMaxRules))
    throw PolicyError(path, "too many limits and quotas: at most " + std::to_string(kMaxRules) + " together");
  if (p.rules.size() >= kMaxPolicyRules)
    throw PolicyError(path, "too many limits and quotas: at most " + std::to_string(kMaxPolicyRules) +
                                " in a policy, its tiers' included");
  r.id = rule_id(r.name);
  r.tier = tier;
  r.key_suffix = (r.quota ? "quota:" : "limit:") + r.name;
  p.rules.push_back(std::move(r));
}

}  // namespace

// The route families a section names (concurrency.routes, adaptive.routes): one rule for both, at most 64,
// each a non-empty glob, none twice (as its canonical form: "/orders/{id}" and "/orders/:id" are one).
std::vector<std::string> route_families(const json &r, const std::string &field) {
  if (!r.is_array()) throw PolicyError(field, "must be an array of route globs");
  std::vector<std::string> out;
  for (size_t i = 0; i < r.size(); i++) {
    std::string path = field + "[" + std::to_string(i) + "]";
    if (!r[i].is_string() || r[i].get<std::string>().empty() || r[i].get<std::string>().size() > 256)
      throw PolicyError(path, "must be a non-empty string of at most 256 bytes (got " + show(r[i]) + ")");
    std::string glob = canonical_route(r[i].get<std::string>(), RouteText::glob);
    if (std::find(out.begin(), out.end(), glob) != out.end())
      throw PolicyError(
          path, "names " + show(r[i]) + " twice" + (glob == r[i].get<std::string>() ? "" : " (as \"" + glob + "\")"));
    out.push_back(std::move(glob));
  }
  if (out.size() > 64) throw PolicyError(field, "must name at most 64 route families");
  return out;
}

void collect_route_globs(Policy &p) {
  auto add = [&](const std::vector<std::string> &globs) {
    for (const auto &g : globs)
      if (std::find(p.route_globs.begin(), p.route_globs.end(), g) == p.route_globs.end()) p.route_globs.push_back(g);
  };
  for (const auto &r : p.rules) add(r.routes);
  if (p.concurrency) add(p.concurrency->routes);
  if (p.adaptive) add(p.adaptive->routes);
}

void parse_limits(const json &v, Policy &p, std::set<std::string> &seen, const std::string &where, int tier) {
  if (!v.is_array())
    throw PolicyError(where, "must be an array of {\"name\", \"routes\", \"rate\", \"burst\"} (got " + show(v) + ")");
  for (size_t i = 0; i < v.size(); i++) {
    std::string path = where + "[" + std::to_string(i) + "]";
    Section s(v[i], path, {"name", "routes", "methods", "rate", "burst", "mode"});
    Rule r;
    r.name = rule_name(s, seen);
    r.routes = rule_routes(s, true);
    r.methods = rule_methods(s);
    r.bucket = bucket(s);
    r.mode = s.mode();
    add_rule(p, std::move(r), path, tier);
  }
}

void parse_quotas(const json &v, Policy &p, std::set<std::string> &seen, const std::string &where, int tier) {
  if (!v.is_array())
    throw PolicyError(where, "must be an array of {\"name\", \"limit\", \"period\"} (got " + show(v) + ")");
  for (size_t i = 0; i < v.size(); i++) {
    std::string path = where + "[" + std::to_string(i) + "]";
    Section s(v[i], path, {"name", "limit", "period", "routes", "methods", "timezone", "mode"});
    Rule r;
    r.quota = true;
    r.name = rule_name(s, seen);
    r.quota_limit = s.integer("limit", std::nullopt, 1, 1'000'000'000'000);
    if (!s.has("period")) throw PolicyError(s.field("period"), "is required (\"hour\", \"day\" or \"month\")");
    r.period = s.choice("period", QuotaPeriod::hour,
                        {{"hour", QuotaPeriod::hour}, {"day", QuotaPeriod::day}, {"month", QuotaPeriod::month}});
    r.routes = rule_routes(s, false);
    r.methods = rule_methods(s);
    r.utc_offset_s = utc_offset(s);
    r.mode = s.mode();
    add_rule(p, std::move(r), path, tier);
  }
}

// "tiers": {NAME: {"rate", "burst", "limits"?, "quotas"?}}: a plan. A tenant's tier is kept in the store
// (the admin API sets it); a tier's rate and burst are its tenants' bucket, and its limits and quotas,
// when it names them, replace the policy's own for its tenants.
void parse_tiers(const json &v, Policy &p) {
  if (!v.is_object() || v.empty() || v.size() > 32)
    throw PolicyError("tiers",
                      "must be an object of 1 to 32 tiers, {NAME: {\"rate\", \"burst\"}} (got " + show(v) + ")");
  if (!p.request_rate) throw PolicyError("tiers", "needs a request_rate section (a tier's rate and burst replace its)");
  for (const auto &[name, t] : v.items()) {
    if (!valid_name(name))
      throw PolicyError("tiers",
                        "a tier's name must be 1-32 characters of [A-Za-z0-9_.-] (got " + show(json(name)) + ")");
    std::string path = "tiers." + name;
    Section s(t, path, {"rate", "burst", "limits", "quotas", "description"});
    PlanTier tier;
    tier.name = name;
    tier.bucket = bucket(s);
    s.string("description", "");
    int index = static_cast<int>(p.tiers.size());
    std::set<std::string> seen;
    if (s.has("limits")) {
      tier.own_limits = true;
      parse_limits(s.at("limits"), p, seen, path + ".limits", index);
    }
    if (s.has("quotas")) {
      tier.own_quotas = true;
      parse_quotas(s.at("quotas"), p, seen, path + ".quotas", index);
    }
    p.tiers.push_back(std::move(tier));
  }
  for (size_t t = 0; t < p.tiers.size(); t++) {
    size_t n = 0;
    for (const Rule &r : p.rules) n += p.applies_to_tier(r, static_cast<int>(t));
    if (n > kMaxRules)
      throw PolicyError("tiers." + p.tiers[t].name, "has " + std::to_string(n) +
                                                        " limits and quotas (its own and the policy's): at most " +
                                                        std::to_string(kMaxRules));
  }
}

}  // namespace floodwall::policy_parse
