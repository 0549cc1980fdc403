// The GPU half of an evaluation, shared by the nvidia and amd platforms: the
// worker side of kevo-runner-cuda and kevo-runner-hip (both speak the
// protocol of worker/runner/device/device_runner.h).
//
//   probe     `runner probe --measure` in the sandbox at start-up (the worker
//             never initialises a GPU runtime itself)
//   golden    the task's C++ reference run on the CPU by kevo-runner-cpu (the
//             CPU pipeline, cached), compared here with the task's tolerances
//   validate  `runner run`: fresh NaN-filled device buffers, guards, input
//             hashes, determinism
//   profile   `runner profile`: the runtime's events, whole-device
//             synchronisation, cache flush, interleaved baseline, perturbed
//             inputs, and (with a GPU baseline) timed calls checked against
//             the baseline's on the same inputs
//
// Validate and profile hold the GPU's timing slot (one per GPU), so while a
// candidate is timed nothing else runs on that GPU, while other slots compile
// ahead on the CPU. The gauge kevo_worker_gpu_timing_utilisation is the
// slots' busy share over the last minute; each evaluation's
// Evaluation.device_use says which GPU, how long it waited and how long it
// held the slot.
//
// After a device fault (illegal address, ...) or a runner killed at its
// timeout the GPU is checked with `runner health` before it takes more work;
// an unhealthy GPU fails evaluations with INFRA_ERROR until a later health
// check passes.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

#include "common/sandbox/sandbox.h"
#include "worker/pipeline/eval_pipeline.h"
#include "worker/pipeline/speed_of_light.h"
#include "worker/runner/protocol.h"

namespace kevo::worker {

// One GPU as `runner probe` describes it.
struct GpuInfo {
  int index = 0;
  std::string name;
  std::string compute_capability;  // "9.0"; HIP reports its own (9.0 on gfx90a)
  std::string arch;                // AMD: "gfx90a:sramecc+:xnack-"; NVIDIA: ""
  int sm_count = 0;                // multiprocessors (AMD: compute units)
  int64_t memory_bytes = 0;
  int64_t l2_bytes = 0;
  int sm_clock_khz = 0;
  int memory_clock_khz = 0;
  int memory_bus_bits = 0;
  double copy_bandwidth_gbs = 0;  // measured; 0 when not measured
  double fp32_gflops = 0;         // measured; 0 when not measured
  double theoretical_bandwidth_gbs = 0;
};
struct GpuProbe {
  int driver_version = 0;  // 13000 = CUDA 13.0
  int runtime_version = 0;
  std::vector<GpuInfo> gpus;
};
// Parses the probe's JSON. Returns InvalidArgument when it is malformed or
// lists no GPU.
absl::StatusOr<GpuProbe> ParseGpuProbe(const std::string& json);

// Which GPUs: for messages and the sandbox.
struct GpuVendor {
  std::string name;         // "NVIDIA", "ROCm"
  std::string runner_name;  // "kevo-runner-cuda"
  // Device nodes the runner must see (globs): /dev/nvidia*; /dev/kfd, /dev/dri/*.
  std::vector<std::string> device_globs;
  // Other folders it must see (the CUDA installation, for cuBLAS).
  std::vector<std::string> extra_paths;
  // The dense f16/bf16 tensor-core peak of a GPU in GFLOP/s from the
  // vendor's datasheet, or 0 when none is known (the roofline of f16/bf16
  // GEMMs then uses the measured FP32 rate and says it reads high).
  double (*tensor_peak_gflops)(const GpuInfo& gpu) = nullptr;
};
const GpuVendor& NvidiaVendor();
const GpuVendor& RocmVendor();

// A GEMM task by its hints (pattern=gemm with a, b, c, m, n, k) whose A
// operand is f32, f16 or bf16: cuBLAS is its NVIDIA baseline, and f16/bf16
// ones are held to the tensor-core roof.
bool IsGemmTask(const v1::Task& task);

// Adds `folder` (resolved) to `paths` unless a visible folder holds it
// already (binding /usr/local/cuda, a symlink, inside a bound /usr fails);
// nothing when it does not exist.
void AddVisibleFolder(std::vector<std::string>& paths, const std::string& folder);

// What a GPU runner may see inside bubblewrap: the system folders, /sys (the
// drivers read PCI topology), the vendor's device nodes and extra paths, the
// runner's folder and the bundle's lib/ beside it.
std::vector<std::string> GpuVisiblePaths(const GpuVendor& vendor, const std::string& runner_path);

// Runs `runner probe` (with --measure when asked) in the sandbox. Returns
// FailedPrecondition "no <vendor> GPU found (<runner> probe: ...)" when the
// runner is missing, fails or finds no GPU.
absl::StatusOr<GpuProbe> ProbeGpus(const sandbox::Sandbox& sandbox, const GpuVendor& vendor,
                                   const std::string& runner_path, const std::string& scratch_dir, bool measure);

// The baseline a candidate is timed against.
struct GpuBaseline {
  // BASELINE_CPU_REFERENCE (the C++ reference timed on this host's CPU by
  // kevo-runner-cpu), or a GPU baseline the runner times in its process:
  // BASELINE_CUBLAS, BASELINE_CUDA_REFERENCE, BASELINE_HIP_REFERENCE.
  // Evaluation.baseline_kind.
  v1::BaselineKind kind = v1::BASELINE_CPU_REFERENCE;
  // --baseline= for a GPU baseline: a .so, or a name the runner knows.
  std::string runner_arg;
  std::string label;  // "cuBLAS", for the profile event
  // What was timed, for the evaluation's notes["baseline"] ("cuBLAS
  // (cublasGemmEx, FP32 compute, no TF32)"; " on GPU i (name)" is added).
  // The CPU reference's note is written here.
  std::string description;
};

struct GpuStagesOptions {
  const GpuVendor* vendor = nullptr;
  // Build cache, golden outputs, timed inputs and scratch folders.
  std::string work_dir;
  std::string runner_path;      // the GPU runner
  std::string cpu_runner_path;  // kevo-runner-cpu: golden outputs, CPU baseline
  std::string runner_hash, cpu_runner_hash;
  absl::Duration run_timeout = absl::Seconds(60);
  // Address-space limit of the CPU runner (a GPU runner gets none: the
  // driver reserves far more address space than it uses).
  int64_t memory_limit_bytes = int64_t{8} << 30;
  double profile_time_cap_s = 3.0;
  // A result beyond the limits by more than this fraction is timed again in
  // a fresh runner and, if it still is, rejected as SUSPICIOUS
  // (worker/pipeline/speed_of_light.h).
  double speed_of_light_margin = kDefaultSpeedOfLightMargin;
  // Called after a successful profile, still holding the GPU's timing slot:
  // times the task's production baselines against the candidate
  // (ProductionTimer). `reference_outputs` are the outputs at the timed
  // binding that correctness is judged against. Unset: none.
  std::function<void(EvalRun& run, const std::string& candidate_so, const std::string& timed_inputs,
                     const std::string& reference_outputs, int gpu_index)>
      time_production;
};

class GpuStages {
 public:
  GpuStages(const sandbox::Sandbox* sandbox, GpuStagesOptions options, GpuProbe probe);
  ~GpuStages();

