// Evaluation of KernelBench-format tasks (v1::TASK_FORMAT_KERNELBENCH): a
// Python candidate defining ModelNew, checked against the problem's Model and
// timed against PyTorch eager (and torch.compile where the worker's torch has
// it). Device-agnostic: the cpu backend uses it with device "cpu"; a backend
// with a CUDA build of PyTorch can use it with device "cuda".
//
// Trust layout: Python code only runs inside kevo-runner-kernelbench
// (worker/runner/kernelbench_runner.py) started through the sandbox
// (bubblewrap without network, rlimits, wall-clock kill). Its `evaluate` mode
// is the judge: it runs the problem's Model (eager, and torch.compile where
// torch has it) in its own interpreter and starts the candidate in another
// (`serve`), which it talks to over a socket in JSON lines, never unpickling
// what it sends. The candidate sees the judge's input buffers (shared memory:
// a memfd on the CPU, CUDA IPC on a GPU) and says where its outputs are; the
// judge reads them out of its memory, times it from outside (wall clock
// around the request, less the round trip of a request that does no work),
// stops it (SIGSTOP) between requests, gives every timed call fresh inputs
// and checks every timed call's outputs against eager's on the same inputs.
// The judge is not dumpable (the candidate can neither read nor write its
// memory) and its result carries a nonce from this process, so a result
// file the candidate forged is not taken. Tolerances are the task's
// (common/tensor.h semantics), passed to the judge.
//
// Stages and statuses:
//   compile  import the candidate (a module-level load_inline builds here,
//            in a process that leaves the device alone), then in the
//            judge's child import it and build ModelNew: SyntaxError, a
//            failed extension build, a missing ModelNew or a module the
//            worker lacks -> COMPILE_ERROR; out of time -> COMPILE_TIMEOUT.
//   validate every seed: outputs vs eager's -> WRONG_ANSWER / NONFINITE;
//            input changed -> INPUT_MODIFIED; two calls differ ->
//            NONDETERMINISTIC; an exception -> RUNTIME_ERROR with the
//            traceback's last lines; a hang -> RUN_TIMEOUT naming where;
//            MemoryError or the memory limit -> RESOURCE_EXHAUSTED.
//   profile  candidate, eager Model and torch.compile(Model) timed
//            interleaved; a wrong timed call fails the evaluation (its
//            status, "timed call N was wrong"); speedup = eager median /
//            candidate median; the torch.compile figure, or why there is
//            none, is in the evaluation's profile map and notes.
//
// The judge runs under the backend's DeviceHold (on a GPU the device it
// holds; on the CPU one evaluation is judged at a time per worker).
//
// Thread-safety: Evaluate() may be called from several slots at once.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

#include "common/sandbox/sandbox.h"
#include "kevo/v1/evaluation.pb.h"
#include "kevo/v1/task.pb.h"
#include "worker/backend.h"
#include "worker/pipeline/eval_pipeline.h"

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
  // Holds evals/ (each evaluation's scratch folder).
  std::string work_dir;
  // What the runner may see inside bubblewrap besides the system folders
  // (e.g. /dev/nvidia* on a GPU host).
  std::vector<std::string> extra_visible_paths;
  // NAME=value entries for the runner's environment (PATH with the
  // interpreter's and nvcc's folders, CUDA_HOME, TORCH_CUDA_ARCH_LIST).
  std::vector<std::string> env;
  // Import + first ModelNew (where load_inline compiles), and then the calls.
  absl::Duration compile_timeout = absl::Seconds(120);
  absl::Duration run_timeout = absl::Seconds(60);
  // torch.compile's compile and warm-up; past it the baseline is dropped
  // with the note "torch.compile unavailable: ..." (the evaluation goes on).
  absl::Duration torch_compile_timeout = absl::Seconds(120);
  // 0: no address-space limit (CUDA reserves far more than it uses).
  int64_t memory_limit_bytes = int64_t{8} << 30;
  int64_t open_files = 1024;
  double profile_time_cap_s = 3.0;
  // As CpuBackendOptions::kernelbench_sample_target_s.
  double sample_target_s = -1;
  // Baselines the profile times besides the candidate ("eager", "compile").
  std::vector<std::string> baselines = {"eager", "compile"};
};

// Runs `stages` on a device the backend takes for them and gives back
// afterwards, passing the runner's --device value ("cpu", "cuda:1").
// Returns what `stages` returned, or false after run.Fail() when no device
// can be had.
using DeviceHold = std::function<bool(EvalRun& run, const std::function<bool(const std::string& device)>& stages)>;

// What `python` offers for KernelBench problems, as the runner's `probe`
// reports it.
struct KernelBenchProbe {
  std::string python;  // the interpreter probed
  std::string python_version;
  std::string torch;       // "2.11.0+cu130"
  std::string torch_cuda;  // "13.0"; "" for a CPU-only build
  std::string triton;      // "" when it does not import
  bool torch_compile = false;
  std::vector<std::string> devices;  // GPU names (device "cuda")
  // Folders the interpreter needs to see in the sandbox (its prefixes, torch).
  std::vector<std::string> visible_paths;
};
// Runs `kevo-runner-kernelbench probe --device=D` with `python` in the
// sandbox. FailedPrecondition with the runner's reason ("torch 1.13.0a0 ...
// is a CPU-only build ...") when it cannot run problems on `device`.
absl::StatusOr<KernelBenchProbe> ProbeKernelBench(const sandbox::Sandbox& sandbox, const std::string& python,
                                                  const std::string& runner_path, const std::string& device,
                                                  const std::string& scratch_dir,
                                                  std::vector<std::string> visible_paths,
                                                  const std::vector<std::string>& env);

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
  // `hold` wraps the judge (validation and timing), which needs the
  // device. `fingerprint` is the backend's; its compiler field is
  // replaced by the Python and torch versions. Never throws; candidate
  // faults are statuses, the worker's own failures INFRA_ERROR.
  v1::Evaluation Evaluate(const v1::Task& task, const v1::Candidate& candidate, const EventSink& on_event,
                          const std::string& platform, const v1::Fingerprint& fingerprint,
                          const DeviceHold& hold) const;

 private:
  struct Outcome;
  // Runs the runner with `args` and --device=`device` in `dir`; reads
  // dir/result.json and dir/phase.
  Outcome RunRunner(const std::vector<std::string>& args, const std::string& device, const std::string& dir,
                    absl::Duration timeout) const;
  // The problem's operator graph (the runner's capture, on the CPU) into
  // run.ev.model_graph, once per problem source on this worker.
  void Capture(EvalRun& run) const;
  // The candidate imported without the device (where load_inline builds).
  bool ImportAhead(EvalRun& run, const std::string& problem, const std::string& candidate) const;
  // The runner's `evaluate`: the judge validates every seed and times the
  // candidate (in its own process) against eager and torch.compile.
  bool Judge(EvalRun& run, const std::string& problem, const std::string& candidate, const std::string& device) const;

  const sandbox::Sandbox* sandbox_;
  const KernelBenchOptions options_;
  const RunnerHarness harness_;
  // Why torch.compile cannot be timed for a problem (by the hash of its
  // source), learnt once, so later evaluations do not wait for it again.
  mutable absl::Mutex mu_;
  mutable std::map<std::string, std::string> torch_compile_unavailable_ ABSL_GUARDED_BY(mu_);
  // The problems (by the hash of their source) whose graph was captured.
  mutable std::set<std::string> captured_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kevo::worker
