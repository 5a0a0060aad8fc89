// The two texts of the metrics, each a visitor of the one walk (Metrics::visit): JSON, written as the
// walk goes, and Prometheus text, each family's series gathered and the families listed in their order.
#include <array>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "http/formatter.hpp"
#include "metrics/metrics.hpp"
#include "metrics/visitor.hpp"

namespace floodwall {

namespace {

struct FamilyInfo {
  Family family;  // its place in kFamilies, checked below
  const char *name;
  const char *type;
  const char *help;
  std::array<std::string_view, 3> labels;  // in the order written; a state's label last
};

constexpr FamilyInfo kFamilies[] = {
    {Family::decisions_total,
     "floodwall_decisions_total",
     "counter",
     "Limiter verdicts by limiter, outcome and route family.",
     {"limiter", "outcome", "route"}},
    {Family::decisions_by_source_total,
     "floodwall_decisions_by_source_total",
     "counter",
     "Who decided the requests that reached the store: the store, the local fallback, nobody (failed open) or "
     "nobody and refused (fallback closed).",
     {"source"}},
    {Family::store_failures_total,
     "floodwall_store_failures_total",
     "counter",
     "Decisions the store could not make in time, by limiter and reason (redis.fallback decided them).",
     {"limiter", "reason"}},
    {Family::config_errors_total,
     "floodwall_config_errors_total",
     "counter",
     "Store operations refused as misconfigured (wrong key type, CROSSSLOT).",
     {}},
    {Family::breaker_state,
     "floodwall_breaker_state",
     "gauge",
     "The store circuit breaker (1 for the state in force).",
     {"state"}},
    {Family::mode,
     "floodwall_mode",
     "gauge",
     "The mode in force per limiter (1 for the mode in force).",
     {"limiter", "mode"}},
    {Family::shedding_amount, "floodwall_shedding_amount", "gauge", "The utilization shedder's shedding amount.", {}},
    {Family::utilization, "floodwall_utilization", "gauge", "The last sampled worker utilization.", {}},
    {Family::in_flight, "floodwall_in_flight", "gauge", "Requests admitted and not yet released.", {}},
    {Family::adaptive_limit,
     "floodwall_adaptive_limit",
     "gauge",
     "The adaptive concurrency limit now, per route family it limits (\"*\": every request).",
     {"route"}},
    {Family::adaptive_in_flight,
     "floodwall_adaptive_in_flight",
     "gauge",
     "Requests holding a slot of the adaptive concurrency limit, per route family it limits.",
     {"route"}},
    {Family::store_evictions_total,
     "floodwall_store_evictions_total",
     "counter",
     "Tenants evicted from the memory store beyond max_tenants.",
     {}},
    {Family::store_tenants, "floodwall_store_tenants", "gauge", "Tenants held by the memory store.", {}},
    {Family::store_connections_in_use,
     "floodwall_store_connections_in_use",
     "gauge",
     "Redis connections the store spreads calls over now.",
     {}},
    {Family::store_waiting, "floodwall_store_waiting", "gauge", "Admits waiting on a Redis reply now.", {}},
    {Family::store_waiting_cap,
     "floodwall_store_waiting_cap",
     "gauge",
     "Admits beyond this many are decided at once by the fallback (0: no cap, Redis answers well within the "
     "deadline).",
     {}},
    {Family::lease_decisions_total,
     "floodwall_lease_decisions_total",
     "counter",
     "Hot tenants' decisions made from a lease or what Redis last said (store decisions): in process (no round "
     "trip of their own) or after a lease call they made.",
     {"how"}},
    {Family::lease_exact_admits_total,
     "floodwall_lease_exact_admits_total",
     "counter",
     "Hot tenants' admits that took one exact round trip.",
     {}},
    {Family::lease_commands_total,
     "floodwall_lease_commands_total",
     "counter",
     "Redis commands the leases made: lease calls, give-backs, fleet reports.",
     {"call"}},
    {Family::lease_releases_in_process_total,
     "floodwall_lease_releases_in_process_total",
     "counter",
     "Leased slots given back to their lease (no release call).",
     {}},
    {Family::lease_tokens_total,
     "floodwall_lease_tokens_total",
     "counter",
     "Tokens leased from Redis and given back to it.",
     {"op"}},
    {Family::lease_slots_total,
     "floodwall_lease_slots_total",
     "counter",
     "Concurrency slots leased from Redis and given back to it.",
     {"op"}},
    {Family::redis_commands_saved,
     "floodwall_redis_commands_saved",
     "gauge",
     "Decisions and releases made in process, less the lease calls, give-backs and reports made instead.",
     {}},
    {Family::hot_tenants, "floodwall_hot_tenants", "gauge", "Tenants this process decides in process now.", {}},
    {Family::lease_tokens_in_hand,
     "floodwall_lease_tokens_in_hand",
     "gauge",
     "Leased tokens this process holds now (debited in Redis).",
     {}},
    {Family::lease_slots_in_hand,
     "floodwall_lease_slots_in_hand",
     "gauge",
     "Leased slots this process holds now, in use or idle.",
     {}},
    {Family::release_errors_total,
     "floodwall_release_errors_total",
     "counter",
     "Releases the store could not apply (the slot heals after ttl_s).",
     {}},
    {Family::tenant_rejection_ratio,
     "floodwall_tenant_rejection_ratio",
     "gauge",
     "Rejected share of the requests of the most rejected tenants.",
     {"tenant"}},
    {Family::rule_decisions_total,
     "floodwall_rule_decisions_total",
     "counter",
     "Verdicts of the policy's limits and quotas (request_rate.limits, quotas, tiers') by name and outcome.",
     {"rule", "outcome"}},
    {Family::blocked_total,
     "floodwall_blocked_total",
     "counter",
     "Requests refused because their tenant is blocked (the admin API).",
     {}},
    {Family::summary_writes_total,
     "floodwall_summary_writes_total",
     "counter",
     "This client's summary written to the store for the fleet view (floodwall top), by result (ok, failed).",
     {"result"}},
};

constexpr bool families_in_order() {
  if (std::size(kFamilies) != kFamilyCount) return false;
  for (size_t i = 0; i < kFamilyCount; i++)
    if (static_cast<size_t>(kFamilies[i].family) != i) return false;
  return true;
}
static_assert(families_in_order(), "kFamilies lists every Family, in the order of the enum");

std::string number_text(const Number &n) {
  if (const double *d = std::get_if<double>(&n)) return format_number(*d);
  return std::visit([](auto v) { return std::to_string(v); }, n);
}

// Prometheus label values: backslash, double quote and newline escaped; other control bytes too.
void append_label(std::string &out, std::string_view s) {
  for (unsigned char c : s) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else if (c < 0x20 || c == 0x7f)
      out += "?";
    else
      out.push_back(static_cast<char>(c));
  }
}

class JsonEmitter final : public MetricsVisitor {
 public:
  std::string finish() && {
    out_ += '}';
    return std::move(out_);
  }

