#include "worker/backends/nvidia/nvidia_backend.h"

#include <glob.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <thread>

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/expr.h"
#include "common/hash.h"
#include "common/log.h"
#include "common/status.h"
#include "common/tensor.h"
#include "worker/backends/cpu/eval_pipeline.h"
#include "worker/backends/cpu/kernel_builder.h"
#include "worker/backends/cpu/kernelbench_eval.h"
#include "worker/backends/nvidia/cuda_build.h"
#include "worker/runner/protocol.h"

namespace kevo::worker {
namespace fs = std::filesystem;
namespace {

const std::vector<std::string>& ReferenceFlags() {
  static const auto* flags = new std::vector<std::string>{"-O2", "-fPIC"};
  return *flags;
}

std::vector<std::string> Glob(const std::string& pattern) {
  std::vector<std::string> out;
  glob_t g{};
  if (glob(pattern.c_str(), 0, nullptr, &g) == 0) {
    for (size_t i = 0; i < g.gl_pathc; ++i) out.push_back(g.gl_pathv[i]);
  }
  globfree(&g);
  return out;
}

// Adds the CUDA installation to `paths` unless a visible folder holds it
// already (binding /usr/local/cuda, a symlink, inside a bound /usr fails).
void AddCudaInstallation(std::vector<std::string>& paths) {
  std::error_code ec;
  const fs::path real = fs::weakly_canonical("/usr/local/cuda", ec);
  if (ec) return;
  for (const std::string& p : paths) {
    if (real.string().rfind(p + "/", 0) == 0) return;
  }
  paths.push_back(real.string());
}

// What a GPU runner may see inside bubblewrap: the system folders, /sys (the
// driver reads PCI topology), the NVIDIA device nodes, the CUDA installation
// (cuBLAS), the runner's folder and the bundle's lib/ beside it.
std::vector<std::string> GpuVisiblePaths(const std::string& runner_path) {
  std::vector<std::string> paths = SandboxSystemPaths();
  paths.push_back("/sys");
  for (const std::string& dev : Glob("/dev/nvidia*")) paths.push_back(dev);
  AddCudaInstallation(paths);
  const fs::path dir = fs::path(runner_path).parent_path();
  paths.push_back(dir.string());
  paths.push_back((dir.parent_path() / "lib").string());
  return paths;
}

std::string Tail(const std::string& s, size_t n) {
  return s.size() <= n ? s : "..." + s.substr(s.size() - n);
}

bool IsGemmTask(const v1::Task& task) {
  auto it = task.hints().find("pattern");
  if (it == task.hints().end() || it->second != "gemm") return false;
  for (const char* key : {"a", "b", "c", "m", "n", "k"}) {
    if (!task.hints().contains(key)) return false;
  }
  for (const auto& in : task.inputs()) {
    if (in.name() == task.hints().at("a")) {
      return in.dtype() == v1::F32 || in.dtype() == v1::F16 || in.dtype() == v1::BF16;
    }
  }
  return false;
}

// The dtype of a GEMM task's A operand when its multiplies run on tensor
// cores (f16, bf16), else DTYPE_UNSPECIFIED.
v1::DType TensorCoreDType(const v1::Task& task) {
  if (!IsGemmTask(task)) return v1::DTYPE_UNSPECIFIED;
  for (const auto& in : task.inputs()) {
    if (in.name() == task.hints().at("a") && (in.dtype() == v1::F16 || in.dtype() == v1::BF16)) {
      return in.dtype();
    }
  }
  return v1::DTYPE_UNSPECIFIED;
}

// Dense f16/bf16 tensor-core peak in GFLOP/s from the vendor's datasheet
// (H100 SXM and H200 SXM: 989.4 TFLOP/s; docs/nvidia.md), or 0 for a GPU
// without a figure here. Not measured: mma.sync, the instruction a short
// probe kernel could time, reaches only part of Hopper's wgmma rate.
double DatasheetTensorPeakGflops(const GpuInfo& gpu) {
  if (absl::StrContains(gpu.name, "H200") ||
      (absl::StrContains(gpu.name, "H100") && absl::StrContains(gpu.name, "HBM3"))) {
    return 989.4e3;
  }
  return 0;
}

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

// One GPU: its timing slot and its health.
struct Gpu {
  GpuInfo info;
  std::unique_ptr<RunnerHarness> harness;  // kevo-runner-cuda --device=index
  absl::Mutex slot;                        // held by validate + profile
  absl::Mutex mu;
  bool healthy ABSL_GUARDED_BY(mu) = true;
  // When the slot was taken (InfinitePast while free), and the busy
  // intervals of the last kUtilisationWindow.
  absl::Time held_since ABSL_GUARDED_BY(mu) = absl::InfinitePast();
  std::deque<std::pair<absl::Time, absl::Time>> busy ABSL_GUARDED_BY(mu);
};

// The window of kevo_worker_gpu_timing_utilisation: long enough to smooth
// over a few evaluations, short enough to show the current job's use rather
// than the worker's whole life.
constexpr absl::Duration kUtilisationWindow = absl::Seconds(60);

// The C++ reference timed on this host's CPU at the timed binding, and its
// outputs there (the baseline of tasks with no GPU baseline).
struct CpuReferenceProfile {
  runner::TimingSeries timing;
  std::string outputs;
};

// KernelBench problems on this worker: the evaluator when an interpreter with
// a CUDA torch was found, else why not.
struct KernelBenchSetup {
  std::optional<KernelBenchProbe> probe;
  std::optional<KernelBenchOptions> options;
  std::string unavailable;
};

class NvidiaBackend final : public Backend {
 public:
  NvidiaBackend(NvidiaBackendOptions options, std::unique_ptr<sandbox::Sandbox> sandbox,
                GpuProbe probe, std::string arch, std::string nvcc_version,
                std::string host_compiler_version, std::string cpu_runner_hash,
                std::string cuda_runner_hash, KernelBenchSetup kernelbench)
      : options_(std::move(options)),
        sandbox_(std::move(sandbox)),
        probe_(std::move(probe)),
        arch_(std::move(arch)),
        nvcc_version_(std::move(nvcc_version)),
        host_compiler_version_(std::move(host_compiler_version)),
        cuda_builder_(sandbox_.get(), options_.nvcc, absl::StrCat(nvcc_version_, "\n", arch_),
                      options_.work_dir + "/build", options_.compile_timeout,
                      std::max<int64_t>(options_.memory_limit_bytes, int64_t{8} << 30),
                      CompilerVisible(), NvccLayout()),
        cpu_builder_(sandbox_.get(), options_.host_compiler, host_compiler_version_,
                     options_.work_dir + "/build", options_.compile_timeout,
                     std::max<int64_t>(options_.memory_limit_bytes, int64_t{4} << 30),
                     CompilerVisible()),
        cpu_harness_(sandbox_.get(), CpuHarnessOptions(options_, cpu_runner_hash)),
        start_(absl::Now()),
        kernelbench_probe_(std::move(kernelbench.probe)),
        kernelbench_unavailable_(std::move(kernelbench.unavailable)) {
    if (kernelbench.options) {
      kernelbench_ = std::make_unique<KernelBenchEvaluator>(sandbox_.get(), *std::move(kernelbench.options));
    }
    for (const GpuInfo& info : probe_.gpus) {
      auto gpu = std::make_unique<Gpu>();
      gpu->info = info;
      RunnerHarnessOptions h;
      h.runner_path = options_.runner_path;
      h.work_dir = absl::StrCat(options_.work_dir, "/gpu", info.index);
      h.visible_paths = GpuVisiblePaths(options_.runner_path);
      h.visible_paths.push_back(options_.work_dir + "/build");
      h.visible_paths.push_back(options_.work_dir + "/inputs");
      h.run_timeout = options_.run_timeout;
      h.memory_limit_bytes = 0;  // see NvidiaBackendOptions::memory_limit_bytes
      h.open_files = 1024;
      h.runner_hash = cuda_runner_hash;
      h.extra_args = {absl::StrCat("--device=", info.index)};
      std::error_code ec;
      fs::create_directories(h.work_dir + "/evals", ec);
      gpu->harness = std::make_unique<RunnerHarness>(sandbox_.get(), std::move(h));
      gpus_.push_back(std::move(gpu));
    }
  }

