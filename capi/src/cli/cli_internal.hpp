// What the files of the floodwall command share (cli.hpp is its interface, fw_cli::run): the command table's
// entries, the parsed command line, the errors that end a command, and each file's steps.
//   cli.cpp       fw_cli::run: help, the command, and the exit status of each error
//   help.cpp      the command table's help: usage lines, summaries, the general and a group's help
//   args.cpp      the command line parsed, and the checks of its options and operands
//   commands.cpp  each command: its arguments checked, then its admin calls through a client
//   output.cpp    the text a person reads (--json prints the documents themselves)
//   top.cpp       floodwall top: the fleet view from the clients' summaries
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

struct fw_client;  // floodwall.h

namespace fw_cli {

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

// ------------------------------------------------------------------------------------------ help.cpp

struct CommandHelp {
  const char *name;     // "override set"
  const char *usage;    // after "Usage: floodwall "
  const char *summary;  // one line, for the command list
  const char *text;     // the rest of its help: description, options, examples
};
const CommandHelp *find_command(const std::string &name);
std::string general_help();
std::string command_help(const CommandHelp &c);
// The words of a group ("override", "tenant") that name a command.
std::string group_help(const std::string &group);

// ------------------------------------------------------------------------------------------ args.cpp

struct Args {
  std::optional<std::string> store, prefix, policy, rate, burst, tier, for_, interval;
  bool json = false, api_key = false, help = false, version = false, once = false;
  std::vector<std::string> words;  // the command's words and operands, in order
};

// What a shown value may contain: an argument echoed back never carries a control character to a terminal.
std::string shown(std::string_view s);
Args parse_args(int argc, const char *const *argv);
double positive_number(const std::string &opt, const std::string &v, const char *what, const char *cmd);
// "90", "90s", "15m", "2h", "1d", "1w", "1h30m", "1.5h", "250ms": seconds, more than 0, at most ten years.
double parse_duration(const std::string &v);
void expect_operands(const std::vector<std::string> &w, size_t n, const CommandHelp &c);
// Only the options a command takes: a --rate given to `block` is a mistake said, never ignored.
void only_options(const Args &a, const CommandHelp &c, bool rate_tier, bool for_, bool api_key);

// ------------------------------------------------------------------------------------------ commands.cpp

// The command a.words name, its arguments checked before the store is reached, run; its exit status.
int run_command(const Args &a, std::string &out);

// ------------------------------------------------------------------------------------------ output.cpp

std::string num(const json &v);
std::string override_text(const json &e);
std::string block_text(const json &e);
std::string row(const std::string &label, const std::string &value);
std::string tenant_text(const json &t);
std::string status_text(const json &s);

// ------------------------------------------------------------------------------------------ top.cpp

// The clients' summaries (fw_admin_clients; throws CommandError), one row of each, the fleet as a whole.
json read_clients(::fw_client *fc);
json client_row(const json &summary);
json fleet_view(const json &summaries);
std::string clients_text(const json &rows);
// floodwall top: live every interval_s until interrupted, or once (--once) into out. `store`: redacted.
int run_top(const Args &a, double interval_s, ::fw_client *fc, const std::string &store, std::string &out);

}  // namespace fw_cli
