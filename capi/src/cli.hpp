// The floodwall command (README, "The floodwall command"), behind fw_cli_run: the executable
// (capi/src/floodwall_main.c), the pip console script and the npm bin all run this one implementation.
#pragma once

#include <string>

namespace fw_cli {

// Runs the command line argv[0..argc) (argv[0] is the program's name) and returns its exit status: 0 done,
// 1 the command failed (the store could not be reached, a policy has errors), 2 a usage error (the message
// names the argument). What it prints goes to `out` (standard output) and `err` (standard error).
int run(int argc, const char *const *argv, std::string &out, std::string &err);

}  // namespace fw_cli
