// Evaluation of KernelBench-format tasks (v1::TASK_FORMAT_KERNELBENCH): a
// Python candidate defining ModelNew, checked against the problem's Model and
// timed against PyTorch eager (and torch.compile where the worker's torch has
// it). Device-agnostic: the cpu backend uses it with device "cpu"; a backend
// with a CUDA build of PyTorch can use it with device "cuda".
//
// Trust layout, as for native tasks: Python code only runs inside
// kevo-runner-kernelbench (worker/runner/kernelbench_runner.py) started
// through the sandbox (bubblewrap without network, rlimits, wall-clock kill);
// there is no seccomp layer, since the Python interpreter and PyTorch need
// system calls (threads, files, the compiler for load_inline) that kernels do
// not. Correctness is judged here, outside the sandbox: the problem's Model
// runs in its own process (golden outputs, cached), the candidate in another,
// and their raw outputs are compared with the task's per-dtype tolerances
// (common/tensor.h), so a candidate never sees the reference's results.
//
// Stages and statuses:
//   compile  import the candidate and build the first ModelNew (load_inline
//            runs here): SyntaxError, a failed extension build, a missing
//            ModelNew or a module the worker lacks -> COMPILE_ERROR; out of
//            time -> COMPILE_TIMEOUT.
//   validate every seed: outputs vs the golden ones -> WRONG_ANSWER /
//            NONFINITE; input changed -> INPUT_MODIFIED; two calls differ ->
//            NONDETERMINISTIC; an exception -> RUNTIME_ERROR with the
//            traceback's last lines; a hang -> RUN_TIMEOUT; MemoryError or
//            the memory limit -> RESOURCE_EXHAUSTED.
//   profile  candidate, eager Model and torch.compile(Model) timed
//            interleaved in one process; speedup = eager median / candidate
//            median; the torch.compile figure, or why there is none, is in
//            the evaluation's profile map and notes.
//
// Thread-safety: Evaluate() may be called from several slots at once.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/sandbox/sandbox.h"
#include "kevo/v1/evaluation.pb.h"
#include "kevo/v1/task.pb.h"
#include "worker/backend.h"
#include "worker/backends/cpu/eval_pipeline.h"

namespace kevo::worker {

// The interpreter KernelBench problems run under: Debian's, which has
// python3-torch (never a pyenv or virtualenv python found on PATH).
inline constexpr char kDefaultPython[] = "/usr/bin/python3";
// The runner script's name next to the worker's binary.
inline constexpr char kKernelBenchRunnerName[] = "kevo-runner-kernelbench";

struct KernelBenchOptions {
  std::string python = kDefaultPython;
  // The runner script; empty: kevo-runner-kernelbench next to /proc/self/exe.
  std::string runner_path;
  std::string device = "cpu";  // "cpu" or "cuda"
  // Holds golden/ (cached outputs of each problem's Model) and evals/.
  std::string work_dir;
  // What the runner may see inside bubblewrap besides the system folders
  // (e.g. /dev/nvidia* on a GPU host).
  std::vector<std::string> extra_visible_paths;
  // Import + first ModelNew (where load_inline compiles), and then the calls.
  absl::Duration compile_timeout = absl::Seconds(120);
  absl::Duration run_timeout = absl::Seconds(60);
  int64_t memory_limit_bytes = int64_t{8} << 30;
  double profile_time_cap_s = 3.0;
  // Baselines the profile times besides the candidate ("eager", "compile").
  std::vector<std::string> baselines = {"eager", "compile"};
};

class KernelBenchEvaluator {
 public:
  // Does not touch the disk beyond creating work_dir's folders; the runner's
  // existence is checked by Available().
  KernelBenchEvaluator(const sandbox::Sandbox* sandbox, KernelBenchOptions options);

  // Whether this worker can evaluate KernelBench tasks: the interpreter and
  // the runner script exist. (Whether torch imports is learnt on the first
  // evaluation; a worker without it answers INFRA_ERROR saying so.)
  bool Available() const;
  const KernelBenchOptions& options() const { return options_; }

  // Evaluates `candidate` (language "python") for the KernelBench `task`.
  // `profile_mu`, when given, is held while timing (one profile at a time
  // per worker). `fingerprint` is the backend's; its compiler field is
  // replaced by the Python and torch versions. Never throws; candidate faults
  // are statuses, the worker's own failures INFRA_ERROR.
  v1::Evaluation Evaluate(const v1::Task& task, const v1::Candidate& candidate,
                          const EventSink& on_event, const std::string& platform,
                          const v1::Fingerprint& fingerprint, absl::Mutex* profile_mu) const;

 private:
  struct Golden;
  struct Outcome;
  // Runs the runner with `args` in `dir`; reads dir/result.json and
  // dir/phase.
  Outcome RunRunner(const std::vector<std::string>& args, const std::string& dir,
                    absl::Duration timeout) const;
  // The problem Model's outputs for `seeds`, cached under work_dir/golden.
  absl::StatusOr<Golden> GoldenOutputs(const v1::Task& task, const std::vector<uint64_t>& seeds,
                                       const std::string& problem_path) const;
  bool CompileAndValidate(EvalRun& run, const std::string& problem, const std::string& candidate) const;
  bool Profile(EvalRun& run, const std::string& problem, const std::string& candidate) const;

  const sandbox::Sandbox* sandbox_;
  const KernelBenchOptions options_;
  const RunnerHarness harness_;
};

}  // namespace kevo::worker
