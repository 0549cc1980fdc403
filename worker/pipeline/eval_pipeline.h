// The parts of a worker's evaluation pipeline that do not depend on the
// platform, shared by every backend whose candidates run in a kevo runner
// process (worker/runner): the cpu backend with kevo-runner-cpu and the
// mtia-sim backend with kevo-runner-mtia. They speak the same runner protocol
// (worker/runner/protocol.h), so golden outputs, the validation stage (seeds x
// bindings, NaN-poisoned outputs, input hashes, guard bytes, determinism,
// per-dtype tolerances) and the classification of how a runner ended are
// written once, here.
//
// Thread-safety: the free functions are pure; RunnerHarness is thread-safe
// (several slots call it at once).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include <nlohmann/json_fwd.hpp>

#include "common/sandbox/sandbox.h"
#include "kevo/v1/evaluation.pb.h"
#include "kevo/v1/task.pb.h"
#include "worker/backend.h"
#include "worker/pipeline/kernel_builder.h"
#include "worker/pipeline/symbol_policy.h"
#include "worker/runner/protocol.h"

namespace google::protobuf {
class Message;
}

namespace kevo::worker {

// Small file and host helpers.
absl::StatusOr<std::string> ReadFileBytes(const std::string& path);
// `size` bytes of the file at `path` from `offset`; NotFound when it cannot be
// read, DataLoss when it is shorter.
absl::StatusOr<std::string> ReadFileRange(const std::string& path, int64_t offset, int64_t size);
absl::Status WriteFileBytes(const std::string& path, const std::string& data);
// The value after "key" and a colon on the first matching line of a
// /proc-style file, or "".
std::string ProcField(const std::string& path, std::string_view key);
std::string OsDescription();
std::string HostName();
int64_t UnixMicros();
// Fills what every platform's Evaluation starts with: task, platform, creation
// time, candidate hash (source + flags), timed binding and `fingerprint`.
void BeginEvaluation(const v1::Task& task, const v1::Candidate& candidate, const std::string& platform,
                     const v1::Fingerprint& fingerprint, v1::Evaluation* ev);
std::string FirstLineOf(const std::string& s);
// The read-only system folders every sandboxed command sees.
std::vector<std::string> SandboxSystemPaths();
// Removes scratch left behind by workers that died mid-evaluation (entries
// older than an hour under evals/, build/tmp-*, golden/*.tmp-*, inputs/*.tmp-*).
void RemoveStaleScratch(const std::string& work_dir);
// Creates `work_dir` with build/, golden/, inputs/ and evals/, removes stale
// scratch, and returns its canonical path. InvalidArgument ("<who>: cannot
// create ...") when it cannot be created.
absl::StatusOr<std::string> PrepareWorkDir(const std::string& work_dir, std::string_view who);
// What the compile stages of the GPU platforms share (cuda_build.h and
// hip_build.h extend it with what their compilers report). A candidate is a
// host source that defines the task's extern "C" function and launches its
// own kernels.
struct CandidateBuild {
  // OK, COMPILE_ERROR, COMPILE_TIMEOUT, SANDBOX_VIOLATION, or INFRA_ERROR for
  // the worker's own failures.
  v1::EvalStatus status = v1::EVAL_STATUS_UNSPECIFIED;
  std::string message;
  BuildResult build;                   // set when the builder ran
  std::vector<std::string> forbidden;  // the imports the policy refused

