// Loading and checking native kevo tasks: a folder holding task.textproto
// (protobuf text format of kevo.v1.Task) and the C++ reference it names.
//
// Every error a user can cause by writing a task file is an absl::Status whose
// message starts with "<path>:<line>:<column>: " where the place is known (or
// "<path>: " where it is not) and then says what is wrong, e.g.
//   tasks/foo/task.textproto:12:5: unknown field 'shpe' in kevo.v1.TensorSpec
// Lines and columns are 1-based. docs/task-format.md lists the checks.
//
// All functions are thread-safe (they share no state).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "google/protobuf/text_format.h"

#include "kevo/v1/task.pb.h"

namespace kevo::task {

// The name of the file that makes a folder a task folder.
inline constexpr char kTaskFileName[] = "task.textproto";
// Seeds per validation binding when a task leaves `seeds` unset (0).
inline constexpr int kDefaultSeeds = 3;
// The naive MTIA baseline a task folder may hold (the mtia-sim platform's
// baseline), and the language of that reference.
inline constexpr char kMtiaReferenceFile[] = "reference_mtia.cc";
inline constexpr char kMtiaReferenceLanguage[] = "mtia-c++";
// The naive CUDA baseline a task folder may hold (the nvidia platform times
// candidates against it when the task has no cuBLAS baseline).
inline constexpr char kCudaReferenceFile[] = "reference.cu";
inline constexpr char kCudaReferenceLanguage[] = "cuda";
// The op families a task may name.
const std::vector<std::string>& KnownOpFamilies();
// The platforms a task's `time_on` may name.
const std::vector<std::string>& KnownPlatforms();

// What one binding of a task may ask a worker to hold (docs/task-format.md,
// "Size limits"): each tensor at most max_tensor_bytes, the inputs and
// outputs together at most max_binding_bytes, at every validate, time and
// time_on binding. A worker holds a binding's tensors more than once (the
// runner's copies, golden outputs, the baseline's outputs beside the
// candidate's), so these stay well below a worker's memory.
inline constexpr int64_t kDefaultMaxTensorBytes = int64_t{8} << 30;    // 8 GiB
inline constexpr int64_t kDefaultMaxBindingBytes = int64_t{16} << 30;  // 16 GiB
struct TaskLimits {
  int64_t max_tensor_bytes = kDefaultMaxTensorBytes;
  int64_t max_binding_bytes = kDefaultMaxBindingBytes;
};

// `task` as `platform` times it: its `time` replaced by the task's time_on
// binding for that platform when it has one (else unchanged).
v1::Task TimedOn(const v1::Task& task, const std::string& platform);

// Where a task's fields were written, so that ValidateTask can name the line.
// `tree` may be null (a task that arrived over the wire); `path` may be empty.
struct TaskSource {
  std::string path;
  const google::protobuf::TextFormat::ParseInfoTree* tree = nullptr;
};

// Reads DIR/task.textproto, fills in defaults (ApplyTaskDefaults), checks it
// with ValidateTask, and reads the reference file (task.reference().file,
// relative to DIR) into task.reference().source, and the extra references
// (each listed file, plus DIR/reference_mtia.cc as language "mtia-c++" and
// DIR/reference.cu as language "cuda" when they exist and none of that
// language is listed) into task.extra_references.
// Returns NotFound naming the path when DIR, its task.textproto or the
// reference file does not exist; InvalidArgument naming file, line, column
// and problem for a syntax error, an unknown field or enum value, or any
// semantic problem ValidateTask finds; FailedPrecondition when DIR is not a
// folder; Unknown naming the path for any other read failure.
absl::StatusOr<v1::Task> LoadTaskDir(const std::string& dir);

// Parses task text (the contents of a task.textproto) without touching the
// disk or validating. `path` is only used in error messages. When `tree` is
// not null it receives the locations of the parsed fields.
// Returns InvalidArgument "<path>:<line>:<col>: <problem>" on a parse error.
absl::StatusOr<v1::Task> ParseTaskText(const std::string& text, const std::string& path,
                                       google::protobuf::TextFormat::ParseInfoTree* tree = nullptr);

// Fills in what a task may leave unset: seeds 0 becomes kDefaultSeeds.
void ApplyTaskDefaults(v1::Task* task);

// Checks that `task` is complete and consistent (see docs/task-format.md):
// name, op family, signature, tensors, shape expressions, bindings (at least
// two validation bindings, one odd-sized, and a time binding, all binding
// every symbol used), sizes (no shape or formula overflows int64 at any
// binding, and every binding is within `limits`), bytes_moved/flops, seeds
// (0 = default, else >= 3), reference, tolerances. Returns OK, or
// InvalidArgument for the first problem found, prefixed by source.path and
// the line/column when `source` knows them; a size problem names the binding,
// the tensor and the size.
absl::Status ValidateTask(const v1::Task& task, const TaskSource& source = {}, const TaskLimits& limits = {});

// The task folders under `root`, sorted: `root` itself when it holds
// task.textproto, else every folder below it that does (task folders are not
// searched further). Returns NotFound when `root` does not exist, and an empty
// list when it holds no task.
absl::StatusOr<std::vector<std::string>> FindTaskDirs(const std::string& root);

}  // namespace kevo::task
