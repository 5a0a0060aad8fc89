// `floodwall top`: the whole fleet at once, from the summaries its clients write to the store
// (fw_admin_clients; engine/fleet_summary.hpp): clients, decisions per second, refusals by limiter, the
// tenants refused most fleet-wide, clients by version (a rolling upgrade shows as two), breakers open. Live,
// it redraws in place every --interval (ANSI: cursor home, clear; no curses); --once prints one view (with
// --json, one document) for scripts. `floodwall status` lists the clients too (clients_text).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <map>
#include <sstream>
#include <thread>

#include "cli/cli_internal.hpp"
#include "floodwall.h"

namespace fw_cli {

namespace {

std::string fixed(double v, int digits = 1) {
  std::ostringstream s;
  s.setf(std::ios::fixed);
  s.precision(digits);
  s << v;
  return s.str();
}

std::string padded(std::string s, size_t width) {
  s = shown(s);
  if (s.size() > width) s = s.substr(0, width - 1) + "~";
  return s + std::string(width - s.size() + 1, ' ');
}

double number_of(const json &j, const char *key) {
  return j.is_object() && j.contains(key) && j[key].is_number() ? j[key].get<double>() : 0.0;
}

double refused_per_s(const json &c) {
  double sum = 0;
  if (c.contains("per_s") && c["per_s"].contains("refused"))
    for (const auto &[l, v] : c["per_s"]["refused"].items()) sum += v.is_number() ? v.get<double>() : 0.0;
  return sum;
}

}  // namespace

json read_clients(fw_client *fc) {
  fw_buf b = FW_BUF_INIT;
  int rc = fw_admin_clients(fc, &b);
  if (rc != FW_OK) {
    const fw_error *e = fw_error_last();
    throw CommandError(e ? e->message : "cannot read the clients' summaries", false);
  }
  json j = json::parse(b.ptr ? std::string_view(b.ptr, b.size) : std::string_view("[]"));
  fw_buf_dispose(&b);
  return j;
}

json client_row(const json &c) {
  return {{"id", c.value("id", "")},
          {"host", c.value("host", "")},
          {"pid", c.value("pid", 0)},
          {"language", c.value("language", "")},
          {"version", c.value("version", "")},
          {"started_at_ms", c.value("started_at_ms", int64_t{0})},
          {"written_at_ms", c.value("written_at_ms", int64_t{0})},
          {"decisions_per_s", c.contains("per_s") ? number_of(c["per_s"], "decisions") : 0.0},
          {"refused_per_s", refused_per_s(c)},
          {"decisions_total", c.value("decisions_total", uint64_t{0})},
          {"fallback_share", number_of(c, "fallback_share")},
          {"breaker", c.value("breaker", "closed")}};
}

// The fleet as a whole: sums of the clients' rates, the tenants refused most (their refusals added up over
// the clients that name them), the clients by version and by language, the breakers open.
json fleet_view(const json &clients) {
  double decisions = 0;
  json refused = json::object(), versions = json::object(), languages = json::object(), open = json::array();
  std::map<std::string, std::pair<uint64_t, int64_t>> tenants;  // refusals, clients
  for (const json &c : clients) {
    if (c.contains("per_s")) {
      decisions += number_of(c["per_s"], "decisions");
      if (c["per_s"].contains("refused"))
        for (const auto &[l, v] : c["per_s"]["refused"].items())
          refused[l] = number_of(refused, l.c_str()) + (v.is_number() ? v.get<double>() : 0.0);
    }
    std::string v = c.value("version", "?"), lang = c.value("language", "?");
    versions[v] = versions.value(v, 0) + 1;
    languages[lang] = languages.value(lang, 0) + 1;
    if (c.value("breaker", "closed") != "closed") open.push_back(c.value("id", ""));
    if (c.contains("top_refused") && c["top_refused"].is_array())
      for (const json &t : c["top_refused"]) {
        auto &e = tenants[t.value("tenant", "")];
        e.first += t.value("rejections", uint64_t{0});
        e.second++;
      }
  }
  std::vector<std::pair<std::string, std::pair<uint64_t, int64_t>>> rows(tenants.begin(), tenants.end());
  std::stable_sort(rows.begin(), rows.end(),
                   [](const auto &a, const auto &b) { return a.second.first > b.second.first; });
  json top = json::array();
  for (size_t i = 0; i < rows.size() && i < 10; i++)
    top.push_back(
        {{"tenant", rows[i].first}, {"rejections", rows[i].second.first}, {"clients", rows[i].second.second}});
  return {{"clients", clients.size()}, {"decisions_per_s", decisions}, {"refused_per_s", refused}, {"top_refused", top},
          {"versions", versions},      {"languages", languages},       {"breakers_open", open}};
}

std::string clients_text(const json &rows) {
  std::string o = padded("CLIENT", 16) + padded("HOST", 18) + padded("PID", 7) + padded("LANG", 7) +
                  padded("VERSION", 9) + padded("DEC/S", 9) + padded("REFUSED/S", 9) + padded("BREAKER", 9) +
                  "FALLBACK\n";
  for (const json &r : rows)
    o += padded(r["id"].get<std::string>(), 16) + padded(r["host"].get<std::string>(), 18) + padded(num(r["pid"]), 7) +
         padded(r["language"].get<std::string>(), 7) + padded(r["version"].get<std::string>(), 9) +
         padded(fixed(r["decisions_per_s"].get<double>()), 9) + padded(fixed(r["refused_per_s"].get<double>()), 9) +
         padded(r["breaker"].get<std::string>(), 9) + fixed(100 * r["fallback_share"].get<double>()) + "%\n";
  return o;
}

namespace {

std::string view_text(const json &fleet, const json &rows, const std::string &store) {
  std::time_t now = std::time(nullptr);
  char at[16];
  std::strftime(at, sizeof at, "%H:%M:%S", std::localtime(&now));
  std::string o = "floodwall top  " + shown(store) + "  " + at + "\n\n";
  o +=
      row("clients", num(fleet["clients"]) + " (breakers open: " + std::to_string(fleet["breakers_open"].size()) + ")");
  o += row("decisions/s", fixed(fleet["decisions_per_s"].get<double>()));
  std::string refused;
  for (const auto &[l, v] : fleet["refused_per_s"].items())
    refused += (refused.empty() ? "" : "  ") + l + " " + fixed(v.get<double>());
  o += row("refused/s", refused.empty() ? "none" : refused);
  std::string versions, languages;
  for (const auto &[v, n] : fleet["versions"].items())
    versions += (versions.empty() ? "" : "  ") + shown(v) + " x" + num(n);
  for (const auto &[l, n] : fleet["languages"].items())
    languages += (languages.empty() ? "" : "  ") + shown(l) + " x" + num(n);
  o += row("versions", versions);
  o += row("languages", languages);
  o += "\nMOST REFUSED TENANTS (refusals since each client started)\n";
  if (fleet["top_refused"].empty()) o += "  none\n";
  for (const json &t : fleet["top_refused"])
    o += "  " + padded(t["tenant"].get<std::string>(), 32) + num(t["rejections"]) + " refusals (" + num(t["clients"]) +
         (t["clients"].get<int64_t>() == 1 ? " client)\n" : " clients)\n");
  o += "\n";
  o += clients_text(rows);
  return o;
}

}  // namespace

int run_top(const Args &a, double interval_s, fw_client *fc, const std::string &store, std::string &out) {
  bool tty = isatty(STDOUT_FILENO) != 0;
  for (;;) {
    json clients = read_clients(fc), rows = json::array();
    for (const json &c : clients) rows.push_back(client_row(c));
    json fleet = fleet_view(clients);
    if (a.json) {  // --once: one document; live: one a line, every interval
      json doc = {{"store", store}, {"fleet", fleet}, {"clients", rows}};
      if (a.once) {
        out += doc.dump(2) + "\n";
        return kDone;
      }
      std::string line = doc.dump() + "\n";
      std::fwrite(line.data(), 1, line.size(), stdout);
      std::fflush(stdout);
      std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int64_t>(interval_s * 1000)));
      continue;
    }
    std::string text = clients.empty() ? "floodwall top  " + shown(store) +
                                             "\n\nno clients: none has written a summary to this store (each writes "
                                             "one every summary.period_s, 5 s by default, while it runs)\n"
                                       : view_text(fleet, rows, store);
    if (a.once) {
      out += text;
      return kDone;
    }
    std::string frame = (tty ? "\x1b[H\x1b[2J" : "") + text + (tty ? "" : "\n");
    std::fwrite(frame.data(), 1, frame.size(), stdout);
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int64_t>(interval_s * 1000)));
  }
}

}  // namespace fw_cli
