// ds-cli subcommands register themselves here (one file per subcommand in src/tools/),
// so adding a subcommand never edits the dispatcher.
//
// A subcommand returns a Status and prints nothing on failure; the dispatcher prints
// "ds-cli <command>: <message>" on stderr and exits with one of the codes below. A malformed
// command line is a StatusCode::kInvalidArgument (Status::invalid_argument); every other
// failure is a plain Status::error.
#pragma once
#include <string>
#include <vector>

#include "ds/status.h"

namespace ds::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  // explained on stderr
inline constexpr int kExitUsage = 2;    // bad command line, explained on stderr

using CommandFn = Status (*)(const std::vector<std::string>& args);  // args exclude "ds-cli <name>"

struct Command {
  const char* name;
  const char* summary;  // one line for `ds-cli --help`
  CommandFn fn;
};

bool register_command(Command cmd);
const std::vector<Command>& commands();

}  // namespace ds::cli

// At namespace scope in a subcommand's .cpp: DS_CLI_COMMAND(inspect, "summary", cmd_inspect);
#define DS_CLI_COMMAND(name, summary, fn) \
  static const bool ds_cli_registered_##name = ::ds::cli::register_command({#name, summary, fn})
