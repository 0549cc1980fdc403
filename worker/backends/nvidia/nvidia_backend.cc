#include "worker/backends/nvidia/nvidia_backend.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include <nlohmann/json.hpp>

#include "common/expr.h"
#include "common/hash.h"
#include "common/log.h"
#include "common/status.h"
#include "common/task/task_loader.h"
#include "common/tensor.h"
#include "worker/backends/nvidia/cuda_build.h"
#include "worker/pipeline/eval_pipeline.h"
#include "worker/pipeline/kernel_builder.h"
#include "worker/pipeline/kernelbench_eval.h"
#include "worker/pipeline/production_eval.h"
#include "worker/runner/protocol.h"

namespace kevo::worker {
namespace fs = std::filesystem;
namespace {

const v1::Reference* CudaReference(const v1::Task& task) {
  for (const v1::Reference& r : task.extra_references()) {
    const std::string lang = absl::AsciiStrToLower(r.language());
    if ((lang == "cuda" || lang == "cu") && !r.source().empty()) return &r;
  }
  return nullptr;
}

struct NvEvalRun : EvalRun {
  CudaCompileResult cand;
  BuildResult ref;       // C++ reference (CPU): golden outputs, CPU baseline
  BuildResult cuda_ref;  // the task's CUDA reference, when it has one
};

// KernelBench problems on this worker: the evaluator when an interpreter with
// a CUDA torch was found, else why not.
struct KernelBenchSetup {
  std::optional<KernelBenchProbe> probe;
  std::optional<KernelBenchOptions> options;
  std::string unavailable;
};

class NvidiaBackend final : public RivalBackend {
 public:
  NvidiaBackend(NvidiaBackendOptions options, std::unique_ptr<sandbox::Sandbox> sandbox, GpuProbe probe,
                std::string arch, std::string nvcc_version, std::string host_compiler_version,
                std::string cpu_runner_hash, std::string cuda_runner_hash, KernelBenchSetup kernelbench)
      : options_(std::move(options)),
        sandbox_(std::move(sandbox)),
        probe_(std::move(probe)),
        arch_(std::move(arch)),
        nvcc_version_(std::move(nvcc_version)),
        host_compiler_version_(std::move(host_compiler_version)),
        cuda_builder_(sandbox_.get(), options_.nvcc, absl::StrCat(nvcc_version_, "\n", arch_),
                      options_.work_dir + "/build", options_.compile_timeout,
                      std::max<int64_t>(options_.memory_limit_bytes, int64_t{8} << 30), CompilerVisible(),
                      NvccLayout()),
        cpu_builder_(sandbox_.get(), options_.host_compiler, host_compiler_version_, options_.work_dir + "/build",
                     options_.compile_timeout, std::max<int64_t>(options_.memory_limit_bytes, int64_t{4} << 30),
                     CompilerVisible()),
        gpu_stages_(sandbox_.get(), StagesOptions(options_, cpu_runner_hash, cuda_runner_hash, this), probe_),
        kernelbench_probe_(std::move(kernelbench.probe)),
        kernelbench_unavailable_(std::move(kernelbench.unavailable)) {
    if (kernelbench.options && options_.time_production) {
      // Production baselines (PyTorch eager and compiled, cuBLAS) run under
      // the interpreter KernelBench problems use.
      ProductionOptions p;
      p.python = kernelbench.options->python;
      p.runner_path = (fs::path(options_.runner_path).parent_path() / kProductionRunnerName).string();
      p.platform = "nvidia";
      p.work_dir = options_.work_dir;
      p.visible_paths = kernelbench.options->extra_visible_paths;
      for (const std::string& v : GpuVisiblePaths(NvidiaVendor(), options_.runner_path)) p.visible_paths.push_back(v);
      p.visible_paths.push_back(options_.work_dir + "/build");
      p.visible_paths.push_back(options_.work_dir + "/inputs");
      p.env = kernelbench.options->env;
      p.time_cap_s = options_.profile_time_cap_s;
      p.timeout =
          options_.run_timeout + absl::Seconds(4 * options_.profile_time_cap_s);  // its loop may run to 3x the cap
      p.torch_compile_timeout = options_.torch_compile_timeout;
      p.memory_limit_bytes = 0;  // CUDA reserves far more address space than it uses
      production_ = std::make_unique<ProductionTimer>(sandbox_.get(), std::move(p));
    }
    if (kernelbench.options) {
      kernelbench_ = std::make_unique<KernelBenchEvaluator>(sandbox_.get(), *std::move(kernelbench.options));
    }
  }