  // Sets status and message; returns false, so a check can `return Fail(...)`.
  bool Fail(v1::EvalStatus s, std::string m);
};
// The candidate's language must be one of `languages` (lower case; else
// COMPILE_ERROR "language 'x' is not supported on <where>"), its extra flags
// pass `check_extra_flags` (COMPILE_ERROR with its message), the kevo_entry
// wrapper is generated (INFRA_ERROR for a malformed signature), then
// `builder` runs on the source with `flags` + the extra flags: status is the
// build's. Fills `out`; returns whether it is OK.
bool BuildCandidate(const KernelBuilder& builder, const v1::Task& task, const v1::Candidate& candidate,
                    const std::vector<std::string_view>& languages, std::string_view where,
                    std::vector<std::string> flags,
                    const std::function<absl::Status(const std::vector<std::string>&)>& check_extra_flags,
                    CandidateBuild& out);
// The checks of a built candidate: its host object's `imports` against
// `policy` (SANDBOX_VIOLATION naming them, in out.forbidden) unless `policy`
// is null, then kernel.so must define the task's extern "C" function
// (COMPILE_ERROR saying what usually went wrong; INFRA_ERROR when it cannot
// be read). Returns whether it passed; else `out` says why.
bool CheckCandidateBuild(const v1::Task& task, const std::vector<std::string>& imports,
                         const DeviceImportPolicy* policy, CandidateBuild& out);
// The kevo_entry wrapper (worker/runner/protocol.h) every kernel of `task` is
// linked with, for a task the runners can validate: FailedPrecondition when
// it has no validate bindings or no outputs, InvalidArgument ("the task's
// signature is malformed: ...") when its signature does not resolve. Either
// is the task's fault, reported as INFRA_ERROR.
absl::StatusOr<std::string> TaskWrapperSource(const v1::Task& task);
// The flags of the task's C++ reference on every platform (its golden
// outputs, and the cpu worker's baseline).
const std::vector<std::string>& CppReferenceFlags();
// Builds one of the task's own kernels (its C++ reference, a device port of
// it: `what` names it, e.g. "reference_mtia.cc") with `builder`. A reference
// that does not build is the task's fault, not the candidate's: Internal with
// "the task's <what> does not compile: " and the compiler's message, for the
// compile stage to report as INFRA_ERROR.
absl::StatusOr<BuildResult> BuildTaskReference(const KernelBuilder& builder, const BuildSpec& spec,
                                               std::string_view what);
// Runs `program --version` in the sandbox (60 s limit) and returns how it
// ended; the sandbox's error when it cannot start.
absl::StatusOr<sandbox::Result> RunVersion(const sandbox::Sandbox& sandbox, const std::string& program);

// What the backends' Create functions share to find the tools they run.
//
// `configured` when it is set, else `name` next to this process's own binary
// (/proc/self/exe); either way absolute and normalised. For the runners.
std::string RunnerPath(const std::string& configured, std::string_view name);
// The SHA-256 of the runner binary at `path` (part of the golden outputs'
// key). FailedPrecondition ("<who>: runner <path> is missing or not
// executable") when it cannot be run or read.
absl::StatusOr<std::string> RunnerHash(const std::string& path, std::string_view who);
// `configured` if it is executable, else "" when it is set; when it is not,
// the first executable of $`env_var` and `defaults`, or "".
std::string FindTool(const std::string& configured, const char* env_var, const std::vector<std::string>& defaults);
// A C++ compiler as the sandbox runs it: the first line of its --version, and
// the read-only folders a compile must see (SandboxSystemPaths() plus the
// compiler's own installation when it lives elsewhere, e.g.
// /opt/gcc-13/bin/g++ -> /opt/gcc-13).
struct HostCompiler {
  std::string version;
  std::vector<std::string> visible_paths;
};
// `compiler` is a path or a name found in /usr/local/bin, /usr/bin or /bin.
// FailedPrecondition ("<who>: compiler '<compiler>' does not run: ...") when
// it does not run.
absl::StatusOr<HostCompiler> ProbeHostCompiler(const sandbox::Sandbox& sandbox, const std::string& compiler,
                                               std::string_view who);

// How a runner process ended, as the evaluation sees it.
struct RunnerOutcome {
  v1::EvalStatus status = v1::OK;
  std::string message;
  std::string violation;
  int signal = 0;
};
RunnerOutcome ClassifyRunnerExit(const sandbox::Result& run, const runner::Report& report, absl::Duration timeout);

// Compares one validation case's outputs (`got`) with the golden ones
// (`want`, same layout) and fills `result`.
void JudgeCase(const v1::Task& task, const runner::CaseReport& report, const std::vector<runner::OutputSlot>& slots,
               const std::string& got, const std::string& want, v1::CaseResult& result);

v1::Timing ToTiming(const runner::TimingSeries& s);
// A timing series as the Python runners write it: {"samples_s", "median_s",
// "spread", "calls_per_sample"}; missing keys are zeros (one call a sample).
runner::TimingSeries SeriesFromJson(const nlohmann::json& j);

// The output tensors at the task's timed binding: spec and element count, in
// signature order, and their total bytes. InvalidArgument when the shapes do
// not resolve.
struct TimedOutputs {
  std::vector<std::pair<const v1::TensorSpec*, int64_t>> tensors;
  int64_t bytes = 0;
};
absl::StatusOr<TimedOutputs> ResolveTimedOutputs(const v1::Task& task);

// Compares the candidate's outputs at the timed binding with the baseline's
// (`both`: the candidate's outputs, then the baseline's, each in signature
// order; both.size() == 2 * outputs.bytes) with validation's tolerances.
// Returns OK, or WRONG_ANSWER / NONFINITE with a message naming the element.
struct TimedCheck {
  v1::EvalStatus status = v1::OK;
  std::string message;
};
TimedCheck CompareTimedOutputs(const v1::Task& task, const TimedOutputs& outputs, const std::string& both);

// The checks of the timed calls a profile kept (worker/runner/protocol.h): in
// the outputs file at `outputs_path`, output-set pair 1 + i holds the
// candidate's outputs of the call of timed sample profile.timed_checks[i]
// and the baseline's on the same inputs; each pair is compared in turn (one
// in memory at a time) with validation's tolerances. Returns OK; a
// RUNTIME_ERROR when the runner kept fewer than `min_timed_checks` (one that
// checks them always keeps runner::kTimedChecks: something in its process got
// in the way); WRONG_ANSWER, even for NaN/Inf, naming the timed sample, with
// `mismatch_suffix` appended, when a pair disagrees; INFRA_ERROR when the
// file cannot be read.
TimedCheck CheckTimedCalls(const v1::Task& task, const TimedOutputs& outputs, const runner::ProfileReport& profile,
                           const std::string& outputs_path, int min_timed_checks, const std::string& mismatch_suffix);

// One evaluation on its way through the stages. A stage that ends the
// evaluation calls Fail(), which records the failed stage's event and the
// final status.
struct EvalRun {
  const v1::Task& task;
  const v1::Candidate& candidate;
  const EventSink& on_event;
  v1::Evaluation ev;
  absl::Time stage_start;
  std::string scratch;  // this evaluation's folder, removed at the end
  // The kernel to time beside the candidate where production baselines are
  // timed (Backend::EvaluateBeside), and its build once compiled; null and
  // empty when there is none (or it failed to build: ev.rival_error).
  const v1::Candidate* rival = nullptr;
  std::string rival_so;