  void begin_object(std::string_view key) override { open(key, false); }
  void begin_list(std::string_view key) override { open(key, true); }
  void end() override {
    out_ += levels_.back().list ? ']' : '}';
    levels_.pop_back();
  }
  void family(Family) override {}
  void number(std::string_view key, Series, Number n) override {
    append_key(key);
    out_ += number_text(n);
  }
  void state(std::string_view key, Series, std::initializer_list<std::string_view>,
             std::string_view in_force) override {
    text(key, in_force);
  }
  void text(std::string_view key, std::string_view value) override {
    append_key(key);
    append_json_string(out_, value);
  }

 private:
  struct Level {
    bool list;
    bool empty = true;
  };
  void open(std::string_view key, bool list) {
    append_key(key);
    out_ += list ? '[' : '{';
    levels_.push_back({list});
  }
  // The comma after the previous member, and the key (an element of a list has none).
  void append_key(std::string_view key) {
    Level &level = levels_.back();
    if (!level.empty) out_ += ',';
    level.empty = false;
    if (level.list) return;
    append_json_string(out_, key);
    out_ += ':';
  }

  std::string out_ = "{";
  std::vector<Level> levels_{{false}};  // the document's object first
};

class PrometheusEmitter final : public MetricsVisitor {
 public:
  std::string finish() && {
    std::string out;
    for (size_t f = 0; f < kFamilyCount; f++) {
      if (!shown_[f]) continue;
      const FamilyInfo &info = kFamilies[f];
      out += std::string("# HELP ") + info.name + " " + info.help + "\n";
      out += std::string("# TYPE ") + info.name + " " + info.type + "\n";
      out += series_[f];
    }
    return out;
  }

  void begin_object(std::string_view) override {}  // Prometheus is flat: labels say where a value is
  void begin_list(std::string_view) override {}
  void end() override {}
  void family(Family f) override { shown_[static_cast<size_t>(f)] = true; }
  void number(std::string_view, Series s, Number n) override { append_series(s, {}, number_text(n)); }
  void state(std::string_view, Series s, std::initializer_list<std::string_view> states,
             std::string_view in_force) override {
    for (std::string_view name : states) append_series(s, name, name == in_force ? "1" : "0");
  }
  void text(std::string_view, std::string_view) override {}

 private:
  // name{label="value",...} value: the series' labels, then the state's if it is one (no state: "").
  void append_series(const Series &s, std::string_view state, std::string_view value) {
    if (s.family == Family::none) return;
    size_t f = static_cast<size_t>(s.family);
    const FamilyInfo &info = kFamilies[f];
    shown_[f] = true;
    std::string &out = series_[f];
    out += info.name;
    size_t i = 0;
    auto append = [&](std::string_view v) {
      out += i ? "," : "{";
      out += info.labels[i++];
      out += "=\"";
      append_label(out, v);
      out += '"';
    };
    for (std::string_view v : s.labels) append(v);
    if (!state.empty()) append(state);
    if (i) out += '}';
    out += ' ';
    out += value;
    out += '\n';
  }

  std::array<bool, kFamilyCount> shown_{};
  std::array<std::string, kFamilyCount> series_;
};

}  // namespace

std::string Metrics::json(const StoreStats &st, const Gauges &g) const {
  JsonEmitter out;
  visit(st, g, out);
  return std::move(out).finish();
}

std::string Metrics::prometheus(const StoreStats &st, const Gauges &g) const {
  PrometheusEmitter out;
  visit(st, g, out);
  return std::move(out).finish();
}

}  // namespace floodwall
