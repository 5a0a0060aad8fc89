// The floodwall command: an operator's changes to a running fleet through its store (the admin API of
// floodwall.h), and the check of a policy document. One implementation, behind fw_cli_run, for the
// executable, the pip console script and the npm bin.
//
// Conventions: options may come before or after the command's words, as --name VALUE or --name=VALUE; "--"
// ends them (a tenant id that starts with "-"). Standard output carries the answer (one JSON document with
// --json), standard error the errors, each naming the argument. Exit status 0 done, 1 the command failed
// (the store could not be reached within its connect time-out and deadline, a policy has errors), 2 a usage
// error. No password is ever printed: the store's URL is shown redacted, and the core's messages are.
#include "cli.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "floodwall.h"
#include "policy/policy.hpp"
#include "policy/request_tenant.hpp"
#include "util/redact.hpp"

namespace fw_cli {

namespace {

using nlohmann::json;

enum Exit { kDone = 0, kFailed = 1, kUsage = 2 };

// A usage error (exit 2): the message names the argument; `command` is whose usage line to show.
struct UsageError : std::runtime_error {
  UsageError(const std::string &what, std::string cmd = "") : std::runtime_error(what), command(std::move(cmd)) {}
  std::string command;
};
// The command ran and failed (exit 1), or the store refused an argument (exit 2 when `usage`).
struct CommandError : std::runtime_error {
  CommandError(const std::string &what, bool is_usage) : std::runtime_error(what), usage(is_usage) {}
  bool usage;
};

struct CommandHelp {
  const char *name;     // "override set"
  const char *usage;    // after "Usage: floodwall "
  const char *summary;  // one line, for the command list
  const char *text;     // the rest of its help: description, options, examples
};

const char kGeneralOptions[] =
    "Options of every command:\n"
    "  --store URL      the store: redis://, rediss://, redis+cluster://, rediss+cluster://,\n"
    "                   redis+sentinel://, shm://NAME (default: $FLOODWALL_STORE, else the policy's \"store\")\n"
    "  --prefix P       the fleet's key prefix (default: the policy's \"prefix\", else \"floodwall\")\n"
    "  --policy FILE    the fleet's policy: its tiers, limits and quotas (tiers need it)\n"
    "  --json           machine-readable output: one JSON document on standard output\n"
    "  -h, --help       help\n";

const CommandHelp kCommands[] = {
    {"status", "status", "modes, fleet in flight, overrides, blocks, the store's health",
     "The fleet as the store holds it now: each limiter's fleet-wide mode (\"default\": each process's\n"
     "policy decides), the fleet shedder's requests in flight, the tenants with an override, a tier or a block,\n"
     "and the store as this command reached it (server, topology, round trip).\n\n"
     "Examples:\n"
     "  floodwall --store redis://redis.internal:6379 status\n"
     "  floodwall status --json | jq .modes\n"},
    {"mode", "mode LIMITER enforce|dark|off|default", "set a limiter's fleet-wide mode",
     "Sets the mode of LIMITER (request_rate, concurrency, fleet, utilization, adaptive) for every\n"
     "client of the store:\n"
     "enforce (decide and refuse), dark (decide, count what would be refused, refuse nothing), off (not\n"
     "evaluated), or default (no fleet-wide mode: each process's policy and fw_set_mode decide again).\n"
     "Every client takes it at its next poll of the flags (redis.flags_poll_ms, 1 s by default).\n"
     "shm:// keeps no fleet-wide mode: there each process's own applies.\n\n"
     "Examples:\n"
     "  floodwall mode fleet dark\n"
     "  floodwall mode request_rate default\n"},
    {"override set", "override set TENANT (--rate R --burst B | --tier NAME) [--api-key]",
     "give a tenant its own bucket, or a tier of the policy",
     "With --rate and --burst the tenant gets its own request-rate bucket (R tokens per second, B at most);\n"
     "with --tier it joins a tier of the policy (\"tiers\"; --policy names the file that has them), whose\n"
     "bucket, limits and quotas it then gets. Every client applies it to the tenant's next request.\n\n"
     "Options:\n"
     "  --rate R         tokens per second (a positive number)\n"
     "  --burst B        the bucket's capacity in tokens (a positive whole number)\n"
     "  --tier NAME      a tier of the policy\n"
     "  --api-key        TENANT is a raw API key or Bearer token, hashed as the middleware hashes it\n\n"
     "Examples:\n"
     "  floodwall override set acme --rate 50 --burst 100\n"
     "  floodwall --policy policy.json override set --api-key sk_live_abc123 --tier pro\n"},
    {"override rm", "override rm TENANT [--api-key]", "take a tenant's override and tier away",
     "The tenant gets the policy's bucket again and leaves its tier; a block stays (unblock lifts it).\n\n"
     "Example:\n"
     "  floodwall override rm acme\n"},
    {"override list", "override list", "the tenants with an override or a tier",
     "Lists every tenant with its own bucket or a tier, as the store holds them.\n\n"
     "Example:\n"
     "  floodwall override list --json\n"},
    {"block", "block TENANT [--for DURATION] [--api-key]", "refuse a tenant (403) for a while or until unblocked",
     "Every client answers the tenant's requests with 403 (nothing consumed) from its next request, for\n"
     "DURATION (like 90s, 15m, 2h, 1d, 1h30m; a bare number is seconds), or until `floodwall unblock`.\n\n"
     "Options:\n"
     "  --for DURATION   how long (at most ten years); without it, until unblocked\n"
     "  --api-key        TENANT is a raw API key or Bearer token, hashed as the middleware hashes it\n\n"
     "Examples:\n"
     "  floodwall block scraper-42 --for 15m\n"
     "  floodwall block --api-key sk_live_leaked\n"},
    {"unblock", "unblock TENANT [--api-key]", "lift a tenant's block",
     "The tenant's next request is decided by its limits again.\n\n"
     "Example:\n"
     "  floodwall unblock scraper-42\n"},
    {"tenant show", "tenant show TENANT [--api-key]", "what a tenant has left, in flight, tier, override, block",
     "The tenant's request-rate bucket (tokens left), its requests in flight, and, with --policy, each\n"
     "limit and quota of its tier with what is left and when a quota's window ends; its tier, override and\n"
     "block. Read from the store now; nothing is consumed.\n\n"
     "Examples:\n"
     "  floodwall --policy policy.json tenant show acme\n"
     "  floodwall tenant show --api-key sk_live_abc123 --json\n"},
    {"tenant reset", "tenant reset TENANT [--api-key]", "fill a tenant's buckets and quotas again",
     "Forgets the tenant's request-rate bucket and, with --policy, its limits and quotas: full again at\n"
     "its next request. Its control record (override, tier, block) and its requests in flight stay.\n\n"
     "Example:\n"
     "  floodwall --policy policy.json tenant reset acme\n"},
    {"check", "check --policy FILE", "validate a policy document",
     "Reads FILE and prints every error it finds with its JSON path (each section's first), or that it is\n"
     "valid; exit status 1 when it has errors. Nothing is connected to.\n\n"
     "Example:\n"
     "  floodwall check --policy policy.json\n"},
};

const CommandHelp *find_command(const std::string &name) {
  for (const CommandHelp &c : kCommands)
    if (name == c.name) return &c;
  return nullptr;
}

std::string general_help() {
  std::string h =
      "Usage: floodwall [OPTIONS] COMMAND [ARGS]\n\n"
      "Changes a running floodwall fleet through its store, with no deploy: a tenant's override, tier or\n"
      "block applies to its next request at every client; a mode, at every client's next flags poll (1 s).\n\n"
      "Commands:\n";
  for (const CommandHelp &c : kCommands) {
    std::string u = c.usage;
    h += "  " + u;
    h += u.size() < 40 ? std::string(40 - u.size(), ' ') : "\n" + std::string(42, ' ');
    h += c.summary;
    h += "\n";
  }
  h += "\n";
  h += kGeneralOptions;
  h += "  --version        the version\n\n"
       "Exit status: 0 done; 1 the command failed (the store cannot be reached, the policy has errors);\n"
       "2 a usage error (an unknown command or option, a bad argument).\n\n"
       "Examples:\n"
       "  export FLOODWALL_STORE=redis://redis.internal:6379\n"
       "  floodwall status\n"
       "  floodwall mode fleet dark\n"
       "  floodwall override set acme --rate 50 --burst 100\n"
       "  floodwall block scraper-42 --for 15m\n"
       "  floodwall --policy policy.json tenant show acme --json\n"
       "  floodwall check --policy policy.json\n\n"
       "`floodwall COMMAND --help` shows a command's help.\n";
  return h;
}

std::string command_help(const CommandHelp &c) {
  return std::string("Usage: floodwall ") + c.usage + "\n\n" + c.text + "\n" + kGeneralOptions;
}

// The words of a group ("override", "tenant") that name a command.
std::string group_help(const std::string &group) {
  std::string h = "Usage: floodwall " + group + " COMMAND\n\nCommands:\n";
  for (const CommandHelp &c : kCommands) {
    if (std::string(c.name).rfind(group + " ", 0) != 0) continue;
    std::string u = c.usage;
    h += "  " + u + (u.size() < 40 ? std::string(40 - u.size(), ' ') : "\n" + std::string(42, ' ')) + c.summary + "\n";
  }
  return h + "\n`floodwall " + group + " COMMAND --help` shows a command's help.\n";
}

// --------------------------------------------------------------------------------------- arguments

struct Args {
  std::optional<std::string> store, prefix, policy, rate, burst, tier, for_;
  bool json = false, api_key = false, help = false, version = false;
  std::vector<std::string> words;  // the command's words and operands, in order
};

// What a shown value may contain: an argument echoed back never carries a control character to a terminal.
std::string shown(std::string_view s) {
  std::string out;
  for (unsigned char c : s.substr(0, 64)) out += c < 0x20 || c == 0x7f ? '?' : static_cast<char>(c);
  return s.size() > 64 ? out + "..." : out;
}

Args parse_args(int argc, const char *const *argv) {
  Args a;
  const std::map<std::string, std::optional<std::string> Args::*> valued = {
      {"--store", &Args::store}, {"--prefix", &Args::prefix}, {"--policy", &Args::policy}, {"--rate", &Args::rate},
      {"--burst", &Args::burst}, {"--tier", &Args::tier},     {"--for", &Args::for_}};
  bool operands_only = false;
  for (int i = 1; i < argc; i++) {
    std::string arg = argv[i] ? argv[i] : "";
    if (operands_only || arg.empty() || arg[0] != '-' || arg == "-") {
      a.words.push_back(arg);
      continue;
    }
    if (arg == "--") {
      operands_only = true;
      continue;
    }
    if (arg == "-h" || arg == "--help") {
      a.help = true;
      continue;
    }
    if (arg == "--version") {
      a.version = true;
      continue;
    }
    if (arg == "--json") {
      a.json = true;
      continue;
    }
    if (arg == "--api-key") {
      a.api_key = true;
      continue;
    }
    size_t eq = arg.find('=');
    std::string name = arg.substr(0, eq);
    auto it = valued.find(name);
    if (it == valued.end()) throw UsageError("unknown option " + shown(name));
    std::string value;
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
    } else {
      if (i + 1 >= argc || !argv[i + 1]) throw UsageError(name + ": needs a value");
      value = argv[++i];
    }
    if (a.*(it->second)) throw UsageError(name + ": given twice");
    a.*(it->second) = value;
  }
  return a;
}

double positive_number(const std::string &opt, const std::string &v, const char *what, const char *cmd) {
  errno = 0;
  char *end = nullptr;
  double d = std::strtod(v.c_str(), &end);
  if (v.empty() || end != v.c_str() + v.size() || errno == ERANGE || !std::isfinite(d) || d <= 0)
    throw UsageError(opt + ": must be " + what + " (got \"" + shown(v) + "\")", cmd);
  return d;
}

// "90", "90s", "15m", "2h", "1d", "1w", "1h30m", "1.5h", "250ms": seconds, more than 0, at most ten years.
double parse_duration(const std::string &v) {
  auto bad = [&] {
    return UsageError("--for: \"" + shown(v) + "\" is not a duration (like 90s, 15m, 2h, 1d, 1h30m)", "block");
  };
  double total = 0;
  size_t i = 0;
  bool bare = true;
  while (i < v.size()) {
    size_t start = i;
    while (i < v.size() && (std::isdigit(static_cast<unsigned char>(v[i])) || v[i] == '.')) i++;
    if (i == start) throw bad();
    char *end = nullptr;
    std::string num = v.substr(start, i - start);
    double n = std::strtod(num.c_str(), &end);
    if (end != num.c_str() + num.size()) throw bad();
    size_t u = i;
    while (i < v.size() && std::isalpha(static_cast<unsigned char>(v[i]))) i++;
    std::string unit = v.substr(u, i - u);
    double scale = 0;
    if (unit.empty() && start == 0 && i == v.size()) scale = 1;  // a bare number: seconds
    if (unit == "ms") scale = 0.001;
    if (unit == "s") scale = 1;
    if (unit == "m") scale = 60;
    if (unit == "h") scale = 3600;
    if (unit == "d") scale = 86400;
    if (unit == "w") scale = 7 * 86400;
    if (scale == 0) throw bad();
    bare = bare && unit.empty();
    total += n * scale;
  }
  if (v.empty()) throw bad();
  if (!(total > 0))
    throw UsageError(
        "--for: must be more than 0 (got \"" + shown(v) + "\"; without --for the block lasts until unblock)", "block");
  if (total > 10.0 * 365 * 86400) throw UsageError("--for: must be at most ten years", "block");
  return total;
}

// --------------------------------------------------------------------------------------- the client

std::string read_file(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  if (!f.good()) throw UsageError("--policy: cannot read \"" + shown(path) + "\" (" + std::strerror(errno) + ")");
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

int status_exit(int rc) {
  return rc == FW_EINVAL || rc == FW_EPOLICY ? kUsage : kFailed;
}

[[noreturn]] void fail_call(int rc) {
  const fw_error *e = fw_error_last();
  throw CommandError(e ? e->message : "failed", status_exit(rc) == kUsage);
}

void call(int rc) {
  if (rc != FW_OK) fail_call(rc);
}

struct Client {
  fw_client *c = nullptr;
  std::string store;  // as given (never printed: redacted first)
  ~Client() { fw_client_free(c); }
};

// The client the admin calls go through: the policy file's document (or an empty one) with the store and
// the prefix the command line or the environment give.
void open_client(const Args &a, Client &cl) {
  json doc = json::object();
  if (a.policy) {
    std::string text = read_file(*a.policy);
    try {
      doc = json::parse(text);
    } catch (const json::exception &) {
      doc = nullptr;
    }
    std::vector<floodwall::PolicyError> errors = floodwall::policy_errors(text);
    if (!errors.empty() || !doc.is_object())
      throw UsageError("--policy: " + shown(*a.policy) + ": " +
                       (errors.empty() ? std::string("not a JSON object") : errors.front().what()) +
                       " (floodwall check --policy FILE says every error)");
  }
  const char *env = std::getenv("FLOODWALL_STORE");
  if (a.store)
    cl.store = *a.store;
  else if (env && *env)
    cl.store = env;
  else if (doc.contains("store") && doc["store"].is_string())
    cl.store = doc["store"].get<std::string>();
  else
    throw UsageError("no store: give --store URL or set FLOODWALL_STORE (like redis://localhost:6379)");
  if (cl.store.rfind("memory:", 0) == 0)
    throw UsageError(
        "--store: memory:// is one process's own store: the floodwall command reaches a shared one "
        "(redis://, rediss://, redis+cluster://, redis+sentinel://, shm://NAME)");
  doc["store"] = cl.store;
  if (a.prefix) doc["prefix"] = *a.prefix;
  int rc = fw_client_new(&cl.c, doc.dump().c_str());
  if (rc != FW_OK) {
    const fw_error *e = fw_error_last();
    std::string m = e ? e->message : "cannot make a client";
    // The core names the policy's field; here the store and the prefix come from the command line.
    if (m.rfind("store:", 0) == 0 || m.rfind("prefix:", 0) == 0) m = "--" + m;
    throw UsageError(m);
  }
}

std::string tenant_of(const Args &a, const std::string &word) {
  if (!a.api_key) {
    if (word.empty()) throw UsageError("TENANT: must not be empty");
    return word;
  }
  size_t b = word.find_first_not_of(" \t"), e = word.find_last_not_of(" \t");
  if (b == std::string::npos) throw UsageError("--api-key: the key must not be empty");
  return floodwall::credential_key(std::string_view(word).substr(b, e - b + 1));
}

json parsed(fw_buf &b) {
  json j = json::parse(b.ptr ? std::string_view(b.ptr, b.size) : std::string_view("null"));
  fw_buf_dispose(&b);
  return j;
}

json show(fw_client *c, const std::string &tenant) {
  fw_buf b = FW_BUF_INIT;
  call(fw_admin_show(c, tenant.data(), tenant.size(), &b));
  return parsed(b);
}

// --------------------------------------------------------------------------------------- text output

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

// --------------------------------------------------------------------------------------- commands

void expect_operands(const std::vector<std::string> &w, size_t n, const CommandHelp &c) {
  if (w.size() < n) throw UsageError(std::string(c.name) + ": missing TENANT", c.name);
  if (w.size() > n) throw UsageError(std::string(c.name) + ": unexpected argument \"" + shown(w[n]) + "\"", c.name);
}

// Only the options a command takes: a --rate given to `block` is a mistake said, never ignored.
void only_options(const Args &a, const CommandHelp &c, bool rate_tier, bool for_, bool api_key) {
  auto refuse = [&](const char *opt) { throw UsageError(std::string(opt) + ": not an option of " + c.name, c.name); };
  if (!rate_tier && a.rate) refuse("--rate");
  if (!rate_tier && a.burst) refuse("--burst");
  if (!rate_tier && a.tier) refuse("--tier");
  if (!for_ && a.for_) refuse("--for");
  if (!api_key && a.api_key) refuse("--api-key");
}

int run_check(const Args &a, std::string &out) {
  if (!a.policy) throw UsageError("check: needs --policy FILE", "check");
  std::string text = read_file(*a.policy);
  std::vector<floodwall::PolicyError> errors = floodwall::policy_errors(text);
  if (a.json) {
    json errs = json::array();
    for (const auto &e : errors) {
      std::string m = e.what(), prefix = e.field() + ": ";
      errs.push_back({{"path", e.field()}, {"message", m.rfind(prefix, 0) == 0 ? m.substr(prefix.size()) : m}});
    }
    out += json{{"file", *a.policy}, {"valid", errors.empty()}, {"errors", errs}}.dump(2) + "\n";
  } else if (errors.empty()) {
    out += *a.policy + ": valid\n";
  } else {
    for (const auto &e : errors) out += *a.policy + ": " + e.what() + "\n";
    out += std::to_string(errors.size()) + (errors.size() == 1 ? " error\n" : " errors\n");
  }
  return errors.empty() ? kDone : kFailed;
}

int run_command(const Args &a, std::string &out) {
  const std::vector<std::string> &w = a.words;
  std::string name = w[0];
  size_t first_operand = 1;
  if (name == "override" || name == "tenant") {
    if (w.size() < 2) throw UsageError(name + ": missing COMMAND", name);
    name += " " + w[1];
    first_operand = 2;
    if (!find_command(name)) throw UsageError(w[0] + ": unknown command \"" + shown(w[1]) + "\"", w[0]);
  }
  const CommandHelp *c = find_command(name);
  if (!c) throw UsageError("unknown command \"" + shown(name) + "\"");
  std::vector<std::string> ops(w.begin() + static_cast<long>(first_operand), w.end());

  if (name == "check") {
    only_options(a, *c, false, false, false);
    expect_operands(ops, 0, *c);
    return run_check(a, out);
  }
  // Every argument is checked before the store is reached.
  std::string tenant;
  double rate = 0, burst = 0, seconds = 0;
  fw_limiter limiter = FW_LIMITER_NONE;
  int mode = -1;
  bool takes_tenant = name != "status" && name != "mode" && name != "override list";
  only_options(a, *c, name == "override set", name == "block", takes_tenant);
  if (takes_tenant) {
    expect_operands(ops, 1, *c);
    tenant = tenant_of(a, ops[0]);
  } else if (name == "mode") {
    if (ops.size() != 2)
      throw UsageError(
          ops.size() < 2 ? "mode: needs LIMITER and MODE" : "mode: unexpected argument \"" + shown(ops[2]) + "\"",
          "mode");
    if (fw_limiter_from_name(&limiter, ops[0].c_str()) != FW_OK)
      throw UsageError("LIMITER: unknown limiter \"" + shown(ops[0]) +
                           "\" (request_rate, concurrency, fleet, utilization, adaptive)",
                       "mode");
    fw_mode m;
    if (ops[1] == "default")
      mode = -1;
    else if (fw_mode_from_name(&m, ops[1].c_str()) == FW_OK)
      mode = m;
    else
      throw UsageError("MODE: unknown mode \"" + shown(ops[1]) + "\" (enforce, dark, off, default)", "mode");
  } else {
    expect_operands(ops, 0, *c);
  }
  if (name == "override set") {
    if (a.tier && (a.rate || a.burst)) throw UsageError("override set: --tier or --rate with --burst, not both", name);
    if (!a.tier && !(a.rate && a.burst))
      throw UsageError(std::string("override set: needs ") + (a.rate    ? "--burst B"
                                                              : a.burst ? "--rate R"
                                                                        : "--rate R --burst B, or --tier NAME"),
                       name);
    if (a.rate) rate = positive_number("--rate", *a.rate, "a positive number of tokens per second", c->name);
    if (a.burst) burst = positive_number("--burst", *a.burst, "a positive whole number of tokens", c->name);
    if (a.burst && burst != std::floor(burst))
      throw UsageError("--burst: must be a positive whole number of tokens (got \"" + shown(*a.burst) + "\")", name);
    if (a.tier && a.tier->empty()) throw UsageError("--tier: must name a tier (override rm takes one away)", name);
  }
  if (name == "block" && a.for_) seconds = parse_duration(*a.for_);

  Client cl;
  open_client(a, cl);
  fw_client *fc = cl.c;
  if (name == "status") {
    fw_buf b = FW_BUF_INIT;
    call(fw_admin_status(fc, &b));
    json s = parsed(b);
    out += a.json ? s.dump(2) + "\n" : status_text(s);
    return kDone;
  }
  if (name == "mode") {
    int network = 0;  // an in-process store (shm://; memory:// was refused) keeps each process's own modes
    call(fw_client_can_block(fc, &network));
    if (!network)
      throw CommandError(
          "mode: shm:// keeps no fleet-wide mode (each process's own applies: its policy, "
          "fw_set_mode); a Redis store carries one",
          false);
    call(fw_admin_set_mode(fc, limiter, mode));
    std::string m = mode < 0 ? "default" : fw_mode_name(static_cast<fw_mode>(mode));
    if (a.json)
      out += json{{"limiter", fw_limiter_name(limiter)}, {"mode", mode < 0 ? json(nullptr) : json(m)}}.dump(2) + "\n";
    else
      out += std::string(fw_limiter_name(limiter)) + ": " +
             (mode < 0 ? "no fleet-wide mode (each process's policy decides)" : m + " fleet-wide") +
             ", at every client's next flags poll\n";
    return kDone;
  }
  if (name == "override list") {
    fw_buf b = FW_BUF_INIT;
    call(fw_admin_list(fc, 100000, &b));
    json all = parsed(b), list = json::array();
    for (const json &e : all)
      if (!e["tier"].is_null() || !e["override"].is_null()) list.push_back(e);
    if (a.json) {
      out += list.dump(2) + "\n";
    } else if (list.empty()) {
      out += "no tenant has an override or a tier\n";
    } else {
      for (const json &e : list) out += row(e["tenant"].get<std::string>(), override_text(e));
    }
    return kDone;
  }
  if (name == "tenant show") {
    json t = show(fc, tenant);
    out += a.json ? t.dump(2) + "\n" : tenant_text(t);
    if (!a.json && !a.policy)
      out += "(--policy FILE shows its bucket, slots, limits and quotas as the fleet's policy sets them)\n";
    return kDone;
  }
  std::string said;
  if (name == "override set") {
    if (a.tier) {
      int rc = fw_admin_set_tier(fc, tenant.data(), tenant.size(), a.tier->c_str());
      if (rc == FW_EINVAL && !a.policy) {
        const fw_error *e = fw_error_last();
        throw CommandError(std::string(e ? e->message : "tier: unknown") + ": --policy FILE names the fleet's tiers",
                           true);
      }
      call(rc);
      said = "tier " + *a.tier;
    } else {
      call(fw_admin_set_override(fc, tenant.data(), tenant.size(), rate, burst));
      said = "its own bucket";
    }
  } else if (name == "override rm") {
    call(fw_admin_remove_override(fc, tenant.data(), tenant.size()));
    call(fw_admin_set_tier(fc, tenant.data(), tenant.size(), ""));
    said = "no override and no tier (the policy's bucket)";
  } else if (name == "block") {
    call(fw_admin_block(fc, tenant.data(), tenant.size(), seconds));
    said = "blocked";
  } else if (name == "unblock") {
    call(fw_admin_unblock(fc, tenant.data(), tenant.size()));
    said = "unblocked";
  } else if (name == "tenant reset") {
    call(fw_admin_reset(fc, tenant.data(), tenant.size()));
    said = "reset: its buckets and quotas are full again";
  }
  // The tenant as the store holds it after the change: what every client's next request of it sees.
  json t = show(fc, tenant);
  if (a.json) {
    out += t.dump(2) + "\n";
  } else {
    if (name == "override set") said = "now " + override_text(t);
    if (name == "block") said += ", " + block_text(t) + " (403)";
    out += t["tenant"].get<std::string>() + ": " + said + ", from its next request\n";
  }
  return kDone;
}

}  // namespace

int run(int argc, const char *const *argv, std::string &out, std::string &err) {
  std::string usage_of;
  try {
    Args a = parse_args(argc, argv);
    if (a.version) {
      out += std::string("floodwall ") + fw_version() + "\n";
      return kDone;
    }
    if (a.words.empty() || a.words[0] == "help") {
      std::vector<std::string> rest =
          a.words.empty() ? a.words : std::vector<std::string>(a.words.begin() + 1, a.words.end());
      if (rest.empty()) {
        if (a.help || !a.words.empty()) {
          out += general_help();
          return kDone;
        }
        err += general_help();
        return kUsage;
      }
      a.words = rest;
      a.help = true;
    }
    if (a.help) {
      std::string name = a.words[0];
      if ((name == "override" || name == "tenant") && a.words.size() >= 2) name += " " + a.words[1];
      if (const CommandHelp *c = find_command(name)) {
        out += command_help(*c);
        return kDone;
      }
      if (name == "override" || name == "tenant") {
        out += group_help(name);
        return kDone;
      }
      throw UsageError("unknown command \"" + shown(a.words[0]) + "\"");
    }
    return run_command(a, out);
  } catch (const UsageError &e) {
    err += std::string("floodwall: ") + e.what() + "\n";
    const CommandHelp *c = find_command(e.command);
    if (c)
      err += std::string("Usage: floodwall ") + c->usage + "\nRun 'floodwall " + c->name + " --help' for more.\n";
    else if (e.command == "override" || e.command == "tenant")
      err += group_help(e.command);
    else
      err += "Run 'floodwall --help' for the commands.\n";
    return kUsage;
  } catch (const CommandError &e) {
    err += std::string("floodwall: ") + e.what() + "\n";
    return e.usage ? kUsage : kFailed;
  } catch (const std::exception &e) {
    err += std::string("floodwall: ") + e.what() + "\n";
    return kFailed;
  }
}

}  // namespace fw_cli
