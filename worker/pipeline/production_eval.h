// Production baselines of native tasks: what a user runs today for the
// task's computation (the PyTorch expression eager and compiled, the vendor
// BLAS routine), timed against a candidate that already passed validation
// and its profile against the reference. The speed a report leads with is
// measured here; the reference stays the correctness oracle.
//
// Trust layout: kevo-runner-production (worker/runner/production_runner.py)
// runs in the sandbox (bubblewrap without network, rlimits, wall-clock
// kill). It loads the candidate .so with ctypes and calls its kevo_entry on
// the same input tensors it hands the PyTorch expression and the vendor
// routine, timing them interleaved (docs/task-format.md, "Production
// baselines"). There is no seccomp layer in that process (the interpreter and
// torch need system calls kernels do not); the candidate was already run
// under seccomp by validation and the profile. Correctness is judged here:
// each form's outputs, and the candidate's from that process, are compared
// with the reference's outputs at the timed binding, with the task's
// tolerances. A form that raises, is unavailable or disagrees is recorded
// with why and is never a yardstick; the evaluation itself never fails here.
//
// Thread-safety: Time() may be called from several slots at once.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"

#include "common/sandbox/sandbox.h"
#include "kevo/v1/evaluation.pb.h"
#include "kevo/v1/task.pb.h"
#include "worker/pipeline/eval_pipeline.h"

namespace kevo::worker {

// The runner script's name next to the worker's binary.
inline constexpr char kProductionRunnerName[] = "kevo-runner-production";

struct ProductionOptions {
  std::string python = "/usr/bin/python3";
  // The runner script; empty: kevo-runner-production next to /proc/self/exe.
  std::string runner_path;
  std::string platform = "cpu";  // selects the task's production entry
  std::string work_dir;          // scratch lives in the evaluation's folder
  // Besides the system folders: the built kernels, the timed inputs, and on a
  // GPU host the device files and the interpreter's prefixes.
  std::vector<std::string> visible_paths;
  std::vector<std::string> env;
  double time_cap_s = 3.0;
  absl::Duration torch_compile_timeout = absl::Seconds(120);
  absl::Duration timeout = absl::Seconds(300);
  int64_t memory_limit_bytes = int64_t{8} << 30;  // 0: none (CUDA)
  int64_t llc_bytes = 32 << 20;
  // CPU: thread counts to time torch at besides its default (the worker's).
  std::vector<int> threads;
};

// The production entry of `task` for `platform`: the one naming the platform,
// else the one with an empty platform; null when there is none.
const v1::ProductionBaseline* ProductionFor(const v1::Task& task, const std::string& platform);

// The speedup over the fastest usable form, and its name: fills
// ev.speedup_vs_production and ev.production_yardstick from ev.production.
void ChooseYardstick(v1::Evaluation& ev);

class ProductionTimer {
 public:
  ProductionTimer(const sandbox::Sandbox* sandbox, ProductionOptions options);

  // Whether the interpreter and the runner script exist.
  bool Available() const;
  const ProductionOptions& options() const { return options_; }

  // Times the task's production forms against `candidate_so` on the timed
  // inputs in `inputs_file`, checks their outputs against
  // `reference_outputs` (the reference's outputs at the timed binding, in
  // signature order), and records them in run.ev.production with the chosen
  // yardstick. With run.rival_so set, the rival is timed in the same loop
  // and checked the same way: run.ev.rival and speedup_vs_rival, or
  // rival_error. `device` is the runner's --device ("cpu", "cuda:0"). Does
  // nothing when the task has no production entry for this platform. A
  // failure of the runner itself is recorded as the forms' error and as the
  // note "production".
  void Time(EvalRun& run, const std::string& candidate_so, const std::string& inputs_file,
            const std::string& reference_outputs, const std::string& device) const;

 private:
  const sandbox::Sandbox* sandbox_;
  const ProductionOptions options_;
  const RunnerHarness harness_;
};

}  // namespace kevo::worker