  // Starts `stage`: its event's seconds count from now, and the worker's log
  // says so ("validate started"), which is how an operator, or a fault test,
  // tells which stage a worker is in (stage events are sent as stages end).
  void Begin(v1::Stage stage);
  // Appends a stage event (seconds since stage_start) and passes it on.
  void Emit(v1::Stage stage, bool ok, const std::string& message);
  // Returns false, so a stage can `return run.Fail(...)`.
  bool Fail(v1::Stage stage, v1::EvalStatus status, const std::string& message);
  // Ends the evaluation: stamps its finish time, removes the scratch folder
  // unless `keep_scratch`, and returns the evaluation (moved out of ev).
  v1::Evaluation Finish(bool keep_scratch);
};

// A backend with one evaluation path for Evaluate and EvaluateBeside: Run
// gets the rival to time beside the candidate, or null.
class RivalBackend : public Backend {
 public:
  v1::Evaluation Evaluate(const v1::Task& task, const v1::Candidate& candidate, const EventSink& on_event) final {
    return Run(task, candidate, nullptr, on_event);
  }
  v1::Evaluation EvaluateBeside(const v1::Task& task, const v1::Candidate& candidate, const v1::Candidate& rival,
                                const EventSink& on_event) final {
    return Run(task, candidate, &rival, on_event);
  }

 protected:
  // As Backend::Evaluate; thread-safe.
  virtual v1::Evaluation Run(const v1::Task& task, const v1::Candidate& candidate, const v1::Candidate* rival,
                             const EventSink& on_event) = 0;
};

// Builds run.rival, when there is one, with `build` (the rival's .so, or why
// it cannot run) where `times_production` (only the production loop times a
// rival): sets run.rival_so, or run.ev.rival_error with why not. Returns the
// note for the compile stage's message ("; rival (cached)"), or "".
std::string BuildRival(EvalRun& run, bool times_production,
                       const std::function<absl::StatusOr<BuildResult>(const v1::Candidate&)>& build);

// Ends a validate stage whose cases are in run.ev.validation(): Fail()s with
// the first bad case (and how many passed), or emits the stage's OK event
// naming `cases_description` (e.g. "3 bindings x 3 seeds"). Returns whether
// every case passed.
bool ConcludeValidation(EvalRun& run, const std::string& cases_description);

struct RunnerHarnessOptions {
  std::string runner_path;  // absolute
  std::string work_dir;     // holds golden/, inputs/, evals/
  // What the runner may see inside bubblewrap.
  std::vector<std::string> visible_paths;
  absl::Duration run_timeout = absl::Seconds(60);
  int64_t memory_limit_bytes = int64_t{8} << 30;
  // Identity of the runner binary (its hash): part of the golden-output key.
  std::string runner_hash;
  // Arguments added to every runner command line (e.g. --mtia_config=2i).
  std::vector<std::string> extra_args;
  // RLIMIT_NOFILE of the runner (the CUDA driver opens device files and
  // libraries of its own).
  int64_t open_files = 64;
  // NAME=value entries added to the runner's environment (PATH=... replaces
  // the default PATH).
  std::vector<std::string> env;
};

// The harness options of a native runner (kevo-runner-cpu,
// kevo-runner-mtia) at `runner_path`: inside bubblewrap it sees the system
// folders, its own folder, the built kernels and the timed inputs under
// `work_dir`, and not the rest of the host (a candidate's static constructor
// runs before the post-load filter forbids openat).
RunnerHarnessOptions NativeRunnerOptions(const std::string& runner_path, const std::string& work_dir,
                                         absl::Duration run_timeout, int64_t memory_limit_bytes,
                                         const std::string& runner_hash);

// The harness options of a Python runner script (kevo-runner-kernelbench,
// kevo-runner-production) started by `python`: the system folders, the CPU
// topology, the script's folder and `extra_visible`, `open_files` (torch
// opens its libraries; load_inline the compiler and ninja) and `env`.
RunnerHarnessOptions PythonRunnerOptions(const std::string& python, const std::string& script,
                                         const std::string& work_dir, const std::vector<std::string>& extra_visible,
                                         absl::Duration run_timeout, int64_t memory_limit_bytes, int64_t open_files,
                                         const std::vector<std::string>& env);

// Runs a kevo runner in the sandbox and implements the stages that only need
// the runner protocol.
class RunnerHarness {
 public:
  RunnerHarness(const sandbox::Sandbox* sandbox, RunnerHarnessOptions options)
      : sandbox_(sandbox), options_(std::move(options)) {}