  absl::StatusOr<v1::Hello> Describe() override;
  std::map<std::string, double> Gauges() const override {
    return {{"kevo_worker_gpu_timing_utilisation", gpu_stages_.TimingUtilisation()}};
  }

 protected:
  v1::Evaluation Run(const v1::Task& task, const v1::Candidate& candidate, const v1::Candidate* rival,
                     const EventSink& on_event) override;

 private:
  static std::vector<std::string> CompilerVisible() {
    std::vector<std::string> v = SandboxSystemPaths();
    AddVisibleFolder(v, "/usr/local/cuda");
    return v;
  }
  static GpuStagesOptions StagesOptions(const NvidiaBackendOptions& o, const std::string& cpu_hash,
                                        const std::string& cuda_hash, const NvidiaBackend* self) {
    GpuStagesOptions g;
    g.time_production = [self](EvalRun& run, const std::string& candidate_so, const std::string& inputs,
                               const std::string& reference_outputs, int gpu_index) {
      if (self->production_) {
        self->production_->Time(run, candidate_so, inputs, reference_outputs, absl::StrCat("cuda:", gpu_index));
      }
    };
    g.vendor = &NvidiaVendor();
    g.work_dir = o.work_dir;
    g.runner_path = o.runner_path;
    g.cpu_runner_path = o.cpu_runner_path;
    g.runner_hash = cuda_hash;
    g.cpu_runner_hash = cpu_hash;
    g.run_timeout = o.run_timeout;
    g.memory_limit_bytes = o.memory_limit_bytes;
    g.profile_time_cap_s = o.profile_time_cap_s;
    g.speed_of_light_margin = o.speed_of_light_margin;
    return g;
  }

  bool CompileStage(NvEvalRun& run) const;
  v1::Evaluation EvaluateKernelBench(const v1::Task& task, const v1::Candidate& candidate, const EventSink& on_event);
  // The baseline: cuBLAS for gemm tasks, else the CUDA reference, else the CPU.
  static GpuBaseline BaselineFor(const NvEvalRun& run);
  v1::Fingerprint MakeFingerprint() const;