  // Golden outputs and timed inputs (CPU), then on a GPU: validation of
  // `candidate_so` against `reference_so`'s outputs, and timing against
  // `baseline`. Fills run.ev (timing, speedup, counters, notes "baseline"
  // and "roofline") and returns true, or fails the run (run.Fail) and
  // returns false.
  bool Run(EvalRun& run, const std::string& candidate_so, const std::string& reference_so, const GpuBaseline& baseline);

  // Takes a GPU's timing slot (a free GPU first), health-checks it when an
  // earlier fault left it in doubt, runs `body` on it, checks its health
  // again after a fault, gives the slot back and records the time held
  // (Evaluation.device_use: gpu_index, wait_s, stage_s). Returns body's
  // result, or false after run.Fail() when the GPU is unhealthy. Run() holds
  // its GPU this way; the nvidia backend's KernelBench problems too.
  bool OnGpu(EvalRun& run, const std::function<bool(const GpuInfo& gpu)>& body);

  double TimingUtilisation() const;
  const GpuProbe& probe() const { return probe_; }

 private:
  struct Gpu;
  // The C++ reference timed on this host's CPU at the timed binding, and
  // its outputs there (the baseline of tasks with no GPU baseline).
  struct CpuReferenceProfile {
    runner::TimingSeries timing;
    std::string outputs;
  };

  bool ProfileStage(EvalRun& run, Gpu& gpu, const std::string& candidate_so, const std::string& timed_inputs,
                    const GpuBaseline& baseline, const CpuReferenceProfile* cpu_ref);
  absl::StatusOr<CpuReferenceProfile> CpuReference(const v1::Task& task, const std::string& ref_so,
                                                   const std::string& timed_inputs);
  // Runs the health kernel on `gpu` and records the verdict; returns it.
  bool CheckHealth(Gpu& gpu) const;
  Gpu& PickGpu();
  bool HoldGpu(EvalRun& run, const std::function<bool(Gpu& gpu)>& body);

  const sandbox::Sandbox* sandbox_;
  const GpuStagesOptions options_;
  const GpuProbe probe_;
  const RunnerHarness cpu_harness_;
  const absl::Time start_;
  std::vector<std::unique_ptr<Gpu>> gpus_;
  std::atomic<uint64_t> next_gpu_{0};
  absl::Mutex cpu_ref_mu_;
  std::map<std::string, CpuReferenceProfile> cpu_ref_cache_ ABSL_GUARDED_BY(cpu_ref_mu_);
};

}  // namespace kevo::worker
