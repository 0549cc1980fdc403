// Loading KernelBench-format problems, and loading any task by path.
//
// A KernelBench problem is one Python file that defines `class Model(...)`
// (an nn.Module), `def get_inputs()` and `def get_init_inputs()`. Loading it
// gives a v1::Task with format TASK_FORMAT_KERNELBENCH, the file's stem as
// name ("19_ReLU" for level1/19_ReLU.py), op_family "kernelbench", and the
// whole Python source in reference (language "python"), so the task travels
// to workers as one message like a native one. The loader only checks that
// the three definitions are there (at the start of a line, as KernelBench
// writes them); it never runs Python. docs/kernelbench.md describes the format.
//
// LoadTaskPath and FindTaskPaths accept either kind of task, so that every
// command taking a task (kevo eval, kevo run, kevo suite) can take both.
//
// All functions are thread-safe (they share no state).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "common/task/task_loader.h"
#include "kevo/v1/task.pb.h"

namespace kevo::task {

// Language of a KernelBench task's reference and of its candidates.
inline constexpr char kPythonLanguage[] = "python";
// op_family given to KernelBench tasks (the file says nothing about it).
inline constexpr char kKernelBenchFamily[] = "kernelbench";
// Name of the single "binding" a KernelBench task has: its get_inputs().
inline constexpr char kKernelBenchBinding[] = "get_inputs";

// Whether `source` defines class Model, get_inputs and get_init_inputs at the
// start of a line.
bool LooksLikeKernelBench(std::string_view source);

// Builds the task for a KernelBench problem whose text is `source`, read from
// `path` (its stem names the task). Returns InvalidArgument naming `path` and
// the missing definition(s) when the source is not a KernelBench problem.
absl::StatusOr<v1::Task> KernelBenchTask(const std::string& path, const std::string& source);

// Reads and checks the KernelBench problem file `path` (KernelBenchTask).
// NotFound when it does not exist; FailedPrecondition when it is a folder;
// InvalidArgument when it is not a KernelBench problem.
absl::StatusOr<v1::Task> LoadKernelBenchFile(const std::string& path);

// Checks a KernelBench task that arrived over the wire: format, name, Python
// reference with the three definitions, seeds (0 or >= 3), tolerances.
// InvalidArgument ("task: ...") for the first problem.
absl::Status ValidateKernelBenchTask(const v1::Task& task);

// Checks a task of either kind that arrived over the wire, before anything is
// queued for it (the coordinator calls it for EvaluateCandidate, SubmitJob and
// every task of SubmitCampaign): a KernelBench task with
// ValidateKernelBenchTask; a native one with ValidateTask under `limits` (so
// no shape overflows and every binding, time_on ones included, fits) and a
// reference whose source the loader read. InvalidArgument ("task: ...") for
// the first problem.
absl::Status ValidateReceivedTask(const v1::Task& task, const TaskLimits& limits = {});

// Loads one task from `path`: a .py file is a KernelBench problem, a folder is
// a native task folder (LoadTaskDir). Errors as those two functions give.
absl::StatusOr<v1::Task> LoadTaskPath(const std::string& path);

// The tasks under `path`, sorted: `path` itself when it is a .py file or a
// native task folder; else every native task folder below it (not searched
// further) and every .py file below it that LooksLikeKernelBench (other
// Python files, e.g. a KernelBench checkout's scripts or kevo candidates, are
// skipped). NotFound when `path` does not exist; an empty list when it holds
// no task.
absl::StatusOr<std::vector<std::string>> FindTaskPaths(const std::string& path);

}  // namespace kevo::task
