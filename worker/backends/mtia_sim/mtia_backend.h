// The mtia-sim platform of a kevo worker: MTIA candidates (language
// "mtia-c++", C++ against mtia_sim/mtia.h exporting kevo_mtia_launch,
// docs/mtia-simulator.md) are compiled with g++ into shared objects, checked
// for what they import, validated against the task's C++ reference and timed
// in SIMULATED time on the MTIA 2i (or MTIA 1) cycle model against the task's
// naive MTIA baseline, reference_mtia.cc.
//
// It reuses the CPU pipeline (worker/backends/cpu): KernelBuilder (sandboxed,
// cached builds), the ELF import check, RunnerHarness (golden outputs, the
// validate stage, the runner protocol) and the sandbox. Candidate code runs
// only inside kevo-runner-mtia (worker/runner built with KEVO_RUNNER_MTIA),
// under the same rlimits, bubblewrap and seccomp filter as kevo-runner-cpu.
//
// Timing: the cycle model is deterministic, so the profile stage runs the
// candidate and the baseline once each; the evaluation's timing has one
// sample (spread 0) and its profile map carries the simulator's counters
// (cycles, per-unit busy/stall cycles, bytes per memory level, utilisation).
// The roofline is the simulated chip's: DRAM bandwidth, and the DPE peak for
// matmul-like op families (the SIMD engine's peak otherwise).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "common/sandbox/sandbox.h"
#include "worker/backend.h"
#include "worker/pipeline/speed_of_light.h"

namespace kevo::worker {

// The candidate language of the mtia-sim platform.
inline constexpr char kMtiaLanguage[] = "mtia-c++";

struct MtiaBackendOptions {
  // Build cache, golden outputs and per-evaluation scratch folders. Required.
  std::string work_dir;
  // Empty: kevo-runner-mtia next to /proc/self/exe.
  std::string runner_path;
  // The simulated chip: "2i" (MTIA 2i, the default), "1" (MTIA 1) or "300"
  // (MTIA 300); mtia::ConfigForChip maps the name to its Config.
  std::string chip = "2i";
  std::string compiler = "g++";
  absl::Duration compile_timeout = absl::Seconds(60);
  // Wall-clock limit of each runner process (validation, profile).
  absl::Duration run_timeout = absl::Seconds(120);
  // Address-space limit of the runner (and the compiler).
  int64_t memory_limit_bytes = int64_t{8} << 30;
  // Tests only: skip the imported-symbol check to prove the seccomp layer.
  bool skip_symbol_check = false;
  sandbox::SandboxOptions::Bwrap use_bwrap = sandbox::SandboxOptions::Bwrap::kAuto;
  std::string bwrap_path = "/usr/bin/bwrap";  // the bubblewrap binary
  // Keep each evaluation's scratch folder (for debugging).
  bool keep_eval_dirs = false;
  // A simulated time beyond the chip's DRAM bandwidth or peak by more than
  // this fraction is rejected as SUSPICIOUS
  // (worker/pipeline/speed_of_light.h).
  double speed_of_light_margin = kDefaultSpeedOfLightMargin;
};

// Creates the backend: checks the options, the compiler and the runner, and
// writes mtia.h (embedded in this binary) under work_dir/include. Returns
// InvalidArgument for unusable options (unknown chip, no work_dir),
// FailedPrecondition when the compiler or the runner is missing.
// Evaluate() is thread-safe.
absl::StatusOr<std::unique_ptr<Backend>> CreateMtiaBackend(const MtiaBackendOptions& options);

// Whether an MTIA candidate may import `name`: what a CPU candidate may
// (worker/pipeline/symbol_policy.h) plus the libstdc++ string and
// exception pieces that mtia.h's inline code uses (KernelError,
// std::function). Thread-safe.
bool IsAllowedMtiaImport(std::string_view name);

}  // namespace kevo::worker
