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

#include <exception>
#include <string>
#include <vector>

#include "cli/cli_internal.hpp"
#include "floodwall.h"

namespace fw_cli {

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
