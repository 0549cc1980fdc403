// kevo task export TASK: the task as the CLI sends it to a coordinator (a
// native task folder or a KernelBench .py, loaded and checked by
// task::LoadTaskPath), serialized as a kevo.v1.Task, for clients in other
// languages (clients/python) that must not re-implement the loader.
#include <unistd.h>

#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "cli/flags.h"
#include "google/protobuf/text_format.h"

#include "common/task/kernelbench.h"

namespace kevo::cli {

int TaskCommand(const std::vector<std::string>& argv) {
  constexpr char kUsage[] =
      "usage: kevo task export TASK_DIR|PROBLEM.py [--text]\n"
      "Writes the loaded task as a binary kevo.v1.Task on stdout (--text: text format).\n";
  auto args = ParseArgs(argv, {}, {"text", "help"});
  if (!args.ok() || args->Has("help") || args->positional.size() != 2 || args->positional[0] != "export") {
    if (!args.ok()) std::fprintf(stderr, "kevo task: %s\n", std::string(args.status().message()).c_str());
    std::fputs(kUsage, args.ok() && args->Has("help") ? stdout : stderr);
    return args.ok() && args->Has("help") ? 0 : 2;
  }
  auto task = task::LoadTaskPath(args->positional[1]);
  if (!task.ok()) {
    std::fprintf(stderr, "kevo task: %s\n", std::string(task.status().message()).c_str());
    return 1;
  }
  std::string out;
  if (args->Has("text")) {
    google::protobuf::TextFormat::PrintToString(*task, &out);
  } else if (isatty(STDOUT_FILENO)) {
    std::fprintf(stderr, "kevo task export: stdout is a terminal; redirect it, or pass --text\n");
    return 2;
  } else {
    out = task->SerializeAsString();
  }
  return std::fwrite(out.data(), 1, out.size(), stdout) == out.size() ? 0 : 1;
}

}  // namespace kevo::cli
