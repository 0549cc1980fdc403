// The NVIDIA platform of a kevo worker: CUDA C++ candidates compiled with
// nvcc, validated and timed on the host's GPUs by kevo-runner-cuda.
//
// The worker never initialises CUDA itself. It finds its GPUs by running
// `kevo-runner-cuda probe --measure` in a child process at start-up, and
// every stage that touches a GPU is a runner process in the sandbox:
//
//   compile   nvcc (CPU threads, any number of slots at once, own timeout and
//             the content-addressed cache), symbol check of the object
//             (worker/backends/nvidia/cuda_build.h)
//   golden    the task's C++ reference run on the CPU by kevo-runner-cpu (the
//             CPU pipeline, cached), compared here with the task's tolerances
//   validate  kevo-runner-cuda run: fresh NaN-filled device buffers, guards,
//             input hashes, determinism (worker/runner/cuda)
//   profile   kevo-runner-cuda profile: CUDA events, whole-device
//             synchronisation, L2 flush, interleaved baseline
//
// Validate and profile hold the GPU's timing slot (one per GPU), so while a
// candidate is timed nothing else runs on that GPU, while other slots compile
// ahead on the CPU: run the daemon with more slots than GPUs. The gauge
// kevo_worker_gpu_timing_utilisation is the slots' busy share over the last
// minute; each evaluation's device_use.stage_s is the time it held its slot
// (the coordinator sums it over a job: Job.device_utilisation).
//
// Baselines, in order: cuBLAS (cublasGemmEx, FP32 compute) for tasks whose
// hints say pattern=gemm; else the task's CUDA reference (an extra reference
// of language "cuda", reference.cu in the task folder) when it has one;
// else the C++ reference's time on this host's CPU (measured by
// kevo-runner-cpu: Evaluation.baseline_kind BASELINE_CPU_REFERENCE).
//
// KernelBench-format tasks (Python ModelNew candidates) go to the
// KernelBenchEvaluator (worker/pipeline/kernelbench_eval.h) with device
// "cuda", when an interpreter whose torch has CUDA was found at start-up:
// the candidate is imported ahead on a CPU slot, then the golden run,
// validation and the profile (candidate, PyTorch eager, torch.compile) run
// on a GPU under its timing slot.
//
// After a device fault (illegal address, ...) or a runner killed at its
// timeout the GPU is checked with `kevo-runner-cuda health` before it takes
// more work; an unhealthy GPU fails evaluations with INFRA_ERROR until a
// later health check passes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "common/sandbox/sandbox.h"
#include "worker/backend.h"
#include "worker/backends/gpu/gpu_stages.h"
#include "worker/pipeline/speed_of_light.h"

namespace kevo::worker {

struct NvidiaBackendOptions {
  // Build cache, golden outputs, timed inputs and scratch folders. Required.
  std::string work_dir;
  // Empty: kevo-runner-cuda / kevo-runner-cpu next to /proc/self/exe.
  std::string runner_path;
  std::string cpu_runner_path;
  // Empty: $CUDACXX, then /usr/local/cuda/bin/nvcc, then nvcc on PATH.
  std::string nvcc;
  // Compiles the C++ reference for the golden outputs.
  std::string host_compiler = "g++";
  // Empty: from the first GPU's compute capability (sm_90a on Hopper).
  std::string arch;
  absl::Duration compile_timeout = absl::Seconds(180);
  absl::Duration run_timeout = absl::Seconds(60);
  // Address-space limit of compilers and the CPU runner (the CUDA runner
  // gets none: the driver reserves far more address space than it uses).
  int64_t memory_limit_bytes = int64_t{8} << 30;
  double profile_time_cap_s = 3.0;
  // A result beyond the device's limits by more than this fraction is timed
  // again in a fresh runner and, if it still is, rejected as SUSPICIOUS
  // (worker/pipeline/speed_of_light.h).
  double speed_of_light_margin = kDefaultSpeedOfLightMargin;
  bool skip_symbol_check = false;  // tests only
  sandbox::SandboxOptions::Bwrap use_bwrap = sandbox::SandboxOptions::Bwrap::kAuto;
  std::string bwrap_path = "/usr/bin/bwrap";  // the bubblewrap binary
  bool keep_eval_dirs = false;
  // Measure copy bandwidth and FP32 rate in the probe (about a second).
  bool measure = true;
  // KernelBench problems (docs/kernelbench.md) run with this interpreter
  // when its torch has CUDA. Empty: python3 on PATH, then /usr/bin/python3
  // (the first whose torch sees the GPU).
  std::string kernelbench_python;
  // Empty: kevo-runner-kernelbench next to kevo-runner-cuda.
  std::string kernelbench_runner_path;
  // torch.compile's compile + warm-up cap (the baseline is dropped past it).
  absl::Duration torch_compile_timeout = absl::Seconds(120);
  // Time the task's production baselines (PyTorch eager and torch.compile
  // under the KernelBench interpreter, cuBLAS) against each candidate that
  // passed its profile (worker/pipeline/production_eval.h).
  bool time_production = true;
};

// Creates the backend: finds the runners and nvcc, probes the GPUs. Returns
// InvalidArgument for unusable options, FailedPrecondition when there is no
// GPU (message starting "no NVIDIA GPU found"), nvcc or a runner is missing.
absl::StatusOr<std::unique_ptr<Backend>> CreateNvidiaBackend(const NvidiaBackendOptions& options);

// The nvcc the backend would use for `configured` (see
// NvidiaBackendOptions::nvcc), or "" when none is found.
std::string FindNvcc(const std::string& configured);

}  // namespace kevo::worker
