// The CPU platform of a kevo worker: compiles C++ candidates with
// g++ -O3 -march=native -fopenmp into shared objects, checks what they
// import, validates them against the task's reference (compiled -O2, the
// baseline) and times both in the same sandboxed process. KernelBench-format
// tasks (Python ModelNew candidates) go to KernelBenchEvaluator
// (kernelbench_eval.h) with device "cpu".
//
// Trust layout: this library runs in the worker (trusted). Candidate code only
// ever runs inside kevo-runner-cpu (worker/runner), started through
// kevo::sandbox with rlimits and, where it works, bubblewrap; the runner adds
// a seccomp filter before it loads the candidate. Correctness is judged here,
// outside the sandbox, from the raw outputs the runner writes.
//
// Layers a candidate must get through, and what stops it:
//   1. extra flags      -> CheckExtraFlags        -> COMPILE_ERROR
//   2. imported symbols -> ELF check (allowlist)  -> SANDBOX_VIOLATION
//   3. system calls     -> seccomp (runner)       -> SANDBOX_VIOLATION
//   4. time, memory, file size -> rlimits, wall-clock kill of the process group
//   5. file system, network, other processes -> bubblewrap namespaces
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "common/sandbox/sandbox.h"
#include "worker/backend.h"
#include "worker/pipeline/speed_of_light.h"

namespace kevo::worker {

struct CpuBackendOptions {
  // Build cache, golden outputs and per-evaluation scratch folders. Required.
  std::string work_dir;
  // Empty: kevo-runner-cpu next to /proc/self/exe.
  std::string runner_path;
  std::string compiler = "g++";
  absl::Duration compile_timeout = absl::Seconds(60);
  // Wall-clock limit of each validation run (and added to the profile cap).
  absl::Duration run_timeout = absl::Seconds(60);
  // Address-space limit of the runner (and the compiler).
  int64_t memory_limit_bytes = int64_t{8} << 30;
  // How long the profile stage may sample before it stops (noise permitting
  // it stops earlier, at 1% relative spread for both kernels).
  double profile_time_cap_s = 3.0;
  // KernelBench problems: the time a timed sample's calls add up to at least
  // (docs/kernelbench.md, "Calls per sample"); negative: the runner's default
  // for the device (4 ms on a GPU, one call a sample on the CPU).
  double kernelbench_sample_target_s = -1;
  // Tests only: skip the imported-symbol check to prove the seccomp layer.
  bool skip_symbol_check = false;
  sandbox::SandboxOptions::Bwrap use_bwrap = sandbox::SandboxOptions::Bwrap::kAuto;
  std::string bwrap_path = "/usr/bin/bwrap";  // the bubblewrap binary
  // Measure memory bandwidth and FP32 peak at creation (about a second), and
  // again after timing candidates; the roofline and the speed-of-light check
  // need them.
  bool calibrate = true;
  // A result beyond the measured limits by more than this fraction is timed
  // again in a fresh runner and, if it still is, rejected as SUSPICIOUS
  // (speed_of_light.h).
  double speed_of_light_margin = kDefaultSpeedOfLightMargin;
  // Keep each evaluation's scratch folder (for debugging).
  bool keep_eval_dirs = false;
  // KernelBench-format tasks (docs/kernelbench.md): the interpreter with
  // PyTorch and the runner script (empty: kevo-runner-kernelbench next to
  // kevo-runner-cpu). Without them the worker does not offer "python".
  std::string kernelbench_python = "/usr/bin/python3";
  std::string kernelbench_runner_path;
  // Cap on torch.compile's compile + warm-up (the baseline is dropped past it).
  absl::Duration torch_compile_timeout = absl::Seconds(120);
  // Time the task's production baselines (PyTorch with kernelbench_python,
  // OpenBLAS) against each candidate that passed its profile
  // (worker/pipeline/production_eval.h).
  bool time_production = true;
};

// Evaluate() is thread-safe; compile and validate stages of several slots run
// in parallel, profile stages one at a time (timing needs a quiet machine).
//
// Creates the backend: checks the compiler and the runner, probes bubblewrap
// and measures the ceilings. Returns InvalidArgument for unusable options,
// FailedPrecondition when the compiler or runner is missing or bubblewrap is
// required but does not work, Internal when the calibration fails.
absl::StatusOr<std::unique_ptr<Backend>> CreateCpuBackend(const CpuBackendOptions& options);

}  // namespace kevo::worker
