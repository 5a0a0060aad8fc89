// The floodwall command's help: the command table (each command's usage line, summary and text), the general
// help and a group's.
#include "cli/cli_internal.hpp"

namespace fw_cli {

namespace {

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
     "  floodwall status --json | jq .modes\n"
     "It lists the clients whose summaries are live too (floodwall top shows them live).\n"},
    {"top", "top [--interval S] [--once] [--json]", "the whole fleet live: clients, decisions/s, refusals",
     "The fleet as its clients' summaries in the store show it, redrawn in place every --interval seconds\n"
     "(2 by default; Ctrl-C quits): the clients, decisions per second, refusals per second by limiter, the\n"
     "tenants refused most fleet-wide, the clients by version (a rolling upgrade shows two) and by language,\n"
     "the breakers open, and a row per client. Each client writes its summary every summary.period_s (policy;\n"
     "5 s by default) with a TTL of three periods: a process that dies disappears; the rates are each client's\n"
     "over its last period. A store with no clients says so (exit 0).\n\n"
     "Options:\n"
     "  --interval S     seconds between redraws (default 2)\n"
     "  --once           one view, then exit; with --json, one JSON document (fleet, clients)\n\n"
     "Examples:\n"
     "  floodwall --store redis://redis.internal:6379 top\n"
     "  floodwall top --once --json | jq .fleet.top_refused\n"},
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

}  // namespace

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

std::string group_help(const std::string &group) {
  std::string h = "Usage: floodwall " + group + " COMMAND\n\nCommands:\n";
  for (const CommandHelp &c : kCommands) {
    if (std::string(c.name).rfind(group + " ", 0) != 0) continue;
    std::string u = c.usage;
    h += "  " + u + (u.size() < 40 ? std::string(40 - u.size(), ' ') : "\n" + std::string(42, ' ')) + c.summary + "\n";
  }
  return h + "\n`floodwall " + group + " COMMAND --help` shows a command's help.\n";
}

}  // namespace fw_cli