  struct RunnerRun {
    RunnerOutcome outcome;
    sandbox::Result result;
  };
  // Runs the runner with `args` (+ extra_args) in `dir` (writable) under
  // `timeout`; the report file is dir/report.txt. Returns the sandbox's error
  // when the process could not be started.
  absl::StatusOr<RunnerRun> Run(const std::vector<std::string>& args, const std::string& dir, absl::Duration timeout,
                                int64_t output_bytes) const;

  // The outputs of `reference_so` (a kevo_entry .so: the task's reference)
  // for every validation case, cached under work_dir/golden. Internal when
  // the reference fails.
  absl::StatusOr<std::string> GoldenOutputs(const v1::Task& task, const std::string& reference_so,
                                            const std::vector<uint64_t>& seeds, int64_t output_bytes) const;

  // A file with the inputs of the task's timed binding (FillTensor, seed 1),
  // cached under work_dir/inputs.
  absl::StatusOr<std::string> TimedInputs(const v1::Task& task) const;

  // A fresh (not yet created) folder under work_dir/evals.
  std::string NewScratchDir() const;

  // The validate stage: golden outputs from `reference_so`, the candidate
  // `candidate_so` run on every binding x seed, each case judged. Sets
  // run.scratch (with task.pb in it). Returns true when every case passed;
  // else the evaluation has failed (run.Fail) with the first bad case.
  // `golden_from`: the harness whose runner computes the golden outputs
  // (the nvidia backend's CPU runner); null: this one.
  bool Validate(EvalRun& run, const std::string& candidate_so, const std::string& reference_so,
                const RunnerHarness* golden_from = nullptr) const;

  // What the profile stages of the runner platforms share: the runner's
  // profile mode on `candidate_so` against `baseline_so` at the task's timed
  // binding (inputs from TimedInputs), with `extra_args`, under `timeout`;
  // then what it wrote is checked: no input changed (in any input copy), the
  // outputs of every timed call the runner kept agree with the baseline's on
  // the same inputs (a mismatch is WRONG_ANSWER naming the timed sample), and
  // the two kernels' outputs after timing agree, all within validation's
  // tolerances. Sets run.stage_start. Returns the profile; else the
  // evaluation has failed (run.Fail at STAGE_PROFILE). A runner failure is
  // reported as `who` (at the timed binding ...) and a mismatch message ends
  // with `mismatch_suffix`. Fewer than `min_timed_checks` kept timed calls
  // (a runner that checks them always keeps runner::kTimedChecks) is a
  // RUNTIME_ERROR: something in the runner's process got in the way.
  struct ProfileCall {
    std::string candidate_so;
    std::string baseline_so;
    std::vector<std::string> extra_args;
    absl::Duration timeout;
    std::string who = "candidate";
    std::string mismatch_suffix;
    int min_timed_checks = 0;
  };
  struct Profiled {
    runner::ProfileReport report;
    int64_t peak_rss_bytes = 0;  // the runner's
    // The baseline's outputs at the timed binding, on the timed inputs (the
    // check after timing), in signature order.
    std::string baseline_outputs;
  };
  std::optional<Profiled> Profile(EvalRun& run, const ProfileCall& call) const;

  const RunnerHarnessOptions& options() const { return options_; }

 private:
  const sandbox::Sandbox* sandbox_;
  const RunnerHarnessOptions options_;
  mutable std::atomic<uint64_t> scratch_counter_{0};
};

}  // namespace kevo::worker
