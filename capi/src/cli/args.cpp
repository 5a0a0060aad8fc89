// The floodwall command's arguments: options before or after the command's words (--name VALUE or
// --name=VALUE, "--" ends them), and the checks of their values; each error names the argument.
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <map>

#include "cli/cli_internal.hpp"

namespace fw_cli {

std::string shown(std::string_view s) {
  std::string out;
  for (unsigned char c : s.substr(0, 64)) out += c < 0x20 || c == 0x7f ? '?' : static_cast<char>(c);
  return s.size() > 64 ? out + "..." : out;
}

Args parse_args(int argc, const char *const *argv) {
  Args a;
  const std::map<std::string, std::optional<std::string> Args::*> valued = {
      {"--store", &Args::store}, {"--prefix", &Args::prefix},    {"--policy", &Args::policy},
      {"--rate", &Args::rate},   {"--burst", &Args::burst},      {"--tier", &Args::tier},
      {"--for", &Args::for_},    {"--interval", &Args::interval}};
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
    if (arg == "--once") {
      a.once = true;
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

void expect_operands(const std::vector<std::string> &w, size_t n, const CommandHelp &c) {
  if (w.size() < n) throw UsageError(std::string(c.name) + ": missing TENANT", c.name);
  if (w.size() > n) throw UsageError(std::string(c.name) + ": unexpected argument \"" + shown(w[n]) + "\"", c.name);
}

void only_options(const Args &a, const CommandHelp &c, bool rate_tier, bool for_, bool api_key) {
  auto refuse = [&](const char *opt) { throw UsageError(std::string(opt) + ": not an option of " + c.name, c.name); };
  if (!rate_tier && a.rate) refuse("--rate");
  if (!rate_tier && a.burst) refuse("--burst");
  if (!rate_tier && a.tier) refuse("--tier");
  if (!for_ && a.for_) refuse("--for");
  if (!api_key && a.api_key) refuse("--api-key");
  if (std::string(c.name) != "top" && a.interval) refuse("--interval");
  if (std::string(c.name) != "top" && a.once) refuse("--once");
}

}  // namespace fw_cli