  absl::StatusOr<v1::Hello> Describe() override;
  v1::Evaluation Evaluate(const v1::Task& task, const v1::Candidate& candidate,
                          const EventSink& on_event) override;
  std::map<std::string, double> Gauges() const override {
    return {{"kevo_worker_gpu_timing_utilisation", TimingUtilisation()}};
  }

 private:
  static std::vector<std::string> CompilerVisible() {
    std::vector<std::string> v = SandboxSystemPaths();
    AddCudaInstallation(v);
    return v;
  }
  static RunnerHarnessOptions CpuHarnessOptions(const NvidiaBackendOptions& o, const std::string& hash) {
    RunnerHarnessOptions h;
    h.runner_path = o.cpu_runner_path;
    h.work_dir = o.work_dir;
    h.visible_paths = SandboxSystemPaths();
    h.visible_paths.push_back("/sys/devices/system/cpu");
    const fs::path dir = fs::path(o.cpu_runner_path).parent_path();
    h.visible_paths.push_back(dir.string());
    h.visible_paths.push_back((dir.parent_path() / "lib").string());
    h.visible_paths.push_back(o.work_dir + "/build");
    h.visible_paths.push_back(o.work_dir + "/inputs");
    h.run_timeout = o.run_timeout;
    h.memory_limit_bytes = o.memory_limit_bytes;
    h.runner_hash = hash;
    return h;
  }

  bool CompileStage(NvEvalRun& run) const;
  bool GpuStages(NvEvalRun& run);
  // Takes a GPU's timing slot (a free GPU first), health-checks it when an
  // earlier fault left it in doubt, runs `body` on it, checks its health
  // again after a fault, gives the slot back and records the time held
  // (profile counters gpu_index, gpu_wait_s, gpu_stage_s). Returns body's
  // result.
  bool OnGpu(EvalRun& run, const std::function<bool(Gpu&)>& body);
  v1::Evaluation EvaluateKernelBench(const v1::Task& task, const v1::Candidate& candidate,
                                     const EventSink& on_event);
  bool ProfileStage(NvEvalRun& run, Gpu& gpu, const std::string& timed_inputs,
                    const std::string& baseline_kind, const CpuReferenceProfile* cpu_ref);
  absl::StatusOr<CpuReferenceProfile> CpuReference(const v1::Task& task, const std::string& ref_so,
                                                   const std::string& timed_inputs);
  // Runs the health kernel on `gpu` and records the verdict; returns it.
  bool CheckHealth(Gpu& gpu) const;
  Gpu& PickGpu();
  double TimingUtilisation() const;
  v1::Fingerprint MakeFingerprint() const;

