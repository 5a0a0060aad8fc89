// The floodwall command's text output: what a person reads of the store's answers (--json prints the
// documents themselves).
#include <sstream>

#include "cli/cli_internal.hpp"

namespace fw_cli {

std::string num(const json &v) {
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  if (v.is_number()) {
    std::ostringstream s;
    s << v.get<double>();
    return s.str();
  }
  return v.is_string() ? v.get<std::string>() : v.dump();
}

std::string override_text(const json &e) {
  std::string s;
  if (!e["tier"].is_null()) s += "tier " + e["tier"].get<std::string>();
  if (!e["override"].is_null()) {
    if (!s.empty()) s += ", ";
    s += "rate " + num(e["override"]["rate"]) + "/s, burst " + num(e["override"]["burst"]);
  }
  return s;
}

std::string block_text(const json &e) {
  return e["blocked_until"].is_null() ? "until unblocked" : "until " + e["blocked_until"].get<std::string>();
}

std::string row(const std::string &label, const std::string &value) {
  std::string l = label;
  if (l.size() < 14) l += std::string(14 - l.size(), ' ');
  return l + value + "\n";
}

std::string tenant_text(const json &t) {
  std::string o = row("tenant", t["tenant"].get<std::string>());
  o += row("tier", t["tier"].is_null() ? "none"
                                       : t["tier"].get<std::string>() +
                                             (t.value("tier_unknown", false) ? " (not in this policy)" : ""));
  o += row("override", t["override"].is_null()
                           ? "none"
                           : "rate " + num(t["override"]["rate"]) + "/s, burst " + num(t["override"]["burst"]));
  o += row("blocked", t["blocked"].get<bool>() ? "yes, " + block_text(t) : "no");
  if (t.contains("request_rate")) {
    const json &r = t["request_rate"];
    o += row("request_rate", num(r["remaining"]) + " of " + num(r["limit"]) + " tokens left (" + num(r["rate"]) +
                                 "/s, full in " + num(r["full_in_s"]) + " s)");
  }
  if (t.contains("concurrency"))
    o +=
        row("concurrency", num(t["concurrency"]["in_flight"]) + " of " + num(t["concurrency"]["limit"]) + " in flight");
  for (const json &l : t["limits"])
    o += row("limit", l["name"].get<std::string>() + ": " + num(l["remaining"]) + " of " + num(l["limit"]) + " left (" +
                          num(l["rate"]) + "/s)");
  for (const json &q : t["quotas"])
    o += row("quota", q["name"].get<std::string>() + ": " + num(q["remaining"]) + " of " + num(q["limit"]) +
                          " left this " + q["period"].get<std::string>() + " (resets " + q["reset"].get<std::string>() +
                          ")");
  return o;
}

std::string status_text(const json &s) {
  std::string o = row("store", s["store"].get<std::string>() + " (" + s["server"].get<std::string>() + ", " +
                                   s["topology"].get<std::string>() + ")");
  o += row("prefix", s["prefix"].get<std::string>());
  if (!s["round_trip_ms"].is_null()) {
    std::ostringstream rt;
    rt.precision(3);
    rt << s["round_trip_ms"].get<double>() << " ms";
    o += row("round trip", rt.str());
  }
  std::string modes;
  for (const char *l : {"request_rate", "concurrency", "fleet", "utilization", "adaptive"}) {
    const json &m = s["modes"][l];
    modes += (modes.empty() ? "" : "  ") + std::string(l) + "=" + (m.is_null() ? "default" : m.get<std::string>());
  }
  o += row("modes", s["modes_fleet_wide"].get<bool>() ? modes : "per process (the store keeps no fleet-wide mode)");
  const json &f = s["fleet"];
  std::string fleet = num(f["in_flight"]) + " in flight";
  if (!f["capacity"].is_null()) fleet += " of " + num(f["capacity"]);
  if (f["reporting_clients"].get<int64_t>() > 0) fleet += " (" + num(f["reporting_clients"]) + " clients reporting)";
  o += row("fleet", fleet);
  o += row("controlled", num(s["controlled"]) + " tenants with a control record");
  if (s["overrides"].empty()) o += row("overrides", "none");
  for (size_t i = 0; i < s["overrides"].size(); i++)
    o += row(i == 0 ? "overrides" : "",
             s["overrides"][i]["tenant"].get<std::string>() + "  " + override_text(s["overrides"][i]));
  if (s["blocks"].empty()) o += row("blocks", "none");
  for (size_t i = 0; i < s["blocks"].size(); i++)
    o += row(i == 0 ? "blocks" : "", s["blocks"][i]["tenant"].get<std::string>() + "  " + block_text(s["blocks"][i]));
  return o;
}

}  // namespace fw_cli