  const NvidiaBackendOptions options_;
  const std::unique_ptr<sandbox::Sandbox> sandbox_;
  const GpuProbe probe_;
  const std::string arch_;
  const std::string nvcc_version_;
  const std::string host_compiler_version_;
  const KernelBuilder cuda_builder_;
  const KernelBuilder cpu_builder_;
  GpuStages gpu_stages_;
  const std::optional<KernelBenchProbe> kernelbench_probe_;
  const std::string kernelbench_unavailable_;
  std::unique_ptr<KernelBenchEvaluator> kernelbench_;
  std::unique_ptr<ProductionTimer> production_;  // null without a CUDA torch
};

v1::Fingerprint NvidiaBackend::MakeFingerprint() const {
  v1::Fingerprint fp;
  fp.set_host(HostName());
  fp.set_cpu_model(ProcField("/proc/cpuinfo", "model name"));
  fp.set_compiler(nvcc_version_);
  for (const std::string& f : NvccCandidateFlags(arch_)) fp.add_flags(f);
  fp.set_os(OsDescription());
  fp.set_device(probe_.gpus.empty() ? "" : probe_.gpus.front().name);
  fp.set_sandbox(absl::StrCat(sandbox_->UsesBwrap() ? "bwrap+" : "", "seccomp-denylist+rlimits"));
  return fp;
}

absl::StatusOr<v1::Hello> NvidiaBackend::Describe() {
  v1::Hello hello;
  const GpuInfo& g = probe_.gpus.front();
  hello.set_platform("nvidia");
  hello.set_device(probe_.gpus.size() == 1 ? g.name : absl::StrCat(g.name, " x", probe_.gpus.size()));
  hello.add_toolchains(nvcc_version_);
  hello.add_toolchains(host_compiler_version_);
  hello.add_languages("cuda");
  *hello.mutable_fingerprint() = MakeFingerprint();
  hello.set_mem_bandwidth_gbs(g.copy_bandwidth_gbs);
  hello.set_fp32_peak_gflops(g.fp32_gflops);
  hello.set_compile_only(false);
  auto& caps = *hello.mutable_capabilities();
  caps["gpus"] = absl::StrCat(probe_.gpus.size());
  caps["compute_capability"] = g.compute_capability;
  caps["arch"] = arch_;
  caps["sm_count"] = absl::StrCat(g.sm_count);
  caps["memory_bytes"] = absl::StrCat(g.memory_bytes);
  caps["l2_bytes"] = absl::StrCat(g.l2_bytes);
  caps["sm_clock_mhz"] = absl::StrCat(g.sm_clock_khz / 1000);
  caps["memory_clock_mhz"] = absl::StrCat(g.memory_clock_khz / 1000);
  caps["memory_bus_bits"] = absl::StrCat(g.memory_bus_bits);
  caps["driver_cuda_version"] = absl::StrCat(probe_.driver_version / 1000, ".", (probe_.driver_version % 1000) / 10);
  caps["runtime_cuda_version"] = absl::StrCat(probe_.runtime_version / 1000, ".", (probe_.runtime_version % 1000) / 10);
  caps["copy_bandwidth_gbs"] = absl::StrCat(g.copy_bandwidth_gbs);
  caps["theoretical_bandwidth_gbs"] = absl::StrCat(g.theoretical_bandwidth_gbs);
  caps["fp32_gflops"] = absl::StrCat(g.fp32_gflops);
  if (const double tc = NvidiaVendor().tensor_peak_gflops(g); tc > 0) {
    caps["bf16_tensor_peak_gflops"] = absl::StrCat(tc, " (datasheet, dense)");
  }
  caps["sandbox"] = hello.fingerprint().sandbox();
  if (kernelbench_) {
    const KernelBenchProbe& kb = *kernelbench_probe_;
    hello.add_languages("python");
    hello.add_toolchains(absl::StrCat("Python ", kb.python_version, ", torch ", kb.torch));
    caps["kernelbench"] = kb.python;
    caps["kernelbench_torch"] = absl::StrCat(kb.torch, " (CUDA ", kb.torch_cuda, ")");
    caps["kernelbench_triton"] = kb.triton.empty() ? "none" : kb.triton;
    caps["kernelbench_torch_compile"] = kb.torch_compile ? "yes" : "no";
  } else {
    caps["kernelbench"] = absl::StrCat("unavailable: ", kernelbench_unavailable_);
  }
  return hello;
}

v1::Evaluation NvidiaBackend::EvaluateKernelBench(const v1::Task& task, const v1::Candidate& candidate,
                                                  const EventSink& on_event) {
  if (!kernelbench_) {
    EvalRun run{task, candidate, on_event};
    BeginEvaluation(task, candidate, "nvidia", MakeFingerprint(), &run.ev);
    run.stage_start = absl::Now();
    run.Fail(v1::STAGE_COMPILE, v1::INFRA_ERROR,
             absl::StrCat("this nvidia worker cannot run KernelBench problems: ", kernelbench_unavailable_));
    LogWarning("kernelbench ", task.name(), " refused: ", kernelbench_unavailable_);
    return run.Finish(options_.keep_eval_dirs);
  }
  return kernelbench_->Evaluate(
      task, candidate, on_event, "nvidia", MakeFingerprint(),
      [this](EvalRun& run, const std::function<bool(const std::string&)>& stages) {
        return gpu_stages_.OnGpu(run, [&](const GpuInfo& gpu) { return stages(absl::StrCat("cuda:", gpu.index)); });
      });
}

v1::Evaluation NvidiaBackend::Run(const v1::Task& task_in, const v1::Candidate& candidate, const v1::Candidate* rival,
                                  const EventSink& on_event) {
  const v1::Task task = kevo::task::TimedOn(task_in, "nvidia");  // this platform's timed binding
  if (task.format() == v1::TASK_FORMAT_KERNELBENCH) return EvaluateKernelBench(task, candidate, on_event);
  NvEvalRun run{{task, candidate, on_event}};
  run.rival = rival;
  v1::Evaluation& ev = run.ev;
  BeginEvaluation(task, candidate, "nvidia", MakeFingerprint(), &ev);
  if (CompileStage(run) && gpu_stages_.Run(run, run.cand.build.library_path, run.ref.library_path, BaselineFor(run))) {
    ev.set_status(v1::OK);
  }
  return run.Finish(options_.keep_eval_dirs);
}

bool NvidiaBackend::CompileStage(NvEvalRun& run) const {
  const v1::Task& task = run.task;
  run.Begin(v1::STAGE_COMPILE);
  auto fail = [&](v1::EvalStatus status, const std::string& message) {
    return run.Fail(v1::STAGE_COMPILE, status, message);
  };
  auto wrapper = TaskWrapperSource(task);
  if (!wrapper.ok()) return fail(v1::INFRA_ERROR, std::string(wrapper.status().message()));
  run.cand = CompileCudaCandidate(cuda_builder_, task, run.candidate, arch_, options_.skip_symbol_check);
  auto& counters = *run.ev.mutable_profile();
  if (run.cand.max_registers >= 0) counters["registers"] = run.cand.max_registers;
  if (run.cand.max_smem_bytes >= 0) counters["smem_bytes"] = run.cand.max_smem_bytes;
  if (run.cand.spill_bytes >= 0) counters["spill_store_bytes"] = run.cand.spill_bytes;
  if (run.cand.status != v1::OK) {
    run.ev.mutable_diagnostics()->set_compiler_output(run.cand.build.compiler_output);
    if (!run.cand.forbidden.empty()) {
      run.ev.mutable_diagnostics()->set_violation(absl::StrJoin(run.cand.forbidden, ", "));
    }
    return fail(run.cand.status, run.cand.message);
  }
  auto ref =
      BuildTaskReference(cpu_builder_, {task.reference().source(), CppReferenceFlags(), *wrapper}, "C++ reference");
  if (!ref.ok()) return fail(v1::INFRA_ERROR, std::string(ref.status().message()));
  run.ref = *std::move(ref);
  if (const v1::Reference* cuda_ref = CudaReference(task); cuda_ref != nullptr && !IsGemmTask(task)) {
    auto built =
        BuildTaskReference(cuda_builder_, {cuda_ref->source(), NvccCandidateFlags(arch_), *wrapper}, "CUDA reference");
    if (!built.ok()) return fail(v1::INFRA_ERROR, std::string(built.status().message()));
    run.cuda_ref = *std::move(built);
  }
  const std::string rival_note = BuildRival(
      run, production_ && options_.time_production, [&](const v1::Candidate& rival) -> absl::StatusOr<BuildResult> {
        CudaCompileResult built = CompileCudaCandidate(cuda_builder_, task, rival, arch_, options_.skip_symbol_check);
        if (built.status != v1::OK) return absl::FailedPreconditionError(built.message);
        return std::move(built.build);
      });
  std::string resources;
  if (run.cand.max_registers >= 0) {
    resources = absl::StrCat("; ", run.cand.max_registers, " registers, ", run.cand.max_smem_bytes, " B smem, ",
                             run.cand.spill_bytes, " B spilled");
  }
  run.Emit(v1::STAGE_COMPILE, /*ok=*/true,
           absl::StrCat("nvcc ", arch_, run.cand.build.cache_hit ? " (cached)" : "",
                        absl::StrFormat(" %.1fs", run.cand.build.seconds), resources, rival_note));
  return true;
}

GpuBaseline NvidiaBackend::BaselineFor(const NvEvalRun& run) {
  if (IsGemmTask(run.task)) {
    return {v1::BASELINE_CUBLAS, "cublas", "cuBLAS", "cuBLAS (cublasGemmEx, FP32 compute, no TF32)"};
  }
  if (!run.cuda_ref.library_path.empty()) {
    return {v1::BASELINE_CUDA_REFERENCE, run.cuda_ref.library_path, "CUDA reference",
            "the task's reference.cu (a naive CUDA port)"};
  }
  return {};
}

// The interpreters to try for KernelBench problems: the configured one, else
// python3 on PATH and Debian's.
std::vector<std::string> KernelBenchPythons(const std::string& configured) {
  if (!configured.empty()) return {configured};
  std::vector<std::string> out;
  if (const char* path = std::getenv("PATH"); path != nullptr) {
    for (absl::string_view dir : absl::StrSplit(path, ':', absl::SkipEmpty())) {
      const std::string p = absl::StrCat(dir, "/python3");
      if (access(p.c_str(), X_OK) == 0) {
        out.push_back(p);
        break;
      }
    }
  }
  if (std::find(out.begin(), out.end(), kDefaultPython) == out.end()) out.push_back(kDefaultPython);
  return out;
}

// Finds an interpreter whose torch runs on the GPUs and the evaluator's
// options for it; or why there is none (the worker then serves CUDA C++
// only and says so in its Hello).
KernelBenchSetup SetUpKernelBench(const sandbox::Sandbox& sb, const NvidiaBackendOptions& o, const GpuProbe& gpus) {
  KernelBenchSetup setup;
  const std::string runner = o.kernelbench_runner_path.empty()
                                 ? (fs::path(o.runner_path).parent_path() / kKernelBenchRunnerName).string()
                                 : o.kernelbench_runner_path;
  const std::string cuda_home = fs::path(o.nvcc).parent_path().parent_path().string();
  std::vector<std::string> env = {absl::StrCat("CUDA_HOME=", cuda_home),
                                  // load_inline builds for this GPU only.
                                  absl::StrCat("TORCH_CUDA_ARCH_LIST=", gpus.gpus.front().compute_capability)};
  // Settings the host wants every GPU program to keep (NVLink multicast off).
  for (const char* name : {"NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS"}) {
    if (const char* v = std::getenv(name); v != nullptr) env.push_back(absl::StrCat(name, "=", v));
  }
  std::vector<std::string> reasons;
  for (const std::string& python : KernelBenchPythons(o.kernelbench_python)) {
    // ninja and the interpreter's tools beside it; nvcc for load_inline.
    std::vector<std::string> py_env = env;
    py_env.push_back(absl::StrCat("PATH=", fs::path(python).parent_path().string(), ":", cuda_home,
                                  "/bin:/usr/local/bin:/usr/bin:/bin"));
    auto probe = ProbeKernelBench(sb, python, runner, "cuda", absl::StrCat(o.work_dir, "/evals/kbprobe-", getpid()),
                                  GpuVisiblePaths(NvidiaVendor(), o.runner_path), py_env);
    if (!probe.ok()) {
      reasons.emplace_back(probe.status().message());
      continue;
    }
    KernelBenchOptions k;
    k.python = python;
    k.runner_path = runner;
    k.device = "cuda";
    k.work_dir = o.work_dir + "/kernelbench";
    k.extra_visible_paths = probe->visible_paths;
    k.env = py_env;
    k.compile_timeout = o.compile_timeout;
    k.run_timeout = o.run_timeout;
    k.torch_compile_timeout = o.torch_compile_timeout;
    k.memory_limit_bytes = 0;  // CUDA reserves far more address space than it uses
    k.open_files = 4096;
    k.profile_time_cap_s = o.profile_time_cap_s;
    LogInfo("KernelBench on the GPU: ", python, " (Python ", probe->python_version, ", torch ", probe->torch, ", CUDA ",
            probe->torch_cuda, ", Triton ", probe->triton.empty() ? "none" : probe->triton, ", torch.compile ",
            probe->torch_compile ? "yes" : "no", ")");
    setup.probe = *std::move(probe);
    setup.options = std::move(k);
    return setup;
  }
  setup.unavailable = absl::StrJoin(reasons, "; ");
  LogWarning("no KernelBench problems on this worker (no Python with a CUDA torch): ", setup.unavailable);
  return setup;
}

// "Cuda compilation tools, release 13.0, V13.0.88" out of nvcc --version.
std::string NvccRelease(const std::string& s) {
  for (absl::string_view line : absl::StrSplit(s, '\n')) {
    if (absl::StrContains(line, "release")) return std::string(line);
  }
  return FirstLineOf(s);
}

}  // namespace

std::string FindNvcc(const std::string& configured) {
  return FindTool(configured, "CUDACXX", {"/usr/local/cuda/bin/nvcc", "/usr/local/bin/nvcc", "/usr/bin/nvcc"});
}

absl::StatusOr<std::unique_ptr<Backend>> CreateNvidiaBackend(const NvidiaBackendOptions& options) {
  NvidiaBackendOptions opts = options;
  if (opts.work_dir.empty()) return absl::InvalidArgumentError("nvidia backend: work_dir is required");
  if (opts.profile_time_cap_s <= 0) {
    return absl::InvalidArgumentError("nvidia backend: profile_time_cap_s must be > 0");
  }
  KEVO_ASSIGN_OR_RETURN(opts.work_dir, PrepareWorkDir(opts.work_dir, "nvidia backend"));
  opts.runner_path = RunnerPath(opts.runner_path, "kevo-runner-cuda");
  opts.cpu_runner_path = RunnerPath(opts.cpu_runner_path, "kevo-runner-cpu");
  KEVO_ASSIGN_OR_RETURN(std::unique_ptr<sandbox::Sandbox> sb,
                        sandbox::Sandbox::Create({opts.use_bwrap, opts.bwrap_path}));
  // GPUs first: without one nothing else matters.
  KEVO_ASSIGN_OR_RETURN(GpuProbe probe,
                        ProbeGpus(*sb, NvidiaVendor(), opts.runner_path,
                                  absl::StrCat(opts.work_dir, "/evals/probe-", getpid()), opts.measure));
  if (access(opts.cpu_runner_path.c_str(), X_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("nvidia backend: ", opts.cpu_runner_path, " (golden outputs) is missing or not executable"));
  }
  opts.nvcc = FindNvcc(opts.nvcc);
  if (opts.nvcc.empty()) {
    return absl::FailedPreconditionError(
        "nvidia backend: nvcc not found (set CUDACXX or install CUDA under /usr/local/cuda)");
  }
  auto nvcc_version = RunVersion(*sb, opts.nvcc);
  if (!nvcc_version.ok() || !nvcc_version->Succeeded()) {
    return absl::FailedPreconditionError(absl::StrCat("nvidia backend: ", opts.nvcc, " does not run"));
  }
  auto cxx_version = RunVersion(*sb, opts.host_compiler);
  if (!cxx_version.ok() || !cxx_version->Succeeded()) {
    return absl::FailedPreconditionError(
        absl::StrCat("nvidia backend: host compiler '", opts.host_compiler, "' does not run"));
  }
  std::string arch = opts.arch.empty() ? CudaArchFor(probe.gpus.front().compute_capability) : opts.arch;
  if (arch.size() < 5 || arch.rfind("sm_", 0) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("nvidia backend: no nvcc target for compute capability ", probe.gpus.front().compute_capability));
  }
  auto cpu_runner = ReadFileBytes(opts.cpu_runner_path);
  auto cuda_runner = ReadFileBytes(opts.runner_path);
  if (!cpu_runner.ok() || !cuda_runner.ok()) {
    return absl::FailedPreconditionError("nvidia backend: cannot read the runners");
  }
  for (const GpuInfo& g : probe.gpus) {
    LogInfo("GPU ", g.index, ": ", g.name, ", compute capability ", g.compute_capability, ", ", g.sm_count, " SMs, ",
            g.memory_bytes >> 20, " MiB, L2 ", g.l2_bytes >> 20, " MiB, copy ", g.copy_bandwidth_gbs, " GB/s, FP32 ",
            g.fp32_gflops, " GFLOP/s");
  }
  KernelBenchSetup kernelbench = SetUpKernelBench(*sb, opts, probe);
  return std::make_unique<NvidiaBackend>(opts, std::move(sb), std::move(probe), arch,
                                         NvccRelease(nvcc_version->stdout_data), FirstLineOf(cxx_version->stdout_data),
                                         Sha256Hex(*cpu_runner), Sha256Hex(*cuda_runner), std::move(kernelbench));
}
}  // namespace kevo::worker