  const NvidiaBackendOptions options_;
  const std::unique_ptr<sandbox::Sandbox> sandbox_;
  const GpuProbe probe_;
  const std::string arch_;
  const std::string nvcc_version_;
  const std::string host_compiler_version_;
  const KernelBuilder cuda_builder_;
  const KernelBuilder cpu_builder_;
  const RunnerHarness cpu_harness_;
  const absl::Time start_;
  std::vector<std::unique_ptr<Gpu>> gpus_;
  std::atomic<uint64_t> next_gpu_{0};
  absl::Mutex cpu_ref_mu_;
  std::map<std::string, CpuReferenceProfile> cpu_ref_cache_ ABSL_GUARDED_BY(cpu_ref_mu_);
  const std::optional<KernelBenchProbe> kernelbench_probe_;
  const std::string kernelbench_unavailable_;
  std::unique_ptr<KernelBenchEvaluator> kernelbench_;
};

double NvidiaBackend::TimingUtilisation() const {
  const absl::Time now = absl::Now();
  const absl::Time from = std::max(start_, now - kUtilisationWindow);
  const double span = absl::ToDoubleSeconds(now - from) * static_cast<double>(gpus_.size());
  if (span <= 0) return 0;
  double busy = 0;
  for (const auto& g : gpus_) {
    absl::MutexLock l(&g->mu);
    for (const auto& [a, b] : g->busy) {
      if (b > from) busy += absl::ToDoubleSeconds(b - std::max(a, from));
    }
    if (g->held_since != absl::InfinitePast()) busy += absl::ToDoubleSeconds(now - std::max(g->held_since, from));
  }
  return std::min(1.0, busy / span);
}

v1::Fingerprint NvidiaBackend::MakeFingerprint() const {
  v1::Fingerprint fp;
  fp.set_host(HostName());
  fp.set_cpu_model(ProcField("/proc/cpuinfo", "model name"));
  fp.set_compiler(nvcc_version_);
  for (const std::string& f : NvccCandidateFlags(arch_)) fp.add_flags(f);
  fp.set_os(OsDescription());
  fp.set_device(gpus_.empty() ? "" : gpus_.front()->info.name);
  fp.set_sandbox(absl::StrCat(sandbox_->UsesBwrap() ? "bwrap+" : "", "seccomp-denylist+rlimits"));
  return fp;
}

absl::StatusOr<v1::Hello> NvidiaBackend::Describe() {
  v1::Hello hello;
  const GpuInfo& g = gpus_.front()->info;
  hello.set_platform("nvidia");
  hello.set_device(gpus_.size() == 1 ? g.name : absl::StrCat(g.name, " x", gpus_.size()));
  hello.add_toolchains(nvcc_version_);
  hello.add_toolchains(host_compiler_version_);
  hello.add_languages("cuda");
  *hello.mutable_fingerprint() = MakeFingerprint();
  hello.set_mem_bandwidth_gbs(g.copy_bandwidth_gbs);
  hello.set_fp32_peak_gflops(g.fp32_gflops);
  hello.set_compile_only(false);
  auto& caps = *hello.mutable_capabilities();
  caps["gpus"] = absl::StrCat(gpus_.size());
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
  if (const double tc = DatasheetTensorPeakGflops(g); tc > 0) {
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
    run.ev.set_finished_unix_micros(UnixMicros());
    LogWarning("kernelbench ", task.name(), " refused: ", kernelbench_unavailable_);
    return std::move(run.ev);
  }
  return kernelbench_->Evaluate(
      task, candidate, on_event, "nvidia", MakeFingerprint(),
      [this](EvalRun& run, const std::function<bool(const std::string&)>& stages) {
        return OnGpu(run, [&](Gpu& gpu) { return stages(absl::StrCat("cuda:", gpu.info.index)); });
      });
}

v1::Evaluation NvidiaBackend::Evaluate(const v1::Task& task, const v1::Candidate& candidate,
                                       const EventSink& on_event) {
  if (task.format() == v1::TASK_FORMAT_KERNELBENCH) return EvaluateKernelBench(task, candidate, on_event);
  NvEvalRun run{{task, candidate, on_event}};
  v1::Evaluation& ev = run.ev;
  BeginEvaluation(task, candidate, "nvidia", MakeFingerprint(), &ev);
  if (CompileStage(run) && GpuStages(run)) ev.set_status(v1::OK);
  ev.set_finished_unix_micros(UnixMicros());
  if (!options_.keep_eval_dirs && !run.scratch.empty()) {
    std::error_code ec;
    fs::remove_all(run.scratch, ec);
  }
  return std::move(ev);
}

bool NvidiaBackend::CompileStage(NvEvalRun& run) const {
  const v1::Task& task = run.task;
  run.stage_start = absl::Now();
  auto fail = [&](v1::EvalStatus status, const std::string& message) {
    return run.Fail(v1::STAGE_COMPILE, status, message);
  };
  if (task.validate_size() == 0 || task.outputs_size() == 0) {
    return fail(v1::INFRA_ERROR, "the task has no validate bindings or no outputs");
  }
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
  auto wrapper = runner::GenerateWrapperSource(task);
  if (!wrapper.ok()) return fail(v1::INFRA_ERROR, std::string(wrapper.status().message()));
  auto ref = cpu_builder_.Build(BuildSpec{task.reference().source(), ReferenceFlags(), *wrapper});
  if (!ref.ok() || ref->status != v1::OK) {
    std::string why = ref.ok() ? absl::StrCat(ref->message, "\n", ref->compiler_output)
                               : std::string(ref.status().message());
    return fail(v1::INFRA_ERROR, absl::StrCat("the task's C++ reference does not compile: ", why));
  }
  run.ref = *std::move(ref);
  if (const v1::Reference* cuda_ref = CudaReference(task); cuda_ref != nullptr && !IsGemmTask(task)) {
    BuildSpec spec{cuda_ref->source(), NvccCandidateFlags(arch_), *wrapper};
    auto built = cuda_builder_.Build(spec);
    if (!built.ok() || built->status != v1::OK) {
      std::string why = built.ok() ? absl::StrCat(built->message, "\n", built->compiler_output)
                                   : std::string(built.status().message());
      return fail(v1::INFRA_ERROR, absl::StrCat("the task's CUDA reference does not compile: ", why));
    }
    run.cuda_ref = *std::move(built);
  }
  std::string resources;
  if (run.cand.max_registers >= 0) {
    resources = absl::StrCat("; ", run.cand.max_registers, " registers, ", run.cand.max_smem_bytes,
                             " B smem, ", run.cand.spill_bytes, " B spilled");
  }
  run.Emit(v1::STAGE_COMPILE, /*ok=*/true,
           absl::StrCat("nvcc ", arch_, run.cand.build.cache_hit ? " (cached)" : "",
                        absl::StrFormat(" %.1fs", run.cand.build.seconds), resources));
  return true;
}

bool NvidiaBackend::CheckHealth(Gpu& gpu) const {
  const std::string dir = absl::StrCat(gpu.harness->NewScratchDir(), "-health");
  std::error_code ec;
  fs::create_directories(dir, ec);
  auto r = gpu.harness->Run({"health", "--report=" + dir + "/report.txt"}, dir, absl::Seconds(60), 0);
  const bool ok = r.ok() && r->outcome.status == v1::OK;
  if (!ok) {
    LogError("GPU ", gpu.info.index, " (", gpu.info.name, ") failed its health check: ",
             r.ok() ? r->outcome.message : std::string(r.status().message()));
  }
  fs::remove_all(dir, ec);
  absl::MutexLock l(&gpu.mu);
  gpu.healthy = ok;
  return ok;
}

Gpu& NvidiaBackend::PickGpu() {
  // A free GPU if there is one, else the next in turn (waiting for it).
  for (auto& g : gpus_) {
    if (g->slot.TryLock()) return *g;
  }
  Gpu& g = *gpus_[next_gpu_.fetch_add(1) % gpus_.size()];
  g.slot.Lock();
  return g;
}

absl::StatusOr<CpuReferenceProfile> NvidiaBackend::CpuReference(const v1::Task& task,
                                                               const std::string& ref_so,
                                                               const std::string& timed_inputs) {
  const std::string key = Sha256Hex(absl::StrCat(DeterministicBytes(task), "\n", ref_so));
  {
    absl::MutexLock l(&cpu_ref_mu_);
    if (auto it = cpu_ref_cache_.find(key); it != cpu_ref_cache_.end()) return it->second;
  }
  int64_t out_bytes = 0;
  KEVO_ASSIGN_OR_RETURN(std::vector<runner::Param> params, runner::ClassifyParams(task));
  for (const runner::Param& p : params) {
    if (p.kind != runner::ParamKind::kOutput) continue;
    KEVO_ASSIGN_OR_RETURN(std::vector<int64_t> shape, ResolveShape(*p.spec, BindingValues(task.time())));
    out_bytes += NumElements(shape) * static_cast<int64_t>(DTypeSize(p.spec->dtype()));
  }
  const std::string dir = cpu_harness_.NewScratchDir();
  std::error_code ec;
  fs::create_directories(dir, ec);
  KEVO_RETURN_IF_ERROR(WriteFileBytes(dir + "/task.pb", task.SerializeAsString()));
  // The reference against itself: its samples are the baseline's.
  auto r = cpu_harness_.Run(
      {"profile", "--task=" + dir + "/task.pb", "--kernel=" + ref_so, "--baseline=" + ref_so,
       "--inputs=" + timed_inputs, "--outputs=" + dir + "/outputs.bin",
       "--result=" + dir + "/profile.json", "--report=" + dir + "/report.txt",
       absl::StrCat("--time_cap_s=", options_.profile_time_cap_s),
       absl::StrCat("--mem_budget_bytes=", options_.memory_limit_bytes / 3)},
      dir, 2 * options_.run_timeout + absl::Seconds(3 * options_.profile_time_cap_s + 30), 2 * out_bytes);
  auto cleanup = [&] { fs::remove_all(dir, ec); };
  if (!r.ok()) {
    cleanup();
    return r.status();
  }
  if (r->outcome.status != v1::OK) {
    cleanup();
    return absl::InternalError(absl::StrCat("timing the C++ reference on the CPU failed: ",
                                            r->outcome.message));
  }
  auto json = ReadFileBytes(dir + "/profile.json");
  auto outputs = ReadFileBytes(dir + "/outputs.bin");
  cleanup();
  if (!json.ok() || !outputs.ok() || static_cast<int64_t>(outputs->size()) != 2 * out_bytes) {
    return absl::InternalError("timing the C++ reference on the CPU wrote no results");
  }
  KEVO_ASSIGN_OR_RETURN(runner::ProfileReport profile, runner::ProfileFromJson(*json));
  CpuReferenceProfile p;
  p.timing = profile.candidate;
  p.outputs = outputs->substr(0, static_cast<size_t>(out_bytes));
  absl::MutexLock l(&cpu_ref_mu_);
  cpu_ref_cache_[key] = p;
  return p;
}

bool NvidiaBackend::GpuStages(NvEvalRun& run) {
  const v1::Task& task = run.task;
  // Everything the CPU does comes first, so the GPU never waits on it: the
  // golden outputs (cached; Validate finds them), the timed inputs, and the
  // CPU baseline when there is no GPU one.
  run.stage_start = absl::Now();
  const std::vector<uint64_t> seeds = runner::ValidationSeeds(task);
  auto layout = runner::OutputLayout(task, seeds);
  if (!layout.ok()) {
    return run.Fail(v1::STAGE_VALIDATE, v1::INFRA_ERROR,
                    absl::StrCat("the task's shapes do not resolve: ", layout.status().message()));
  }
  int64_t output_bytes = 0;
  for (const auto& slot : *layout) output_bytes += slot.bytes;
  if (auto golden = cpu_harness_.GoldenOutputs(task, run.ref.library_path, seeds, output_bytes); !golden.ok()) {
    return run.Fail(v1::STAGE_VALIDATE, v1::INFRA_ERROR, std::string(golden.status().message()));
  }
  auto timed_inputs = cpu_harness_.TimedInputs(task);
  if (!timed_inputs.ok()) {
    return run.Fail(v1::STAGE_PROFILE, v1::INFRA_ERROR,
                    absl::StrCat("cannot generate the timed inputs: ", timed_inputs.status().message()));
  }
  std::string baseline_kind = "cpu_reference";
  if (IsGemmTask(task)) {
    baseline_kind = "cublas";
  } else if (!run.cuda_ref.library_path.empty()) {
    baseline_kind = "cuda_reference";
  }
  std::optional<CpuReferenceProfile> cpu_ref;
  if (baseline_kind == "cpu_reference") {
    auto p = CpuReference(task, run.ref.library_path, *timed_inputs);
    if (!p.ok()) return run.Fail(v1::STAGE_PROFILE, v1::INFRA_ERROR, std::string(p.status().message()));
    cpu_ref = *std::move(p);
  }

  return OnGpu(run, [&](Gpu& gpu) {
    return gpu.harness->Validate(run, run.cand.build.library_path, run.ref.library_path, &cpu_harness_) &&
           ProfileStage(run, gpu, *timed_inputs, baseline_kind, cpu_ref ? &*cpu_ref : nullptr);
  });
}

bool NvidiaBackend::OnGpu(EvalRun& run, const std::function<bool(Gpu&)>& body) {
  const absl::Time wait_start = absl::Now();
  Gpu& gpu = PickGpu();
  const absl::Time held_from = absl::Now();
  {
    absl::MutexLock l(&gpu.mu);
    gpu.held_since = held_from;
  }
  auto& counters = *run.ev.mutable_profile();
  counters["gpu_index"] = gpu.info.index;
  counters["gpu_wait_s"] = absl::ToDoubleSeconds(held_from - wait_start);
  bool ok = false;
  bool healthy;
  {
    absl::MutexLock l(&gpu.mu);
    healthy = gpu.healthy;
  }
  if (!healthy && !CheckHealth(gpu)) {
    run.Fail(v1::STAGE_VALIDATE, v1::INFRA_ERROR,
             absl::StrCat("GPU ", gpu.info.index, " (", gpu.info.name,
                          ") failed its health check after an earlier fault; not evaluating on it"));
  } else {
    ok = body(gpu);
    // A fault or a killed runner may have left the GPU in a bad state: check
    // it before the next candidate gets it.
    const v1::EvalStatus s = run.ev.status();
    if (!ok && (s == v1::RUNTIME_ERROR || s == v1::RUN_TIMEOUT || s == v1::INFRA_ERROR)) {
      counters["gpu_health_checked"] = 1;
      counters["gpu_healthy_after"] = CheckHealth(gpu) ? 1 : 0;
    }
  }
  const absl::Time released = absl::Now();
  const double held = absl::ToDoubleSeconds(released - held_from);
  {
    absl::MutexLock l(&gpu.mu);
    gpu.held_since = absl::InfinitePast();
    gpu.busy.emplace_back(held_from, released);
    while (!gpu.busy.empty() && gpu.busy.front().second < released - kUtilisationWindow) gpu.busy.pop_front();
  }
  gpu.slot.Unlock();
  counters["gpu_stage_s"] = held;
  counters["gpu_timing_utilisation"] = TimingUtilisation();
  return ok;
}

bool NvidiaBackend::ProfileStage(NvEvalRun& run, Gpu& gpu, const std::string& timed_inputs,
                                 const std::string& baseline_kind, const CpuReferenceProfile* cpu_ref) {
  const v1::Task& task = run.task;
  v1::Evaluation& ev = run.ev;
  const std::string& scratch = run.scratch;
  run.stage_start = absl::Now();
  auto fail = [&](v1::EvalStatus status, const std::string& message) {
    return run.Fail(v1::STAGE_PROFILE, status, message);
  };
  std::error_code ec;
  fs::remove(scratch + "/report.txt", ec);
  std::vector<std::pair<const v1::TensorSpec*, int64_t>> timed_outputs;
  int64_t timed_output_bytes = 0;
  {
    auto params = runner::ClassifyParams(task);
    if (!params.ok()) return fail(v1::INFRA_ERROR, std::string(params.status().message()));
    for (const runner::Param& p : *params) {
      if (p.kind != runner::ParamKind::kOutput) continue;
      auto shape = ResolveShape(*p.spec, BindingValues(task.time()));
      if (!shape.ok()) return fail(v1::INFRA_ERROR, std::string(shape.status().message()));
      timed_outputs.emplace_back(p.spec, NumElements(*shape));
      timed_output_bytes += NumElements(*shape) * static_cast<int64_t>(DTypeSize(p.spec->dtype()));
    }
  }
  const bool gpu_baseline = baseline_kind != "cpu_reference";
  std::string baseline_arg = "none";
  if (baseline_kind == "cublas") baseline_arg = "cublas";
  if (baseline_kind == "cuda_reference") baseline_arg = run.cuda_ref.library_path;
  const int64_t expected_bytes = (gpu_baseline ? 2 : 1) * timed_output_bytes;
  auto prof = gpu.harness->Run(
      {"profile", "--task=" + scratch + "/task.pb", "--kernel=" + run.cand.build.library_path,
       "--baseline=" + baseline_arg, "--inputs=" + timed_inputs,
       "--outputs=" + scratch + "/timed_outputs.bin", "--result=" + scratch + "/profile.json",
       "--gpu_result=" + scratch + "/gpu.json", "--report=" + scratch + "/report.txt",
       absl::StrCat("--time_cap_s=", options_.profile_time_cap_s)},
      scratch, options_.run_timeout + absl::Seconds(3 * options_.profile_time_cap_s + 30),
      expected_bytes);
  if (!prof.ok()) return fail(v1::INFRA_ERROR, std::string(prof.status().message()));
  if (prof->outcome.status != v1::OK) {
    ev.mutable_diagnostics()->set_signal(prof->outcome.signal);
    ev.mutable_diagnostics()->set_violation(prof->outcome.violation);
    return fail(prof->outcome.status, absl::StrCat("candidate (at the timed binding '",
                                                   task.time().name(), "') ", prof->outcome.message));
  }
  auto prof_json = ReadFileBytes(scratch + "/profile.json");
  auto gpu_json = ReadFileBytes(scratch + "/gpu.json");
  auto timed_bytes = ReadFileBytes(scratch + "/timed_outputs.bin");
  if (!prof_json.ok() || !gpu_json.ok() || !timed_bytes.ok() ||
      static_cast<int64_t>(timed_bytes->size()) != expected_bytes) {
    return fail(v1::RUNTIME_ERROR,
                "the profiler ended without writing its results: the candidate ended the "
                "process (exit?) or wrote into the runner's files");
  }
  auto profile = runner::ProfileFromJson(*prof_json);
  if (!profile.ok()) return fail(v1::INFRA_ERROR, std::string(profile.status().message()));
  nlohmann::json g = nlohmann::json::parse(*gpu_json, nullptr, /*allow_exceptions=*/false);
  if (g.is_discarded() || !g.is_object()) return fail(v1::INFRA_ERROR, "gpu.json does not parse");
  if (!profile->modified_input.empty()) {
    return fail(v1::INPUT_MODIFIED, absl::StrCat("input '", profile->modified_input,
                                                 "' changed while timing at binding '",
                                                 task.time().name(), "'"));
  }
  if (const std::string over = g.value("overflowed", ""); !over.empty()) {
    return fail(v1::RUNTIME_ERROR, absl::StrCat("wrote past the end of tensor '", over,
                                                "' at the timed binding '", task.time().name(), "'"));
  }
  const std::string& want_all = gpu_baseline ? *timed_bytes : cpu_ref->outputs;
  const size_t want_offset = gpu_baseline ? static_cast<size_t>(timed_output_bytes) : 0;
  const std::string want_name = gpu_baseline ? "baseline" : "C++ reference";
  int64_t offset = 0;
  for (const auto& [spec, count] : timed_outputs) {
    const char* got = timed_bytes->data() + offset;
    const char* want = want_all.data() + want_offset + offset;
    Tolerances tol = ToleranceFor(task, spec->dtype());
    CompareResult cmp = CompareTensors(spec->dtype(), got, want, count, tol);
    if (!cmp.ok) {
      return fail(cmp.nonfinite ? v1::NONFINITE : v1::WRONG_ANSWER,
                  absl::StrCat("at the timed binding '", task.time().name(), "' (checked on the "
                               "buffers it was timed on): ", spec->name(), "[", cmp.first_bad_index,
                               "] = ", ElementAsDouble(spec->dtype(), got, cmp.first_bad_index), ", ",
                               want_name, " ", ElementAsDouble(spec->dtype(), want, cmp.first_bad_index),
                               "; ", cmp.bad_count, " of ", count, " elements outside atol ", tol.atol,
                               " + rtol ", tol.rtol));
    }
    offset += count * static_cast<int64_t>(DTypeSize(spec->dtype()));
  }
  const runner::TimingSeries& base = gpu_baseline ? profile->baseline : cpu_ref->timing;
  if (profile->candidate.median_s <= 0 || base.median_s <= 0) {
    return fail(v1::INFRA_ERROR, "the profiler measured no time");
  }
  *ev.mutable_timing() = ToTiming(profile->candidate);
  *ev.mutable_baseline() = ToTiming(base);
  ev.set_speedup(base.median_s / profile->candidate.median_s);
  const auto [bytes, flops] = WorkAtTimedBinding(task);
  const double bw = gpu.info.copy_bandwidth_gbs > 0 ? gpu.info.copy_bandwidth_gbs
                                                    : gpu.info.theoretical_bandwidth_gbs;
  // The compute roof: the tensor-core peak for f16/bf16 GEMMs (datasheet),
  // else the measured FP32 FMA rate.
  const v1::DType tc_dtype = TensorCoreDType(task);
  const double tc_peak = tc_dtype != v1::DTYPE_UNSPECIFIED ? DatasheetTensorPeakGflops(gpu.info) : 0;
  const double compute_peak = tc_peak > 0 ? tc_peak : gpu.info.fp32_gflops;
  double roofline_s = 0;
  if (bw > 0) roofline_s = std::max(roofline_s, bytes / (bw * 1e9));
  if (compute_peak > 0) roofline_s = std::max(roofline_s, flops / (compute_peak * 1e9));
  ev.set_roofline_fraction(roofline_s / profile->candidate.median_s);
  auto& counters = *ev.mutable_profile();
  counters["compute_peak_gflops"] = compute_peak;
  counters["compute_peak_datasheet"] = tc_peak > 0 ? 1 : 0;
  (*ev.mutable_notes())["roofline"] =
      tc_peak > 0
          ? absl::StrCat(std::string(DTypeName(tc_dtype)), " tensor-core peak ", tc_peak / 1e3,
                         " TFLOP/s (datasheet, dense) and the measured copy bandwidth ", bw, " GB/s")
      : tc_dtype != v1::DTYPE_UNSPECIFIED
          ? absl::StrCat("no tensor-core peak known for ", gpu.info.name, ": the measured FP32 FMA rate ",
                         gpu.info.fp32_gflops, " GFLOP/s and copy bandwidth ", bw, " GB/s (reads high for ",
                         std::string(DTypeName(tc_dtype)), ")")
          : absl::StrCat("the measured FP32 FMA rate ", gpu.info.fp32_gflops, " GFLOP/s and copy bandwidth ",
                         bw, " GB/s");
  const double achieved_gbs = bytes / profile->candidate.median_s / 1e9;
  counters["achieved_bandwidth_gbs"] = achieved_gbs;
  if (bw > 0) counters["bandwidth_fraction"] = achieved_gbs / bw;
  counters["measured_bandwidth_gbs"] = bw;
  counters["achieved_gflops"] = flops / profile->candidate.median_s / 1e9;
  counters["converged"] = profile->converged ? 1 : 0;
  counters["escaped_samples"] = g.value("escaped_samples_candidate", 0.0);
  counters["baseline_escaped_samples"] = g.value("escaped_samples_baseline", 0.0);
  counters["l2_flush_bytes"] = g.value("l2_flush_bytes", 0.0);
  counters[absl::StrCat("baseline_kind_", baseline_kind)] = 1;
  counters["working_set_bytes"] = static_cast<double>(profile->working_set_bytes);
  const std::string escaped =
      counters["escaped_samples"] > 0
          ? absl::StrCat("; ", counters["escaped_samples"],
                         " samples finished after the default stream (timed to device sync)")
          : "";
  const std::string base_label = baseline_kind == "cublas"           ? "cuBLAS"
                                 : baseline_kind == "cuda_reference" ? "CUDA reference"
                                                                     : "C++ reference on the CPU";
  const std::string on_gpu = absl::StrCat(" on GPU ", gpu.info.index, " (", gpu.info.name, ")");
  (*ev.mutable_notes())["baseline"] =
      baseline_kind == "cublas"           ? absl::StrCat("cuBLAS (cublasGemmEx, FP32 compute, no TF32)", on_gpu)
      : baseline_kind == "cuda_reference" ? absl::StrCat("the task's reference.cu (a naive CUDA port)", on_gpu)
                                          : absl::StrCat("the task's C++ reference (-O2) on this worker's CPU (",
                                                         ev.fingerprint().cpu_model(),
                                                         "): a CPU time, not a GPU one");
  run.Emit(v1::STAGE_PROFILE, /*ok=*/true,
           absl::StrCat("GPU ", gpu.info.index, ": median ", profile->candidate.median_s * 1e6,
                        " us (spread ", profile->candidate.spread * 100, "%), ", base_label, " ",
                        base.median_s * 1e6, " us, speedup ", ev.speedup(), "x, ",
                        absl::StrFormat("%.0f", achieved_gbs), " GB/s",
                        bw > 0 ? absl::StrFormat(" (%.0f%% of measured)", 100 * achieved_gbs / bw) : "",
                        ", ", ev.timing().samples_s_size(), " samples",
                        profile->converged ? "" : " (time cap reached before 1% spread)", escaped));
  return true;
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
KernelBenchSetup SetUpKernelBench(const sandbox::Sandbox& sb, const NvidiaBackendOptions& o,
                                  const GpuProbe& gpus) {
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
    auto probe = ProbeKernelBench(sb, python, runner, "cuda",
                                  absl::StrCat(o.work_dir, "/evals/kbprobe-", getpid()),
                                  GpuVisiblePaths(o.runner_path), py_env);
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
    k.exclusive_device = true;
    LogInfo("KernelBench on the GPU: ", python, " (Python ", probe->python_version, ", torch ", probe->torch,
            ", CUDA ", probe->torch_cuda, ", Triton ", probe->triton.empty() ? "none" : probe->triton,
            ", torch.compile ", probe->torch_compile ? "yes" : "no", ")");
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

absl::StatusOr<GpuProbe> ParseGpuProbe(const std::string& json) {
  nlohmann::json j = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("devices") || !j["devices"].is_array()) {
    return absl::InvalidArgumentError("the probe's output is not the expected JSON");
  }
  GpuProbe probe;
  try {
    probe.driver_version = j.value("driver_version", 0);
    probe.runtime_version = j.value("runtime_version", 0);
    for (const auto& d : j["devices"]) {
      GpuInfo g;
      g.index = d.at("index").get<int>();
      g.name = d.at("name").get<std::string>();
      g.compute_capability = d.at("compute_capability").get<std::string>();
      g.sm_count = d.value("sm_count", 0);
      g.memory_bytes = d.value("memory_bytes", int64_t{0});
      g.l2_bytes = d.value("l2_bytes", int64_t{0});
      g.sm_clock_khz = d.value("sm_clock_khz", 0);
      g.memory_clock_khz = d.value("memory_clock_khz", 0);
      g.memory_bus_bits = d.value("memory_bus_bits", 0);
      g.copy_bandwidth_gbs = d.value("copy_bandwidth_gbs", 0.0);
      g.fp32_gflops = d.value("fp32_gflops", 0.0);
      g.theoretical_bandwidth_gbs = d.value("theoretical_bandwidth_gbs", 0.0);
      probe.gpus.push_back(std::move(g));
    }
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("the probe's output is malformed: ", e.what()));
  }
  if (probe.gpus.empty()) return absl::InvalidArgumentError("the probe lists no GPU");
  return probe;
}

absl::StatusOr<GpuProbe> ProbeGpus(const sandbox::Sandbox& sb, const std::string& runner_path,
                                   const std::string& scratch_dir, bool measure) {
  auto no_gpu = [](const std::string& why) {
    return absl::FailedPreconditionError(
        absl::StrCat("no NVIDIA GPU found (kevo-runner-cuda probe: ", why, ")"));
  };
  if (access(runner_path.c_str(), X_OK) != 0) {
    return no_gpu(absl::StrCat(runner_path, " is missing: this build has no CUDA runner "
                                            "(nvcc was not found when it was configured)"));
  }
  std::error_code ec;
  fs::create_directories(scratch_dir, ec);
  sandbox::Command cmd;
  cmd.argv = {runner_path, "probe", "--result=" + scratch_dir + "/probe.json",
              "--report=" + scratch_dir + "/report.txt"};
  if (measure) cmd.argv.push_back("--measure");
  cmd.env = {"PATH=/usr/bin:/bin", "LC_ALL=C"};
  cmd.cwd = scratch_dir;
  cmd.writable_dirs = {scratch_dir};
  cmd.visible_paths = GpuVisiblePaths(runner_path);
  cmd.limits.wall_timeout = absl::Seconds(120);
  auto r = sb.Run(cmd);
  if (!r.ok()) return no_gpu(std::string(r.status().message()));
  auto report = ReadFileBytes(scratch_dir + "/report.txt");
  const runner::Report parsed = runner::ParseReport(report.ok() ? *report : "");
  if (!r->Succeeded()) {
    std::string why = !parsed.error.empty() ? parsed.error
                      : !parsed.device_error.empty()
                          ? parsed.device_error
                          : absl::StrCat(r->Summary(), " ", Tail(r->stderr_data, 500));
    fs::remove_all(scratch_dir, ec);
    return no_gpu(why);
  }
  auto json = ReadFileBytes(scratch_dir + "/probe.json");
  fs::remove_all(scratch_dir, ec);
  if (!json.ok()) return no_gpu("it wrote no result");
  auto probe = ParseGpuProbe(*json);
  if (!probe.ok()) return no_gpu(std::string(probe.status().message()));
  return probe;
}

std::string FindNvcc(const std::string& configured) {
  std::vector<std::string> candidates;
  if (!configured.empty()) {
    candidates.push_back(configured);
  } else {
    if (const char* env = std::getenv("CUDACXX"); env != nullptr && *env) candidates.push_back(env);
    candidates.push_back("/usr/local/cuda/bin/nvcc");
    for (const char* dir : {"/usr/local/bin", "/usr/bin"}) candidates.push_back(absl::StrCat(dir, "/nvcc"));
  }
  for (const std::string& c : candidates) {
    if (access(c.c_str(), X_OK) == 0) return c;
  }
  return "";
}

absl::StatusOr<std::unique_ptr<Backend>> CreateNvidiaBackend(const NvidiaBackendOptions& options) {
  NvidiaBackendOptions opts = options;
  if (opts.work_dir.empty()) return absl::InvalidArgumentError("nvidia backend: work_dir is required");
  if (opts.profile_time_cap_s <= 0) {
    return absl::InvalidArgumentError("nvidia backend: profile_time_cap_s must be > 0");
  }
  KEVO_ASSIGN_OR_RETURN(opts.work_dir, PrepareWorkDir(opts.work_dir, "nvidia backend"));
  std::error_code ec;
  const fs::path self_dir = fs::read_symlink("/proc/self/exe", ec).parent_path();
  if (opts.runner_path.empty()) opts.runner_path = (self_dir / "kevo-runner-cuda").string();
  if (opts.cpu_runner_path.empty()) opts.cpu_runner_path = (self_dir / "kevo-runner-cpu").string();
  opts.runner_path = fs::absolute(opts.runner_path, ec).lexically_normal().string();
  opts.cpu_runner_path = fs::absolute(opts.cpu_runner_path, ec).lexically_normal().string();
  KEVO_ASSIGN_OR_RETURN(std::unique_ptr<sandbox::Sandbox> sb,
                        sandbox::Sandbox::Create({opts.use_bwrap, "/usr/bin/bwrap"}));
  // GPUs first: without one nothing else matters.
  KEVO_ASSIGN_OR_RETURN(
      GpuProbe probe, ProbeGpus(*sb, opts.runner_path,
                                absl::StrCat(opts.work_dir, "/evals/probe-", getpid()), opts.measure));
  if (access(opts.cpu_runner_path.c_str(), X_OK) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "nvidia backend: ", opts.cpu_runner_path, " (golden outputs) is missing or not executable"));
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
    return absl::FailedPreconditionError(absl::StrCat(
        "nvidia backend: no nvcc target for compute capability ", probe.gpus.front().compute_capability));
  }
  auto cpu_runner = ReadFileBytes(opts.cpu_runner_path);
  auto cuda_runner = ReadFileBytes(opts.runner_path);
  if (!cpu_runner.ok() || !cuda_runner.ok()) {
    return absl::FailedPreconditionError("nvidia backend: cannot read the runners");
  }
  for (const GpuInfo& g : probe.gpus) {
    LogInfo("GPU ", g.index, ": ", g.name, ", compute capability ", g.compute_capability, ", ",
            g.sm_count, " SMs, ", g.memory_bytes >> 20, " MiB, L2 ", g.l2_bytes >> 20, " MiB, copy ",
            g.copy_bandwidth_gbs, " GB/s, FP32 ", g.fp32_gflops, " GFLOP/s");
  }
  KernelBenchSetup kernelbench = SetUpKernelBench(*sb, opts, probe);
  return std::make_unique<NvidiaBackend>(
      opts, std::move(sb), std::move(probe), arch, NvccRelease(nvcc_version->stdout_data),
      FirstLineOf(cxx_version->stdout_data), Sha256Hex(*cpu_runner), Sha256Hex(*cuda_runner),
      std::move(kernelbench));
}

}  // namespace kevo::worker
