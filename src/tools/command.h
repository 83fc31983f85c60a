// ds-cli subcommands register themselves here (one file per subcommand in src/tools/),
// so adding a subcommand never edits the dispatcher.
#pragma once
#include <string>
#include <vector>

namespace ds::cli {

using CommandFn = int (*)(const std::vector<std::string>& args);  // args exclude "ds-cli <name>"

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
