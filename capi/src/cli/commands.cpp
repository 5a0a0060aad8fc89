// The floodwall command's commands: the table of what each takes and does, its arguments checked before the
// store is reached, then its admin calls through a client of the store (the C ABI's fw_admin_*).
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "cli/cli_internal.hpp"
#include "floodwall.h"
#include "policy/policy.hpp"
#include "policy/request_tenant.hpp"

namespace fw_cli {

namespace {

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
  doc["summary"] = {{"period_s", 0}};  // the command's own client is no member of the fleet view
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

// --------------------------------------------------------------------------------------- the commands

// A command's arguments, every one checked before the store is reached.
struct Checked {
  const CommandHelp *help = nullptr;
  std::vector<std::string> operands;
  std::string tenant;
  double rate = 0, burst = 0, seconds = 0;
  fw_limiter limiter = FW_LIMITER_NONE;
  int mode = -1;  // -1: default (no fleet-wide mode)
};

void check_mode(const Args &, Checked &k) {
  const std::vector<std::string> &ops = k.operands;
  if (ops.size() != 2)
    throw UsageError(
        ops.size() < 2 ? "mode: needs LIMITER and MODE" : "mode: unexpected argument \"" + shown(ops[2]) + "\"",
        "mode");
  if (fw_limiter_from_name(&k.limiter, ops[0].c_str()) != FW_OK)
    throw UsageError(
        "LIMITER: unknown limiter \"" + shown(ops[0]) + "\" (request_rate, concurrency, fleet, utilization, adaptive)",
        "mode");
  fw_mode m;
  if (ops[1] == "default")
    k.mode = -1;
  else if (fw_mode_from_name(&m, ops[1].c_str()) == FW_OK)
    k.mode = m;
  else
    throw UsageError("MODE: unknown mode \"" + shown(ops[1]) + "\" (enforce, dark, off, default)", "mode");
}

void check_override_set(const Args &a, Checked &k) {
  const std::string name = k.help->name;
  if (a.tier && (a.rate || a.burst)) throw UsageError("override set: --tier or --rate with --burst, not both", name);
  if (!a.tier && !(a.rate && a.burst))
    throw UsageError(std::string("override set: needs ") + (a.rate    ? "--burst B"
                                                            : a.burst ? "--rate R"
                                                                      : "--rate R --burst B, or --tier NAME"),
                     name);
  if (a.rate) k.rate = positive_number("--rate", *a.rate, "a positive number of tokens per second", k.help->name);
  if (a.burst) k.burst = positive_number("--burst", *a.burst, "a positive whole number of tokens", k.help->name);
  if (a.burst && k.burst != std::floor(k.burst))
    throw UsageError("--burst: must be a positive whole number of tokens (got \"" + shown(*a.burst) + "\")", name);
  if (a.tier && a.tier->empty()) throw UsageError("--tier: must name a tier (override rm takes one away)", name);
}

void check_block(const Args &a, Checked &k) {
  if (a.for_) k.seconds = parse_duration(*a.for_);
}

int run_status(const Args &a, const Checked &, fw_client *fc, std::string &out) {
  fw_buf b = FW_BUF_INIT;
  call(fw_admin_status(fc, &b));
  json s = parsed(b);
  json rows = json::array();
  for (const json &c : read_clients(fc)) rows.push_back(client_row(c));
  s["clients"] = rows;
  out += a.json ? s.dump(2) + "\n"
                : status_text(s) + "\n" +
                      (rows.empty() ? "no clients (none has written a summary)\n" : clients_text(rows));
  return kDone;
}

void check_top(const Args &a, Checked &k) {
  k.seconds = a.interval ? positive_number("--interval", *a.interval, "a positive number of seconds", "top") : 2;
  if (k.seconds > 3600) throw UsageError("--interval: must be at most 3600 seconds", "top");
}

int run_top_view(const Args &a, const Checked &k, fw_client *fc, std::string &out) {
  fw_buf b = FW_BUF_INIT;
  call(fw_admin_status(fc, &b));  // the store named (redacted), and reached: unreachable exits 1 naming it
  json s = parsed(b);
  return run_top(a, k.seconds, fc, s["store"].get<std::string>(), out);
}

int run_mode(const Args &a, const Checked &k, fw_client *fc, std::string &out) {
  int network = 0;  // an in-process store (shm://; memory:// was refused) keeps each process's own modes
  call(fw_client_can_block(fc, &network));
  if (!network)
    throw CommandError(
        "mode: shm:// keeps no fleet-wide mode (each process's own applies: its policy, "
        "fw_set_mode); a Redis store carries one",
        false);
  call(fw_admin_set_mode(fc, k.limiter, k.mode));
  std::string m = k.mode < 0 ? "default" : fw_mode_name(static_cast<fw_mode>(k.mode));
  if (a.json)
    out += json{{"limiter", fw_limiter_name(k.limiter)}, {"mode", k.mode < 0 ? json(nullptr) : json(m)}}.dump(2) + "\n";
  else
    out += std::string(fw_limiter_name(k.limiter)) + ": " +
           (k.mode < 0 ? "no fleet-wide mode (each process's policy decides)" : m + " fleet-wide") +
           ", at every client's next flags poll\n";
  return kDone;
}

int run_override_list(const Args &a, const Checked &, fw_client *fc, std::string &out) {
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

int run_tenant_show(const Args &a, const Checked &k, fw_client *fc, std::string &out) {
  json t = show(fc, k.tenant);
  out += a.json ? t.dump(2) + "\n" : tenant_text(t);
  if (!a.json && !a.policy)
    out += "(--policy FILE shows its bucket, slots, limits and quotas as the fleet's policy sets them)\n";
  return kDone;
}

// A change to one tenant: the tenant as the store holds it after the change, what every client's next request
// of it sees; `said` is what the change did.
int changed(const Args &a, const Checked &k, fw_client *fc, std::string said, std::string &out) {
  json t = show(fc, k.tenant);
  if (a.json) {
    out += t.dump(2) + "\n";
  } else {
    const std::string name = k.help->name;
    if (name == "override set") said = "now " + override_text(t);
    if (name == "block") said += ", " + block_text(t) + " (403)";
    out += t["tenant"].get<std::string>() + ": " + said + ", from its next request\n";
  }
  return kDone;
}

int run_override_set(const Args &a, const Checked &k, fw_client *fc, std::string &out) {
  const std::string &tenant = k.tenant;
  if (!a.tier) {
    call(fw_admin_set_override(fc, tenant.data(), tenant.size(), k.rate, k.burst));
    return changed(a, k, fc, "its own bucket", out);
  }
  int rc = fw_admin_set_tier(fc, tenant.data(), tenant.size(), a.tier->c_str());
  if (rc == FW_EINVAL && !a.policy) {
    const fw_error *e = fw_error_last();
    throw CommandError(std::string(e ? e->message : "tier: unknown") + ": --policy FILE names the fleet's tiers", true);
  }
  call(rc);
  return changed(a, k, fc, "tier " + *a.tier, out);
}

int run_override_rm(const Args &a, const Checked &k, fw_client *fc, std::string &out) {
  call(fw_admin_remove_override(fc, k.tenant.data(), k.tenant.size()));
  call(fw_admin_set_tier(fc, k.tenant.data(), k.tenant.size(), ""));
  return changed(a, k, fc, "no override and no tier (the policy's bucket)", out);
}

int run_block(const Args &a, const Checked &k, fw_client *fc, std::string &out) {
  call(fw_admin_block(fc, k.tenant.data(), k.tenant.size(), k.seconds));
  return changed(a, k, fc, "blocked", out);
}

int run_unblock(const Args &a, const Checked &k, fw_client *fc, std::string &out) {
  call(fw_admin_unblock(fc, k.tenant.data(), k.tenant.size()));
  return changed(a, k, fc, "unblocked", out);
}

int run_tenant_reset(const Args &a, const Checked &k, fw_client *fc, std::string &out) {
  call(fw_admin_reset(fc, k.tenant.data(), k.tenant.size()));
  return changed(a, k, fc, "reset: its buckets and quotas are full again", out);
}

// The commands that reach the store: the options each takes beyond the general ones, the check of its own
// arguments, and what it does. (check reads a file only: run_check.)
enum class Operands : uint8_t { none, tenant, own };  // own: the command's check reads them
struct StoreCommand {
  const char *name;
  Operands operands;  // tenant: one, TENANT (and --api-key)
  bool rate_tier;     // --rate, --burst, --tier
  bool for_;          // --for
  void (*check)(const Args &, Checked &);
  int (*run)(const Args &, const Checked &, fw_client *, std::string &);
};

const StoreCommand kStoreCommands[] = {
    {"status", Operands::none, false, false, nullptr, run_status},
    {"top", Operands::none, false, false, check_top, run_top_view},
    {"mode", Operands::own, false, false, check_mode, run_mode},
    {"override set", Operands::tenant, true, false, check_override_set, run_override_set},
    {"override rm", Operands::tenant, false, false, nullptr, run_override_rm},
    {"override list", Operands::none, false, false, nullptr, run_override_list},
    {"block", Operands::tenant, false, true, check_block, run_block},
    {"unblock", Operands::tenant, false, false, nullptr, run_unblock},
    {"tenant show", Operands::tenant, false, false, nullptr, run_tenant_show},
    {"tenant reset", Operands::tenant, false, false, nullptr, run_tenant_reset},
};

// The command the words name, and its operands (the words after its name).
Checked resolve(const std::vector<std::string> &w) {
  std::string name = w[0];
  size_t first_operand = 1;
  if (name == "override" || name == "tenant") {
    if (w.size() < 2) throw UsageError(name + ": missing COMMAND", name);
    name += " " + w[1];
    first_operand = 2;
    if (!find_command(name)) throw UsageError(w[0] + ": unknown command \"" + shown(w[1]) + "\"", w[0]);
  }
  Checked k;
  k.help = find_command(name);
  if (!k.help) throw UsageError("unknown command \"" + shown(name) + "\"");
  k.operands.assign(w.begin() + static_cast<long>(first_operand), w.end());
  return k;
}

}  // namespace

int run_command(const Args &a, std::string &out) {
  Checked k = resolve(a.words);
  const std::string name = k.help->name;
  if (name == "check") {
    only_options(a, *k.help, false, false, false);
    expect_operands(k.operands, 0, *k.help);
    return run_check(a, out);
  }
  const StoreCommand *cmd = nullptr;
  for (const StoreCommand &s : kStoreCommands)
    if (name == s.name) cmd = &s;
  if (!cmd) throw UsageError("unknown command \"" + shown(name) + "\"");  // a command with help and no entry
  // Every argument is checked before the store is reached.
  only_options(a, *k.help, cmd->rate_tier, cmd->for_, cmd->operands == Operands::tenant);
  if (cmd->operands == Operands::tenant) {
    expect_operands(k.operands, 1, *k.help);
    k.tenant = tenant_of(a, k.operands[0]);
  } else if (cmd->operands == Operands::none) {
    expect_operands(k.operands, 0, *k.help);
  }
  if (cmd->check) cmd->check(a, k);
  Client cl;
  open_client(a, cl);
  return cmd->run(a, k, cl.c, out);
}

}  // namespace fw_cli
