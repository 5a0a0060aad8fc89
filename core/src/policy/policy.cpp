#include "policy/policy.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <utility>

#include "policy/policy_section.hpp"
#include "policy/route.hpp"
#include "util/token_bucket.hpp"

namespace floodwall {

using namespace policy_parse;  // Section, show, bucket, and the rules' parsers (policy_section.hpp)

const char *fallback_name(Fallback f) {
  switch (f) {
    case Fallback::local: return "local";
    case Fallback::open: return "open";
    case Fallback::closed: return "closed";
  }
  return "local";
}

const char *quota_period_name(QuotaPeriod p) {
  switch (p) {
    case QuotaPeriod::hour: return "hour";
    case QuotaPeriod::day: return "day";
    case QuotaPeriod::month: return "month";
  }
  return "day";
}

// Iterative, with one point to come back to: the last '*' and where its run ended (linear in practice,
// quadratic at worst in the pattern's length, which the policy bounds).
bool glob_match(std::string_view pattern, std::string_view text) {
  size_t p = 0, t = 0, star = std::string_view::npos, mark = 0;
  while (t < text.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || (pattern[p] != '*' && pattern[p] == text[t]))) {
      p++;
      t++;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') p++;
  return p == pattern.size();
}

bool Rule::applies(std::string_view route, std::string_view method) const {
  if (!methods.empty() && std::find(methods.begin(), methods.end(), method) == methods.end()) return false;
  if (routes.empty()) return true;
  for (const auto &g : routes)
    if (glob_match(g, route)) return true;
  return false;
}

bool ConcurrencyPolicy::counts(std::string_view route) const {
  if (routes.empty()) return true;
  for (const auto &g : routes)
    if (glob_match(g, route)) return true;
  return false;
}

int AdaptivePolicy::family(std::string_view route) const {
  if (routes.empty()) return 0;
  for (size_t i = 0; i < routes.size(); i++)
    if (glob_match(routes[i], route)) return static_cast<int>(i);
  return -1;
}

std::string_view Policy::family_of_path(std::string_view path) const {
  for (const auto &g : route_globs)
    if (glob_match(g, path)) return g;
  return {};
}

const BucketLimits *Policy::override_for(const TenantKey &key) const {
  auto it = request_rate->overrides.find(key.view());
  return it != request_rate->overrides.end() ? &it->second : &request_rate->limits;
}

int Policy::tier_index(std::string_view name) const {
  for (size_t i = 0; i < tiers.size(); i++)
    if (tiers[i].name == name) return static_cast<int>(i);
  return -1;
}

bool Policy::applies_to_tier(const Rule &r, int tier) const {
  bool own = tier >= 0 &&
             (r.quota ? tiers[static_cast<size_t>(tier)].own_quotas : tiers[static_cast<size_t>(tier)].own_limits);
  return r.tier == (own ? tier : -1);
}

bool Policy::configured(Limiter l) const {
  switch (l) {
    case Limiter::request_rate: return request_rate.has_value() || !rules.empty();
    case Limiter::concurrency: return concurrency.has_value();
    case Limiter::fleet: return fleet.has_value();
    case Limiter::utilization: return utilization.has_value();
    case Limiter::adaptive: return adaptive.has_value();
    case Limiter::none: break;
  }
  return false;
}

const char *adaptive_algorithm_name(AdaptivePolicy::Algorithm a) {
  return a == AdaptivePolicy::Algorithm::vegas ? "vegas" : "gradient2";
}

Mode Policy::configured_mode(Limiter l) const {
  switch (l) {
    case Limiter::request_rate: return request_rate ? request_rate->mode : rules.empty() ? Mode::off : Mode::enforce;
    case Limiter::concurrency: return concurrency ? concurrency->mode : Mode::off;
    case Limiter::fleet: return fleet ? fleet->mode : Mode::off;
    case Limiter::utilization: return utilization ? utilization->mode : Mode::off;
    case Limiter::adaptive: return adaptive ? adaptive->mode : Mode::off;
    case Limiter::none: break;
  }
  return Mode::off;
}

namespace {

// JSON has no NaN or Infinity, but JSON writers of Python and Ruby emit them. Turn those bare tokens
// into strings so that validation can name the field that holds one, instead of a parse error.
std::string quote_non_finite(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  bool in_string = false;
  for (size_t i = 0; i < in.size(); i++) {
    char c = in[i];
    if (in_string) {
      out.push_back(c);
      if (c == '\\' && i + 1 < in.size())
        out.push_back(in[++i]);
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
      out.push_back(c);
      continue;
    }
    bool replaced = false;
    for (std::string_view tok : {"-Infinity", "Infinity", "NaN"}) {
      if (in.substr(i, tok.size()) == tok) {
        out += '"';
        out += tok;
        out += '"';
        i += tok.size() - 1;
        replaced = true;
        break;
      }
    }
    if (!replaced) out.push_back(c);
  }
  return out;
}

// A file the client reads when it connects: named in the error with its path when it cannot be read.
std::string readable_file(const Section &s, const char *k) {
  std::string path = s.string(k, "");
  if (path.empty()) throw PolicyError(s.field(k), "must name a file");
  std::ifstream f(path);
  if (!f.good()) throw PolicyError(s.field(k), "cannot read \"" + path + "\"");
  return path;
}

// redis.tls, redis.username, redis.password_env, redis.sentinel_password_env and redis.clock. The URL's own user and
// password are the store's (redis/url.hpp); giving them twice is an error rather than a guess at which one wins.
void redis_access(const Section &s, Policy &p) {
  bool tls_url = p.store.rfind("rediss", 0) == 0;
  if (s.has("tls")) {
    if (!tls_url) throw PolicyError("redis.tls", "applies to rediss:// stores only (the store is not one)");
    Section t(s.at("tls"), "redis.tls", {"ca_file", "cert_file", "key_file", "server_name", "insecure"});
    RedisOptions::Tls &tls = p.redis.tls;
    tls.insecure = t.boolean("insecure", false);
    if (tls.insecure && t.has("ca_file"))
      throw PolicyError("redis.tls.insecure",
                        "turns verification off, so redis.tls.ca_file would not be used: remove one of them");
    if (t.has("ca_file")) tls.ca_file = readable_file(t, "ca_file");
    if (t.has("cert_file") != t.has("key_file"))
      throw PolicyError(t.has("cert_file") ? "redis.tls.key_file" : "redis.tls.cert_file",
                        "is required with the other (mutual TLS needs the certificate and its key)");
    if (t.has("cert_file")) {
      tls.cert_file = readable_file(t, "cert_file");
      tls.key_file = readable_file(t, "key_file");
    }
    tls.server_name = t.string("server_name", "");
  }
  auto url_userinfo = [&] {
    auto scheme = p.store.find("://");
    auto at = p.store.rfind('@');
    return scheme != std::string::npos && at != std::string::npos && at > scheme;
  };
  if (s.has("username")) {
    p.redis.username = s.string("username", "");
    if (p.redis.username.empty()) throw PolicyError("redis.username", "must not be empty");
    if (url_userinfo()) throw PolicyError("redis.username", "is given in the store URL too: keep one of them");
  }
  if (s.has("password_env")) {
    std::string var = s.string("password_env", "");
    if (var.empty()) throw PolicyError("redis.password_env", "must name an environment variable");
    if (url_userinfo()) throw PolicyError("redis.password_env", "the store URL has a password too: keep one of them");
    const char *v = std::getenv(var.c_str());
    if (!v || !*v) throw PolicyError("redis.password_env", "the environment variable " + var + " is not set");
    p.redis.password = v;
  }
  if (s.has("sentinel_password_env")) {
    if (p.store.find("+sentinel://") == std::string::npos)
      throw PolicyError("redis.sentinel_password_env",
                        "applies to redis+sentinel:// and rediss+sentinel:// stores only (the store is not one)");
    std::string var = s.string("sentinel_password_env", "");
    if (var.empty()) throw PolicyError("redis.sentinel_password_env", "must name an environment variable");
    const char *v = std::getenv(var.c_str());
    if (!v || !*v) throw PolicyError("redis.sentinel_password_env", "the environment variable " + var + " is not set");
    p.redis.sentinel_password = v;
  }
  using Clock = RedisOptions::Clock;
  p.redis.clock = s.choice("clock", p.redis.clock, {{"redis", Clock::redis}, {"client", Clock::client}});
}

bool valid_prefix(const std::string &p) {
  if (p.empty() || p.size() > 64) return false;
  for (unsigned char c : p)
    if (!(std::isalnum(c) || c == '_' || c == '-' || c == '.' || c == ':')) return false;
  return true;
}

// The "tenant" section: where a request that names no tenant takes its key from (request_tenant.hpp).
TenantPolicy tenant_policy(const json &v) {
  Section s(v, "tenant", {"from", "trusted_proxies", "forwarded_header", "ipv6_prefix", "credentials"});
  TenantPolicy t;
  if (s.has("from")) {
    const json &from = s.at("from");
    if (!from.is_array() || from.empty())
      throw PolicyError("tenant.from", "must be a non-empty array of \"authorization\", \"x-api-key\" or \"ip\" (got " +
                                           show(from) + ")");
    t.from.clear();
    for (size_t i = 0; i < from.size(); i++) {
      std::string path = "tenant.from[" + std::to_string(i) + "]";
      std::string name = from[i].is_string() ? from[i].get<std::string>() : "";
      TenantPolicy::From src;
      if (name == "authorization")
        src = TenantPolicy::From::authorization;
      else if (name == "x-api-key")
        src = TenantPolicy::From::api_key;
      else if (name == "ip")
        src = TenantPolicy::From::ip;
      else
        throw PolicyError(path, "must be \"authorization\", \"x-api-key\" or \"ip\" (got " + show(from[i]) + ")");
      // A repeated source would be tried twice for nothing: most likely a typo for another one.
      if (std::find(t.from.begin(), t.from.end(), src) != t.from.end())
        throw PolicyError(path, "\"" + name + "\" is listed twice");
      t.from.push_back(src);
    }
  }
  if (s.has("trusted_proxies")) {
    const json &tp = s.at("trusted_proxies");
    if (!tp.is_array())
      throw PolicyError("tenant.trusted_proxies", "must be an array of IP addresses or CIDRs (got " + show(tp) + ")");
    if (tp.size() > 1024) throw PolicyError("tenant.trusted_proxies", "must have at most 1024 entries");
    for (size_t i = 0; i < tp.size(); i++) {
      std::optional<Cidr> c;
      if (tp[i].is_string()) c = parse_cidr(tp[i].get<std::string>());
      if (!c)
        throw PolicyError("tenant.trusted_proxies[" + std::to_string(i) + "]",
                          "must be an IP address or CIDR (got " + show(tp[i]) + ")");
      t.trusted_proxies.push_back(*c);
    }
    normalize_networks(t.trusted_proxies);
  }
  using Forwarded = TenantPolicy::ForwardedHeader;
  t.forwarded_header = s.choice("forwarded_header", t.forwarded_header,
                                {{"x-forwarded-for", Forwarded::x_forwarded_for}, {"forwarded", Forwarded::forwarded}});
  t.ipv6_prefix = static_cast<int>(s.integer("ipv6_prefix", t.ipv6_prefix, 1, 128));
  using Credentials = TenantPolicy::Credentials;
  t.credentials = s.choice("credentials", t.credentials,
                           {{"verified", Credentials::verified}, {"unverified", Credentials::unverified}});
  return t;
}

}  // namespace

BucketLimits bucket_limits(double rate, double burst) {
  json j = {{"rate", rate}, {"burst", burst}};
  if (!std::isfinite(rate)) j["rate"] = "NaN";
  if (!std::isfinite(burst)) j["burst"] = "NaN";
  return bucket(Section(j, "", {"rate", "burst"}));
}

namespace {

// "adaptive": {"enabled": true} is the whole of what most services need; every other field has a default that
// works (README, "The adaptive concurrency limit"). {"enabled": false} parses and checks the rest, and configures
// nothing.
void parse_adaptive(const json &j, Policy &p) {
  Section s(j, "adaptive",
            {"enabled", "algorithm", "initial_limit", "min_limit", "max_limit", "smoothing", "window_ms", "tolerance",
             "critical_reserve", "ttl_s", "probe_interval_s", "routes", "mode"});
  AdaptivePolicy a;
  bool enabled = s.boolean("enabled", true);
  using Algorithm = AdaptivePolicy::Algorithm;
  a.algorithm = s.choice("algorithm", a.algorithm, {{"gradient2", Algorithm::gradient2}, {"vegas", Algorithm::vegas}});
  a.min_limit = s.integer("min_limit", a.min_limit, 1, 1'000'000);
  a.max_limit = s.integer("max_limit", a.max_limit, 1, 1'000'000);
  if (a.min_limit > a.max_limit)
    throw PolicyError("adaptive.min_limit", "must be at most adaptive.max_limit, " + std::to_string(a.max_limit) +
                                                " (got " + std::to_string(a.min_limit) + ")");
  a.initial_limit = s.integer("initial_limit", std::clamp(a.initial_limit, a.min_limit, a.max_limit), 1, 1'000'000);
  if (a.initial_limit < a.min_limit || a.initial_limit > a.max_limit)
    throw PolicyError("adaptive.initial_limit", "must be between adaptive.min_limit and adaptive.max_limit (" +
                                                    std::to_string(a.min_limit) + " to " + std::to_string(a.max_limit) +
                                                    ", got " + std::to_string(a.initial_limit) + ")");
  a.smoothing = s.number("smoothing", a.smoothing, 0, true, 1);
  a.window_ms = s.integer("window_ms", a.window_ms, 1, 60'000);
  a.tolerance = s.number("tolerance", a.tolerance, 1, false, 100);
  a.critical_reserve = s.number("critical_reserve", a.critical_reserve, 0, false, 0.9);
  a.ttl_s = s.number("ttl_s", a.ttl_s, 0, true, 86400);
  a.probe_interval_s = s.number("probe_interval_s", a.probe_interval_s, 0, true, 86400);
  a.mode = s.mode();
  if (s.has("routes")) a.routes = route_families(s.at("routes"), "adaptive.routes");
  if (enabled) p.adaptive = std::move(a);
}

// The top level's own fields: the store, the prefix and the answers' shape.
void parse_top(const Section &top, Policy &p) {
  p.store = top.string("store", p.store);
  p.store_given = top.has("store");
  p.prefix = top.string("prefix", p.prefix);
  if (!valid_prefix(p.prefix)) throw PolicyError("prefix", "must be 1-64 characters of [A-Za-z0-9_.:-]");
  p.docs_url = top.string("docs_url", "");
  if (p.docs_url.size() > 512) throw PolicyError("docs_url", "must be at most 512 characters");
  p.body_format = top.choice("body_format", p.body_format,
                             {{"json", BodyFormat::json}, {"problem+json", BodyFormat::problem_json}});
  p.headers =
      top.choice("headers", p.headers, {{"all", HeaderSet::all}, {"ietf", HeaderSet::ietf}, {"none", HeaderSet::none}});
  top.string("description", "");
  p.max_tenants = top.integer("max_tenants", p.max_tenants, 1, 100'000'000);
}

// "request_rate": the tenant's bucket, its lease, the overrides by tenant, and the limits by route.
void parse_request_rate(const json &j, Policy &p, std::set<std::string> &rule_names) {
  Section s(j, "request_rate", {"rate", "burst", "overrides", "mode", "lease", "limits"});
  RequestRatePolicy rr;
  rr.limits = bucket(s);
  rr.mode = s.mode();
  if (s.has("lease")) {
    // A lease larger than the bucket could never be granted whole; an override with a smaller bucket
    // leases at most its own burst (hot_tenants.hpp).
    Section ls(s.at("lease"), "request_rate.lease", {"max_tokens", "ttl_ms"});
    TokenLeasePolicy l;
    l.max_tokens = ls.integer("max_tokens", std::nullopt, 1, 1'000'000'000);
    if (l.max_tokens > rr.limits.burst)
      throw PolicyError("request_rate.lease.max_tokens", "must be at most the burst, " +
                                                             std::to_string(rr.limits.burst) + " (got " +
                                                             std::to_string(l.max_tokens) + ")");
    l.ttl_ms = ls.integer("ttl_ms", std::nullopt, 1, 60'000);
    rr.lease = l;
  }
  if (s.has("overrides")) {
    const json &o = s.at("overrides");
    if (!o.is_object()) throw PolicyError("request_rate.overrides", "must be an object of tenant ids");
    for (const auto &[tenant, limits] : o.items()) {
      std::string path = "request_rate.overrides." + tenant;
      if (tenant.empty()) throw PolicyError("request_rate.overrides", "a tenant id must not be empty");
      Section os(limits, path, {"rate", "burst"});
      rr.overrides.emplace(std::string(TenantKey(tenant).view()), bucket(os));
    }
  }
  p.request_rate = std::move(rr);
  if (s.has("limits")) parse_limits(s.at("limits"), p, rule_names, "request_rate.limits", -1);
}

// "concurrency": the tenant's requests in flight (on the routes it names), and its lease of slots.
void parse_concurrency(const json &j, Policy &p) {
  Section s(j, "concurrency", {"limit", "ttl_s", "routes", "mode", "lease"});
  ConcurrencyPolicy c;
  c.limit = s.integer("limit", std::nullopt, 1, 1'000'000);
  c.ttl_s = s.number("ttl_s", 60.0, 0, true, 86400);
  c.mode = s.mode();
  if (s.has("lease")) {
    Section ls(s.at("lease"), "concurrency.lease", {"max_slots", "ttl_ms"});
    SlotLeasePolicy l;
    l.max_slots = ls.integer("max_slots", std::nullopt, 1, kMaxLeasedSlots);
    if (l.max_slots > c.limit)
      throw PolicyError("concurrency.lease.max_slots", "must be at most the limit, " + std::to_string(c.limit) +
                                                           " (got " + std::to_string(l.max_slots) + ")");
    l.ttl_ms = ls.integer("ttl_ms", std::nullopt, 1, 60'000);
    // A leased slot counts from its lease's start in Redis' set, and the set forgets slots older than
    // ttl_s: a lease ends well before its slots could be swept while a request still holds them.
    if (static_cast<double>(l.ttl_ms) * 2 > c.ttl_s * 1000)
      throw PolicyError("concurrency.lease.ttl_ms", "must be at most half of concurrency.ttl_s (got " +
                                                        std::to_string(l.ttl_ms) + " ms against ttl_s " +
                                                        format_seconds(c.ttl_s) + ")");
    c.lease = l;
  }
  if (s.has("routes")) c.routes = route_families(s.at("routes"), "concurrency.routes");
  p.concurrency = std::move(c);
}

void parse_fleet(const json &j, Policy &p) {
  Section s(j, "fleet", {"capacity", "ttl_s", "mode"});
  FleetPolicy f;
  f.capacity = s.integer("capacity", std::nullopt, 1, 100'000'000);
  f.ttl_s = s.number("ttl_s", 60.0, 0, true, 86400);
  f.mode = s.mode();
  p.fleet = f;
}

void parse_utilization(const json &j, Policy &p) {
  Section s(j, "utilization", {"workers", "good", "bad", "delay_s", "ramp_s", "sample_s", "mode"});
  UtilizationPolicy u;
  u.workers = s.integer("workers", 1, 1, 1'000'000);
  u.good = s.number("good", 0.7, 0, true, 1);
  u.bad = s.number("bad", 0.8, 0, true, 1);
  if (u.bad < u.good) throw PolicyError("utilization.bad", "must be >= utilization.good");
  if (u.bad >= 1) throw PolicyError("utilization.bad", "must be < 1");
  u.delay_s = s.number("delay_s", 28.0, 0, false, 86400);
  u.ramp_s = s.number("ramp_s", 120.0, 0, true, 86400);
  u.sample_s = s.number("sample_s", 8.0, 0, true, 3600);
  u.mode = s.mode();
  p.utilization = u;
}

// "redis": the store's deadline, connections, fallback, breaker, access (TLS, user, passwords) and clock.
void parse_redis(const json &j, Policy &p) {
  if (j.is_object() && j.contains("breaker_failures"))
    throw PolicyError("redis.breaker_failures",
                      "no longer exists: the breaker opens on a failure rate (redis.breaker_min_calls, "
                      "redis.breaker_failure_ratio, redis.breaker_window_ms), not on consecutive failures");
  Section s(j, "redis",
            {"deadline_ms", "connect_timeout_ms", "connections", "fallback", "breaker_min_calls",
             "breaker_failure_ratio", "breaker_window_ms", "breaker_open_ms", "flags_poll_ms", "tls", "username",
             "password_env", "sentinel_password_env", "clock", "batch_window_us", "direct_connections"});
  redis_access(s, p);
  p.redis.deadline_ms = s.integer("deadline_ms", p.redis.deadline_ms, 1, 60'000);
  p.redis.connect_timeout_ms = s.integer("connect_timeout_ms", p.redis.connect_timeout_ms, 1, 60'000);
  p.redis.connections = s.integer("connections", p.redis.connections, 1, 16);
  p.redis.fallback = s.choice("fallback", p.redis.fallback,
                              {{"local", Fallback::local}, {"open", Fallback::open}, {"closed", Fallback::closed}});
  p.redis.breaker_min_calls = s.integer("breaker_min_calls", p.redis.breaker_min_calls, 1, 1'000'000);
  p.redis.breaker_failure_ratio = s.number("breaker_failure_ratio", p.redis.breaker_failure_ratio, 0, true, 1);
  p.redis.breaker_window_ms = s.integer("breaker_window_ms", p.redis.breaker_window_ms, 10, 3'600'000);
  p.redis.breaker_open_ms = s.integer("breaker_open_ms", p.redis.breaker_open_ms, 1, 3'600'000);
  p.redis.flags_poll_ms = s.integer("flags_poll_ms", p.redis.flags_poll_ms, 10, 3'600'000);
  p.redis.batch_window_us = s.integer("batch_window_us", p.redis.batch_window_us, 0, 1'000'000);
  p.redis.direct_connections = s.integer("direct_connections", p.redis.direct_connections, 0, 8);
}

const std::set<std::string> kTopKeys = {
    "store",       "prefix", "docs_url",    "body_format", "max_tenants", "request_rate", "concurrency", "fleet",
    "utilization", "redis",  "description", "tenant",      "quotas",      "tiers",        "adaptive",    "headers"};

json parse_document(std::string_view text) {
  try {
    return json::parse(quote_non_finite(text));
  } catch (const json::exception &e) {  // parse_error, and out_of_range for a number beyond a double (1e400)
    throw PolicyError("policy", std::string("is not valid JSON (") + e.what() + ")");
  }
}

// The document's parts, each parsed on its own: without a sink the first error is thrown (parse_policy);
// with one, each part's first error is kept and the next part parsed (policy_errors, `floodwall check`).
Policy parse_parts(std::string_view text, std::vector<PolicyError> *errors) {
  json doc = parse_document(text);
  auto part = [errors](auto &&parse) {
    try {
      parse();
    } catch (const PolicyError &e) {
      if (!errors) throw;
      errors->push_back(e);
    }
  };
  if (errors && doc.is_object()) {  // every unknown key said, then the rest parsed without them
    for (auto it = doc.begin(); it != doc.end();) {
      if (kTopKeys.count(it.key())) {
        ++it;
        continue;
      }
      errors->emplace_back(it.key().empty() ? "\"\"" : it.key(), "unknown key");
      it = doc.erase(it);
    }
  }
  Section top(doc, "", kTopKeys);
  Policy p;
  std::set<std::string> rule_names;
  part([&] { parse_top(top, p); });
  if (top.has("request_rate")) part([&] { parse_request_rate(top.at("request_rate"), p, rule_names); });
  if (top.has("concurrency")) part([&] { parse_concurrency(top.at("concurrency"), p); });
  if (top.has("fleet")) part([&] { parse_fleet(top.at("fleet"), p); });
  if (top.has("utilization")) part([&] { parse_utilization(top.at("utilization"), p); });
  if (top.has("adaptive")) part([&] { parse_adaptive(top.at("adaptive"), p); });
  if (top.has("redis")) part([&] { parse_redis(top.at("redis"), p); });
  if (top.has("tenant")) part([&] { p.tenant = tenant_policy(top.at("tenant")); });
  if (top.has("quotas")) part([&] { parse_quotas(top.at("quotas"), p, rule_names, "quotas", -1); });
  if (top.has("tiers")) part([&] { parse_tiers(top.at("tiers"), p); });
  collect_route_globs(p);
  return p;
}

}  // namespace

Policy parse_policy(std::string_view text) {
  return parse_parts(text, nullptr);
}

std::vector<PolicyError> policy_errors(std::string_view text) {
  std::vector<PolicyError> errors;
  try {
    parse_parts(text, &errors);
  } catch (const PolicyError &e) {  // not JSON, or not an object: nothing else to say
    errors.push_back(e);
  }
  return errors;
}

}  // namespace floodwall
