// The policy: one JSON schema for every language (README.md, "Policy reference").
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "policy/request_tenant.hpp"
#include "policy/tenant_key.hpp"
#include "util/vocabulary.hpp"

namespace floodwall {

// A policy error names the offending field ("request_rate.burst") so that a user can fix it.
class PolicyError : public std::invalid_argument {
 public:
  PolicyError(const std::string &field, const std::string &what)
      : std::invalid_argument(field + ": " + what), field_(field) {}
  const std::string &field() const { return field_; }

 private:
  std::string field_;
};

// Rates are kept in micro-tokens per second and capacities in micro-tokens: integers that Lua's
// doubles represent exactly, so the memory store and the Redis scripts compute the same numbers.
struct BucketLimits {
  double rate = 0;      // tokens per second, as configured
  int64_t burst = 0;    // tokens
  int64_t rate_m = 0;   // micro-tokens per second
  int64_t burst_m = 0;  // micro-tokens
};

// request_rate.lease: a process that sees a tenant hot takes up to max_tokens of its bucket from Redis in
// one call (debited there before they are spent) and spends them in process; what is left goes back when
// the lease ends, ttl_ms after it was taken (hot_tenants.hpp).
struct TokenLeasePolicy {
  int64_t max_tokens = 0;
  int64_t ttl_ms = 0;
};

// concurrency.lease: the same for slots: up to max_slots slot ids added to the tenant's set at once (so
// every other client counts them as used), handed to this process's requests and given back in batches.
inline constexpr int64_t kMaxLeasedSlots = 1024;  // slot ids one lease call may add

struct SlotLeasePolicy {
  int64_t max_slots = 0;
  int64_t ttl_ms = 0;
};

// request_rate.limits and quotas: rules that apply to a request by its route and method, each with its own
// state per tenant beside the tenant's bucket (a token bucket for a limit, a count over a calendar window
// for a quota), all checked with the tenant's limiters in one atomic step of the store: nothing is
// consumed unless every enforcing one passes.
inline constexpr size_t kMaxRules = 16;        // limits and quotas of one tenant (a request checks at most these)
inline constexpr size_t kMaxPolicyRules = 64;  // in a policy, its tiers' included (fw_decision.rules is 64 bits)

enum class QuotaPeriod : uint8_t { hour = 0, day = 1, month = 2 };
const char *quota_period_name(QuotaPeriod p);

struct Rule {
  std::string name;  // 1-32 of [A-Za-z0-9_.-], unique among limits and quotas: in keys, headers and bodies
  bool quota = false;
  std::vector<std::string> routes;   // globs ('*' any run of bytes, '?' one byte); empty: every route (quotas)
  std::vector<std::string> methods;  // upper case; empty: every method
  Mode mode = Mode::enforce;         // a rule of its own may be launched dark (off: never checked)
  BucketLimits bucket;               // a limit
  int64_t quota_limit = 0;           // a quota: units (a request's cost) per period
  QuotaPeriod period = QuotaPeriod::day;
  int32_t utc_offset_s = 0;  // a quota's timezone: "UTC" or a fixed offset ("UTC+09:00")
  uint64_t id = 0;           // a hash of the name: the rule's state in the in-process and shm stores
  int tier = -1;             // -1: the policy's own; else the tier (Policy::tiers) it belongs to
  std::string key_suffix;    // "limit:<name>" or "quota:<name>": its Redis key after <prefix>:{<tenant>}:
  bool applies(std::string_view route, std::string_view method) const;
};

// A plan: the bucket of its tenants, and (when it names them) limits and quotas that replace the policy's.
struct PlanTier {
  std::string name;
  BucketLimits bucket;
  bool own_limits = false, own_quotas = false;
};

// '*' matches any run of bytes ('/' too), '?' any one byte, everything else itself.
bool glob_match(std::string_view pattern, std::string_view text);

struct RequestRatePolicy {
  BucketLimits limits;
  std::map<std::string, BucketLimits, std::less<>> overrides;  // keyed by TenantKey bytes
  Mode mode = Mode::enforce;
  std::optional<TokenLeasePolicy> lease;  // absent: every decision is one exact round trip
};

struct ConcurrencyPolicy {
  int64_t limit = 0;
  double ttl_s = 60;                // a crashed worker's slot heals after this long
  std::vector<std::string> routes;  // globs (canonical, policy/route.hpp); empty: every route is counted
  Mode mode = Mode::enforce;
  std::optional<SlotLeasePolicy> lease;
  bool counts(std::string_view route) const;
};

struct FleetPolicy {
  int64_t capacity = 0;
  double ttl_s = 60;
  Mode mode = Mode::enforce;
};

struct UtilizationPolicy {
  int64_t workers = 1;
  double good = 0.7;
  double bad = 0.8;
  double delay_s = 28;
  double ramp_s = 120;
  double sample_s = 8;
  Mode mode = Mode::enforce;
};

// The adaptive concurrency limit (engine/adaptive_limit.hpp): the in-flight requests this process admits,
// a limit moved by the latency it measures from each admit to its release.
struct AdaptivePolicy {
  enum class Algorithm : uint8_t { gradient2 = 0, vegas = 1 } algorithm = Algorithm::gradient2;
  int64_t initial_limit = 20;
  int64_t min_limit = 3;  // also the concurrency the no-load latency is measured at (probe_interval_s)
  int64_t max_limit = 1000;
  double smoothing = 0.2;        // the share of a window's new estimate taken at once
  int64_t window_ms = 100;       // one latency sample per window (and at least kMinWindowSamples releases)
  double tolerance = 1.5;        // gradient2: the latency over the no-load one tolerated before the limit falls
  double probe_interval_s = 30;  // how often the no-load latency is measured again (at min_limit in flight)
  // The share of the limit kept for critical requests: the others stop before it, in the utilization
  // shedder's order (sandbox first, then GET, then other writes; critical last, up to the whole limit).
  double critical_reserve = 0.3;
  double ttl_s = 60;  // a ticket never released stops counting after this long, as a concurrency slot does
  std::vector<std::string> routes;  // empty: one limit for every request; else one limit per glob (canonical)
  Mode mode = Mode::enforce;
  int family(std::string_view route) const;  // the limit a route is under: the first glob it matches; -1: none
};
const char *adaptive_algorithm_name(AdaptivePolicy::Algorithm a);

// What decides when the store cannot answer in time (a time-out, a broken connection, the breaker, a
// queue beyond what the store answers within the deadline, a store error).
enum class Fallback : uint8_t {
  local = 0,  // an in-process table of the same policy decides (the decision is marked degraded)
  open = 1,   // allowed, unlimited (failed_open)
  closed = 2  // refused: 503, the limiter is unavailable
};
const char *fallback_name(Fallback f);

struct RedisOptions {
  // Every admit's deadline. Under load most of it is queueing (1,024 admits in flight at 65,000 answers/s
  // wait 15 ms), so it is set well above that; a stalled Redis costs no caller more than one deadline,
  // since no reply byte within it opens the breaker at once.
  int64_t deadline_ms = 50;
  int64_t connect_timeout_ms = 200;
  int64_t connections = 2;  // pipelined connections per client
  Fallback fallback = Fallback::local;
  // The breaker opens when at least breaker_min_calls calls completed within breaker_window_ms and at
  // least breaker_failure_ratio of them failed, or at once when Redis went silent or unreachable.
  int64_t breaker_min_calls = 20;
  double breaker_failure_ratio = 0.5;
  int64_t breaker_window_ms = 1000;
  int64_t breaker_open_ms = 1000;  // how long it stays open before a probe
  int64_t flags_poll_ms = 1000;    // how often the fleet-wide modes are read
  // An event loop's turn holds its calls until its flush (fw_client_hold): one write for the turn. Once
  // held this long, the I/O thread sends them when it is awake anyway (replies arriving), so that Redis
  // works while a long turn runs on; the flush sends the rest. 0 sends every call as the I/O thread wakes.
  int64_t batch_window_us = 200;
  // Blocking callers' own connections (a thread pool's workers: Puma, gunicorn): each thread makes its round
  // trips on one of these itself, with no hop to the I/O thread. 0 sends every call through the I/O thread.
  int64_t direct_connections = 8;
  // rediss:// (redis.tls): verification is always on unless `insecure`; the CA bundle is OpenSSL's
  // default one unless ca_file names another; cert_file + key_file make it mutual TLS; server_name is the
  // name sent (SNI) and verified (default: the URL's host).
  struct Tls {
    std::string ca_file, cert_file, key_file, server_name;
    bool insecure = false;
  } tls;
  // The ACL user and password when they are not in the URL: redis.username, and the value of the
  // environment variable redis.password_env names, read when the policy is parsed. Never printed.
  std::string username, password;
  // redis+sentinel://: the sentinels' own password when it differs from the data nodes' (the value of the
  // environment variable redis.sentinel_password_env names). Without it the sentinels are asked with the
  // URL's credentials, or none when a sentinel has no password set.
  std::string sentinel_password;
  // Whose clock the scripts use: Redis' TIME ("redis", the default: one clock for the fleet) or the
  // calling client's ("client", for managed services that refuse TIME inside scripts; the app servers'
  // clocks must then agree, since a client ahead of the others refills buckets early).
  enum class Clock : uint8_t { redis, client } clock = Clock::redis;
};

// The body of a rejection: floodwall's JSON ({"error": {...}}) or an RFC 9457 problem document.
enum class BodyFormat : uint8_t { json = 0, problem_json = 1 };

// The limit headers a response carries: all of them (the IETF RateLimit-Policy and RateLimit fields and
// the older drafts' RateLimit-Limit, -Remaining and -Reset), the IETF fields alone, or none (a rejection
// still carries Retry-After).
enum class HeaderSet : uint8_t { all = 0, ietf = 1, none = 2 };

struct Policy {
  std::string store = "memory://";
  bool store_given = false;  // the document named "store" (else a client takes FLOODWALL_STORE, then memory://)
  std::string prefix = "floodwall";
  std::string docs_url;  // appended to rejection messages when set
  BodyFormat body_format = BodyFormat::json;
  HeaderSet headers = HeaderSet::all;
  int64_t max_tenants = 100000;  // memory store bound; the oldest tenants are evicted beyond it
  // "summary": how often this client writes its summary to the store for the fleet view (`floodwall top`,
  // engine/fleet_summary.hpp); it expires after three periods. 0: never.
  double summary_period_s = 5;
  std::optional<RequestRatePolicy> request_rate;
  std::optional<ConcurrencyPolicy> concurrency;
  std::optional<FleetPolicy> fleet;
  std::optional<UtilizationPolicy> utilization;
  std::optional<AdaptivePolicy> adaptive;  // present when "adaptive" is enabled
  RedisOptions redis;
  TenantPolicy tenant;      // how a request that names no tenant gets one (request_tenant.hpp)
  std::vector<Rule> rules;  // request_rate.limits, then quotas, then each tier's; at most kMaxPolicyRules
  std::vector<PlanTier> tiers;
  int tier_index(std::string_view name) const;  // -1: no such tier
  // Every glob a route-scoped rule names (rules, concurrency.routes, adaptive.routes), in that order, once
  // each. A request that gives only its path is counted in the metrics under the first one it matches,
  // so the route families stay as few as the policy's globs.
  std::vector<std::string> route_globs;
  std::string_view family_of_path(std::string_view path) const;  // "" (the default route): none matches
  // Whether a rule applies to a tenant of `tier` (-1: no tier): the tier's own limits (quotas) when it has
  // some, else the policy's.
  bool applies_to_tier(const Rule &r, int tier) const;

  // The bucket of one tenant: its override when there is one.
  const BucketLimits *bucket_for(const TenantKey &key) const {
    if (!request_rate) return nullptr;
    return request_rate->overrides.empty() ? &request_rate->limits : override_for(key);
  }
  Mode configured_mode(Limiter l) const;
  bool configured(Limiter l) const;
  // Whether hot tenants may be decided in process (a lease of tokens or slots is configured).
  bool leases() const { return (request_rate && request_rate->lease) || (concurrency && concurrency->lease); }

 private:
  const BucketLimits *override_for(const TenantKey &key) const;
};

// Parses and validates; throws PolicyError naming the field.
Policy parse_policy(std::string_view json);
// Every part's first error (each top-level section checked on its own, every unknown key named); empty when
// parse_policy would accept the document. `floodwall check` prints them.
std::vector<PolicyError> policy_errors(std::string_view json);
// A bucket from a rate and a burst, validated as the policy's are (PolicyError naming "rate" or "burst").
BucketLimits bucket_limits(double rate, double burst);

}  // namespace floodwall
