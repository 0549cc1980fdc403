// kevo: the command line. `kevo eval` and `kevo run` work embedded; the
// other commands talk to a coordinator.
#include <cstdio>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "common/log.h"

namespace {

constexpr char kUsage[] =
    "usage: kevo COMMAND [ARGS]\n"
    "commands:\n"
    "  eval TASK_DIR CANDIDATE_FILE   compile, validate and profile one candidate\n"
    "  workers                        list the workers connected to a coordinator\n"
    "Run `kevo COMMAND --help` for a command's flags.\n";

}  // namespace

int main(int argc, char** argv) {
  kevo::SetLogComponent("kevo");
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  std::string command = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  if (command == "eval") return kevo::cli::EvalCommand(args);
  if (command == "workers") return kevo::cli::WorkersCommand(args);
  std::fprintf(stderr, "kevo: unknown command '%s'\n%s", command.c_str(), kUsage);
  return 2;
}
