// The one walk of the metrics (Metrics::visit, metrics.cpp) and what it tells the two texts written
// from it (emitters.cpp): each value with its JSON key, inside the objects and lists the walk opens, and
// its Prometheus family and labels. The walk goes in the JSON document's order; Prometheus lists its
// families in the order of Family, each family's series in the walk's order.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string_view>
#include <variant>

namespace floodwall {

// The Prometheus families, in the order the text lists them. Their names, TYPE, HELP and label names
// are in kFamilies (emitters.cpp). A family is shown once it has a series, or when the walk says so.
enum class Family : uint8_t {
  decisions_total,
  decisions_by_source_total,
  store_failures_total,
  config_errors_total,
  breaker_state,
  mode,
  shedding_amount,
  utilization,
  in_flight,
  adaptive_limit,
  adaptive_in_flight,
  store_evictions_total,
  store_tenants,
  store_connections_in_use,
  store_waiting,
  store_waiting_cap,
  lease_decisions_total,
  lease_exact_admits_total,
  lease_commands_total,
  lease_releases_in_process_total,
  lease_tokens_total,
  lease_slots_total,
  redis_commands_saved,
  hot_tenants,
  lease_tokens_in_hand,
  lease_slots_in_hand,
  release_errors_total,
  tenant_rejection_ratio,
  rule_decisions_total,
  blocked_total,
  summary_writes_total,
  none,  // a value only the JSON shows
};
constexpr size_t kFamilyCount = static_cast<size_t>(Family::none);

// Where a value shows in Prometheus: its family, and the values of the family's labels in the order
// the family names them.
struct Series {
  Family family = Family::none;
  std::initializer_list<std::string_view> labels = {};
};

// Counters in decimal, gauges that are fractions as format_number writes them: the same in both texts.
using Number = std::variant<uint64_t, int64_t, double>;

class MetricsVisitor {
 public:
  virtual ~MetricsVisitor() = default;

  // JSON's nesting: an object or a list, under `key` (an element of a list has none), until end().
  virtual void begin_object(std::string_view key) = 0;
  virtual void begin_list(std::string_view key) = 0;
  virtual void end() = 0;
  // A family Prometheus shows even with no series yet (no tenant rejected, no limiter configured).
  virtual void family(Family f) = 0;

  virtual void number(std::string_view key, Series s, Number n) = 0;
  // One of a few states (a limiter's mode, the breaker's): JSON writes the one in force; Prometheus one
  // series per state, the state as the family's last label, 1 for the one in force and 0 for the others.
  virtual void state(std::string_view key, Series s, std::initializer_list<std::string_view> states,
                     std::string_view in_force) = 0;
  // A string only the JSON shows.
  virtual void text(std::string_view key, std::string_view value) = 0;
};

}  // namespace floodwall
