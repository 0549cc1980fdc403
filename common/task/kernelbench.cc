#include "common/task/kernelbench.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include "common/status.h"
#include "common/task/task_loader.h"

namespace kevo::task {
namespace {

namespace fs = std::filesystem;

// The definitions a KernelBench problem must have, each at the start of a
// line: what KernelBench's own harness imports from the file.
struct Definition {
  const char* name;
  const char* pattern;
};
constexpr Definition kDefinitions[] = {
    {"class Model", R"((^|\n)class[ \t]+Model[ \t]*[(:])"},
    {"def get_inputs()", R"((^|\n)def[ \t]+get_inputs[ \t]*\()"},
    {"def get_init_inputs()", R"((^|\n)def[ \t]+get_init_inputs[ \t]*\()"},
};

std::vector<std::string> MissingDefinitions(std::string_view source) {
  std::vector<std::string> missing;
  const std::string text(source);
  for (const Definition& d : kDefinitions) {
    if (!std::regex_search(text, std::regex(d.pattern))) missing.push_back(d.name);
  }
  return missing;
}

bool IsPythonFile(const fs::path& p) { return p.extension() == ".py"; }

absl::StatusOr<std::string> ReadText(const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    return absl::NotFoundError(absl::StrCat("KernelBench problem '", path.string(), "' does not exist"));
  }
  if (!fs::is_regular_file(path, ec)) {
    return absl::FailedPreconditionError(
        absl::StrCat("KernelBench problem '", path.string(), "' is not a regular file"));
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  if (!in || in.bad()) return absl::UnknownError(absl::StrCat("cannot read '", path.string(), "'"));
  return out.str();
}

}  // namespace

bool LooksLikeKernelBench(std::string_view source) { return MissingDefinitions(source).empty(); }

absl::StatusOr<v1::Task> KernelBenchTask(const std::string& path, const std::string& source) {
  const std::vector<std::string> missing = MissingDefinitions(source);
  if (!missing.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a KernelBench problem: it defines no ", absl::StrJoin(missing, ", no "),
                     " (a problem defines class Model(nn.Module), get_inputs() and get_init_inputs(), each "
                     "at the start of a line)"));
  }
  v1::Task task;
  const fs::path p(path);
  task.set_name(p.stem().string());
  task.set_op_family(kKernelBenchFamily);
  task.set_format(v1::TASK_FORMAT_KERNELBENCH);
  task.set_description(absl::StrCat("KernelBench problem ", p.filename().string(),
                                    ": make ModelNew compute what Model computes, faster"));
  task.set_seeds(kDefaultSeeds);
  v1::Reference* ref = task.mutable_reference();
  ref->set_language(kPythonLanguage);
  ref->set_file(p.filename().string());
  ref->set_source(source);
  // One "binding": the shapes get_inputs() returns, validated and timed.
  task.add_validate()->set_name(kKernelBenchBinding);
  task.mutable_time()->set_name(kKernelBenchBinding);
  return task;
}

absl::StatusOr<v1::Task> LoadKernelBenchFile(const std::string& path) {
  KEVO_ASSIGN_OR_RETURN(std::string source, ReadText(path));
  return KernelBenchTask(path, source);
}

absl::Status ValidateKernelBenchTask(const v1::Task& task) {
  auto error = [](const std::string& what) { return absl::InvalidArgumentError(absl::StrCat("task: ", what)); };
  if (task.format() != v1::TASK_FORMAT_KERNELBENCH) return error("format is not KernelBench");
  if (task.name().empty()) return error("field 'name' is missing");
  if (task.reference().language() != kPythonLanguage) {
    return error(absl::StrCat("reference language '", task.reference().language(),
                              "': KernelBench tasks carry their Python source (\"python\")"));
  }
  const std::vector<std::string> missing = MissingDefinitions(task.reference().source());
  if (!missing.empty()) {
    return error(absl::StrCat("the reference source defines no ", absl::StrJoin(missing, ", no ")));
  }
  if (task.seeds() != 0 && task.seeds() < kDefaultSeeds) {
    return error(absl::StrCat("seeds is ", task.seeds(), "; it must be at least ", kDefaultSeeds));
  }
  return absl::OkStatus();
}

absl::Status ValidateReceivedTask(const v1::Task& task, const TaskLimits& limits) {
  if (task.format() == v1::TASK_FORMAT_KERNELBENCH) return ValidateKernelBenchTask(task);
  KEVO_RETURN_IF_ERROR(ValidateTask(task, TaskSource{}, limits));
  if (task.reference().source().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "task: the reference '", task.reference().file(),
        "' has no source: send the task as LoadTaskDir or `kevo task export` gives it, reference read in"));
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::Task> LoadTaskPath(const std::string& path) {
  std::error_code ec;
  if (IsPythonFile(path) && !fs::is_directory(path, ec)) return LoadKernelBenchFile(path);
  return LoadTaskDir(path);
}

absl::StatusOr<std::vector<std::string>> FindTaskPaths(const std::string& path) {
  std::error_code ec;
  const fs::path base(path);
  if (!fs::exists(base, ec)) return absl::NotFoundError(absl::StrCat("'", path, "' does not exist"));
  if (!fs::is_directory(base, ec)) {
    if (IsPythonFile(base)) return std::vector<std::string>{path};
    return absl::FailedPreconditionError(
        absl::StrCat("'", path, "' is neither a task folder nor a KernelBench .py file"));
  }
  if (fs::is_regular_file(base / kTaskFileName, ec)) return std::vector<std::string>{path};
  std::vector<std::string> out;
  fs::recursive_directory_iterator it(base, fs::directory_options::skip_permission_denied, ec);
  if (ec) return absl::UnknownError(absl::StrCat("cannot list '", path, "': ", ec.message()));
  for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) return absl::UnknownError(absl::StrCat("cannot list '", path, "': ", ec.message()));
    if (it->is_directory(ec)) {
      if (fs::is_regular_file(it->path() / kTaskFileName, ec)) {
        out.push_back(it->path().string());
        it.disable_recursion_pending();
      }
      continue;
    }
    if (!IsPythonFile(it->path()) || !it->is_regular_file(ec)) continue;
    auto text = ReadText(it->path());
    if (text.ok() && LooksLikeKernelBench(*text)) out.push_back(it->path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace kevo::task
