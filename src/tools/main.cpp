// ds-cli: one binary, many subcommands (inspect, quantize, synth, tokenize, eval, generate,
// bench, doctor). Each subcommand lives in its own file and registers itself (command.h);
// this file is the one place that turns a subcommand's Status into a message and an exit code.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "ds/version.h"
#include "tools/command.h"

namespace ds::cli {

static std::vector<Command>& registry() {
  static std::vector<Command> cmds;
  return cmds;
}

bool register_command(Command cmd) {
  registry().push_back(cmd);
  return true;
}

const std::vector<Command>& commands() {
  auto& r = registry();
  std::sort(r.begin(), r.end(), [](const Command& a, const Command& b) { return std::strcmp(a.name, b.name) < 0; });
  return r;
}

static void print_usage(FILE* out) {
  std::fprintf(out, "usage: ds-cli <command> [options]\n       ds-cli --version\n\ncommands:\n");
  for (const auto& c : commands()) std::fprintf(out, "  %-10s %s\n", c.name, c.summary);
  std::fprintf(out, "\n`ds-cli <command> --help` describes a command's options.\n");
}

// Prints a failed Status as "ds-cli <command>: <message>" and returns the exit code.
static int exit_code(const char* name, const Status& status) {
  if (status.is_ok()) return kExitOk;
  std::fprintf(stderr, "ds-cli %s: %s\n", name, status.message().c_str());
  if (status.code() != StatusCode::kInvalidArgument) return kExitFailure;
  std::fprintf(stderr, "`ds-cli %s --help` describes its options.\n", name);
  return kExitUsage;
}

}  // namespace ds::cli

int main(int argc, char** argv) {
  using namespace ds::cli;
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "help")) {
    print_usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? kExitUsage : kExitOk;
  }
  if (!std::strcmp(argv[1], "--version")) return std::printf("ds-cli %s\n", ds::kVersion), 0;
  for (const auto& c : commands()) {
    if (std::strcmp(c.name, argv[1]) == 0)
      return exit_code(c.name, c.fn(std::vector<std::string>(argv + 2, argv + argc)));
  }
  std::fprintf(stderr, "ds-cli: unknown command '%s'\n\n", argv[1]);
  print_usage(stderr);
  return kExitUsage;
}
