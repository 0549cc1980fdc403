#include "worker/backends/amd/amd_backend.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

#include "common/hash.h"
#include "common/log.h"
#include "common/status.h"
#include "common/task/task_loader.h"
#include "worker/backends/amd/hip_build.h"
#include "worker/backends/gpu/gpu_stages.h"
#include "worker/pipeline/eval_pipeline.h"
#include "worker/pipeline/kernel_builder.h"
#include "worker/runner/protocol.h"

namespace kevo::worker {
namespace {

// "HIP version: 5.2.21153-0; Debian clang version 15.0.6" from hipcc --version.
std::string HipccIdentity(const std::string& out) {
  std::vector<std::string> parts;
  for (absl::string_view line : absl::StrSplit(out, '\n')) {
    if (absl::StrContains(line, "HIP version") || absl::StrContains(line, "clang version")) {
      parts.emplace_back(line);
    }
  }
  return parts.empty() ? FirstLineOf(out) : absl::StrJoin(parts, "; ");
}

// One line on the worst kernel of each target, for the compile event.
std::string ResourceSummary(const std::vector<KernelResources>& kernels, const std::vector<std::string>& targets) {
  const std::map<std::string, double> c = ResourceCounters(kernels);
  std::vector<std::string> parts;
  for (const std::string& t : targets) {
    auto v = [&](const char* what) {
      auto it = c.find(absl::StrCat(t, "_", what));
      return it == c.end() ? 0 : static_cast<int>(it->second);
    };
    std::string part = absl::StrFormat(
        "%s: %d kernel(s), %d VGPRs, %d AGPRs, %d SGPRs, %d B LDS, %d B scratch, %d spills, "
        "occupancy %d waves/SIMD",
        t, v("kernels"), v("vgprs"), v("agprs"), v("sgprs"), v("lds_bytes"), v("scratch_bytes"),
        v("vgpr_spills") + v("sgpr_spills"), v("occupancy_waves"));
    if (c.count(absl::StrCat(t, "_instructions")) > 0) {
      absl::StrAppend(&part, absl::StrFormat(", %d instructions, %d MFMA, %d B per global access", v("instructions"),
                                             v("mfma"), v("access_bytes")));
    }
    parts.push_back(std::move(part));
  }
  return absl::StrJoin(parts, "; ");
}

// The task's HIP baseline: an extra reference of language hip, else its CUDA
// reference ported by PortCudaToHip; "" when it has neither.
std::string HipReferenceSource(const v1::Task& task) {
  for (const char* want : {"hip", "cuda"}) {
    for (const v1::Reference& r : task.extra_references()) {
      const std::string lang = absl::AsciiStrToLower(r.language());
      if (r.source().empty()) continue;
      if (std::string(want) == "hip" && lang == "hip") return r.source();
      if (std::string(want) == "cuda" && (lang == "cuda" || lang == "cu")) return PortCudaToHip(r.source());
    }
  }
  return "";
}

// The GPU path's parts, present only where a ROCm GPU of a target exists.
struct AmdGpuPath {
  std::unique_ptr<GpuStages> stages;
  std::unique_ptr<KernelBuilder> cpu_builder;  // the C++ reference (golden outputs)
};

class AmdBackend final : public Backend {
 public:
  AmdBackend(AmdBackendOptions options, std::unique_ptr<sandbox::Sandbox> sandbox, std::string hipcc_identity,
             RocmProbe probe, AmdGpuPath gpu, std::string gpu_reason)
      : options_(std::move(options)),
        sandbox_(std::move(sandbox)),
        hipcc_identity_(std::move(hipcc_identity)),
        probe_(std::move(probe)),
        gpu_(std::move(gpu)),
        gpu_reason_(std::move(gpu_reason)),
        builder_(sandbox_.get(), options_.hipcc,
                 absl::StrCat(hipcc_identity_, "\n", absl::StrJoin(options_.targets, ",")),
                 options_.work_dir + "/build", options_.compile_timeout, options_.memory_limit_bytes,
                 SandboxSystemPaths(), HipLayout()) {}

  absl::StatusOr<v1::Hello> Describe() override;
  v1::Evaluation Evaluate(const v1::Task& task, const v1::Candidate& candidate, const EventSink& on_event) override;
  std::map<std::string, double> Gauges() const override {
    if (gpu_.stages == nullptr) return {};
    return {{"kevo_worker_gpu_timing_utilisation", gpu_.stages->TimingUtilisation()}};
  }

 private:
  bool OnGpu() const { return gpu_.stages != nullptr; }
  // Why this worker only compiles, for the Hello and every evaluation.
  std::string CompileOnlyReason() const {
    if (probe_.gpus > 0) return absl::StrCat(probe_.description, ", but ", gpu_reason_);
    return probe_.description;
  }
  // Compiles and reads the resources; false (the run failed) when it did not compile.
  bool CompileStage(EvalRun& run, HipCompileResult& built) const;
  // Golden outputs, validation and timing on the GPU.
  bool GpuStagesFor(EvalRun& run, const HipCompileResult& built);
  v1::Fingerprint MakeFingerprint() const;

  const AmdBackendOptions options_;
  const std::unique_ptr<sandbox::Sandbox> sandbox_;
  const std::string hipcc_identity_;
  const RocmProbe probe_;
  const AmdGpuPath gpu_;
  // Why the GPUs found are not used (when they are not).
  const std::string gpu_reason_;
  const KernelBuilder builder_;
  // Disassembles the kernels for the static score (llvm-15 comes with hipcc).
  const std::string objdump_ = FindLlvmObjdump();
};

v1::Fingerprint AmdBackend::MakeFingerprint() const {
  v1::Fingerprint fp;
  fp.set_host(HostName());
  fp.set_cpu_model(ProcField("/proc/cpuinfo", "model name"));
  fp.set_compiler(hipcc_identity_);
  for (const std::string& f : HipCandidateFlags(options_.targets)) fp.add_flags(f);
  fp.set_os(OsDescription());
  fp.set_device(OnGpu() ? gpu_.stages->probe().gpus.front().name
                        : absl::StrCat("compile-only: ", absl::StrJoin(options_.targets, ", ")));
  fp.set_sandbox(sandbox_->UsesBwrap() ? "bwrap+rlimits" : "rlimits");
  return fp;
}

absl::StatusOr<v1::Hello> AmdBackend::Describe() {
  v1::Hello hello;
  hello.set_platform("amd");
  if (OnGpu()) {
    const GpuProbe& gp = gpu_.stages->probe();
    const GpuInfo& g = gp.gpus.front();
    hello.set_device(gp.gpus.size() == 1 ? g.name : absl::StrCat(g.name, " x", gp.gpus.size()));
    hello.set_mem_bandwidth_gbs(g.copy_bandwidth_gbs);
    hello.set_fp32_peak_gflops(g.fp32_gflops);
  } else {
    hello.set_device(absl::StrCat("no GPU (static analysis for ", absl::StrJoin(options_.targets, ", "), ")"));
  }
  hello.add_toolchains(hipcc_identity_);
  hello.add_languages("hip");
  *hello.mutable_fingerprint() = MakeFingerprint();
  hello.set_compile_only(!OnGpu());
  for (const std::string& t : options_.targets) hello.add_targets(t);
  auto& caps = *hello.mutable_capabilities();
  if (!OnGpu()) caps["compile_only_reason"] = CompileOnlyReason();
  caps["rocm_gpus"] = absl::StrCat(probe_.gpus);
  if (OnGpu()) {
    const GpuInfo& g = gpu_.stages->probe().gpus.front();
    caps["gpus"] = absl::StrCat(gpu_.stages->probe().gpus.size());
    caps["gpu_arch"] = g.arch;
    caps["compute_units"] = absl::StrCat(g.sm_count);
    caps["memory_bytes"] = absl::StrCat(g.memory_bytes);
    caps["copy_bandwidth_gbs"] = absl::StrCat(g.copy_bandwidth_gbs);
    caps["fp32_gflops"] = absl::StrCat(g.fp32_gflops);
  }
  for (const std::string& t : options_.targets) {
    if (const AmdTarget* target = FindAmdTarget(t); target != nullptr) caps[t] = target->description;
  }
  return hello;
}

bool AmdBackend::CompileStage(EvalRun& run, HipCompileResult& built) const {
  v1::Evaluation& ev = run.ev;
  run.Begin(v1::STAGE_COMPILE);
  built = CompileHipCandidate(builder_, run.task, run.candidate, options_.targets, objdump_);
  auto& counters = *ev.mutable_profile();
  for (const auto& [k, v] : ResourceCounters(built.kernels)) counters[k] = v;
  if (built.status != v1::OK) {
    ev.mutable_diagnostics()->set_compiler_output(built.build.compiler_output);
    if (!built.forbidden.empty()) ev.mutable_diagnostics()->set_violation(absl::StrJoin(built.forbidden, ", "));
    return run.Fail(v1::STAGE_COMPILE, built.status, built.message);
  }
  run.Emit(
      v1::STAGE_COMPILE, /*ok=*/true,
      absl::StrCat("hipcc ", absl::StrJoin(options_.targets, ","), built.build.cache_hit ? " (cached)" : "",
                   absl::StrFormat(" %.1fs; ", built.build.seconds), ResourceSummary(built.kernels, options_.targets)));
  // Static, even where the candidate is then timed: the compiler's view.
  counters["static_score"] = StaticScore(built.kernels);
  counters["build_cache_hit"] = built.build.cache_hit ? 1 : 0;
  return true;
}

bool AmdBackend::GpuStagesFor(EvalRun& run, const HipCompileResult& built) {
  const v1::Task& task = run.task;
  auto fail = [&](const std::string& message) { return run.Fail(v1::STAGE_COMPILE, v1::INFRA_ERROR, message); };
  auto wrapper = TaskWrapperSource(task);
  if (!wrapper.ok()) return fail(std::string(wrapper.status().message()));
  auto ref = BuildTaskReference(*gpu_.cpu_builder, {task.reference().source(), CppReferenceFlags(), *wrapper},
                                "C++ reference");
  if (!ref.ok()) return fail(std::string(ref.status().message()));
  GpuBaseline baseline;
  if (const std::string hip_ref = HipReferenceSource(task); !hip_ref.empty()) {
    auto b = BuildTaskReference(builder_, {hip_ref, HipCandidateFlags(options_.targets), *wrapper}, "HIP reference");
    if (!b.ok()) return fail(std::string(b.status().message()));
    baseline = {v1::BASELINE_HIP_REFERENCE, b->library_path, "HIP reference",
                "the task's HIP reference (its reference.hip, else its reference.cu ported to HIP)"};
  }
  return gpu_.stages->Run(run, built.build.library_path, ref->library_path, baseline);
}

v1::Evaluation AmdBackend::Evaluate(const v1::Task& task_in, const v1::Candidate& candidate,
                                    const EventSink& on_event) {
  const v1::Task task = kevo::task::TimedOn(task_in, "amd");  // this platform's timed binding
  EvalRun run{task, candidate, on_event};
  v1::Evaluation& ev = run.ev;
  BeginEvaluation(task, candidate, "amd", MakeFingerprint(), &ev);
  ev.set_compile_only(!OnGpu());
  HipCompileResult built;
  if (!CompileStage(run, built)) return run.Finish(/*keep_scratch=*/false);
  if (OnGpu()) {
    if (GpuStagesFor(run, built)) ev.set_status(v1::OK);
    return run.Finish(/*keep_scratch=*/false);
  }
  run.Begin(v1::STAGE_PROFILE);
  const double score = StaticScore(built.kernels);
  ev.set_static_score(score);
  run.Emit(v1::STAGE_PROFILE, /*ok=*/true,
           absl::StrFormat("static score %.3f (occupancy, spills, LDS and global access "
                           "width from the compiled code; not a measurement): compile-only worker (%s), so the "
                           "candidate was neither validated nor timed",
                           score, CompileOnlyReason()));
  ev.set_status(v1::OK);
  return run.Finish(/*keep_scratch=*/false);
}

// The GPU path where a ROCm GPU exists: kevo-runner-hip's probe (in the
// sandbox) must list a GPU whose architecture is one of the targets (the
// candidates and the runner's own kernels are built for those alone), and
// kevo-runner-cpu and the host compiler must be there for the golden
// outputs. Otherwise no stages, and `reason` says why.
AmdGpuPath SetUpGpuPath(AmdBackendOptions& opts, const sandbox::Sandbox* sb, std::string* reason) {
  opts.runner_path = RunnerPath(opts.runner_path, "kevo-runner-hip");
  opts.cpu_runner_path = RunnerPath(opts.cpu_runner_path, "kevo-runner-cpu");
  auto gpus = ProbeGpus(*sb, RocmVendor(), opts.runner_path, absl::StrCat(opts.work_dir, "/evals/probe-", getpid()),
                        /*measure=*/true);
  if (!gpus.ok()) {
    *reason = std::string(gpus.status().message());
    return {};
  }
  // "gfx90a:sramecc+:xnack-" -> gfx90a; every GPU must be a target.
  for (const GpuInfo& g : gpus->gpus) {
    const std::string arch(absl::string_view(g.arch).substr(0, g.arch.find(':')));
    if (std::find(opts.targets.begin(), opts.targets.end(), arch) == opts.targets.end()) {
      *reason = absl::StrCat("GPU ", g.index, " (", g.name, ") is ", arch.empty() ? "of no known architecture" : arch,
                             ", not one of the targets ", absl::StrJoin(opts.targets, ","),
                             " (Debian's LLVM 15 builds for gfx90a and gfx940 only)");
      return {};
    }
  }
  auto cpu_runner = ReadFileBytes(opts.cpu_runner_path);
  auto hip_runner = ReadFileBytes(opts.runner_path);
  auto cxx = RunVersion(*sb, opts.host_compiler);
  if (!cpu_runner.ok() || !hip_runner.ok() || !cxx.ok() || !cxx->Succeeded()) {
    *reason = absl::StrCat("kevo-runner-cpu (", opts.cpu_runner_path, ") or the host compiler '", opts.host_compiler,
                           "' is missing: no golden outputs");
    return {};
  }
  for (const GpuInfo& g : gpus->gpus) {
    LogInfo("GPU ", g.index, ": ", g.name, " (", g.arch, "), ", g.sm_count, " CUs, ", g.memory_bytes >> 20,
            " MiB, copy ", g.copy_bandwidth_gbs, " GB/s, FP32 ", g.fp32_gflops, " GFLOP/s");
  }
  GpuStagesOptions so;
  so.vendor = &RocmVendor();
  so.work_dir = opts.work_dir;
  so.runner_path = opts.runner_path;
  so.cpu_runner_path = opts.cpu_runner_path;
  so.runner_hash = Sha256Hex(*hip_runner);
  so.cpu_runner_hash = Sha256Hex(*cpu_runner);
  so.run_timeout = opts.run_timeout;
  so.memory_limit_bytes = opts.memory_limit_bytes;
  so.profile_time_cap_s = opts.profile_time_cap_s;
  so.speed_of_light_margin = opts.speed_of_light_margin;
  AmdGpuPath path;
  path.cpu_builder = std::make_unique<KernelBuilder>(
      sb, opts.host_compiler, FirstLineOf(cxx->stdout_data), opts.work_dir + "/build", opts.compile_timeout,
      std::max<int64_t>(opts.memory_limit_bytes, int64_t{4} << 30), SandboxSystemPaths());
  path.stages = std::make_unique<GpuStages>(sb, std::move(so), *std::move(gpus));
  return path;
}

}  // namespace

RocmProbe ProbeRocm() {
  RocmProbe p;
  p.kfd = access("/dev/kfd", F_OK) == 0;
  if (!p.kfd) {
    p.description = "no ROCm GPU (/dev/kfd does not exist)";
    return p;
  }
  // The runtime only where a GPU may exist: loading it elsewhere costs time
  // and prints warnings.
  void* lib = dlopen("libamdhip64.so.5", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) lib = dlopen("libamdhip64.so", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    p.description = absl::StrCat("/dev/kfd exists but the HIP runtime does not load (", dlerror(), ")");
    return p;
  }
  using CountFn = int (*)(int*);
  auto count = reinterpret_cast<CountFn>(dlsym(lib, "hipGetDeviceCount"));
  int n = 0;
  if (count == nullptr || count(&n) != 0) {
    p.description = "/dev/kfd exists but hipGetDeviceCount failed";
    return p;  // the library stays loaded: HIP does not support unloading
  }
  p.runtime = true;
  p.gpus = n;
  p.description = n > 0 ? absl::StrCat(n, " ROCm GPU(s) found") : "the HIP runtime sees no GPU";
  return p;
}

std::string FindHipcc(const std::string& configured) {
  return FindTool(configured, "HIPCC", {"/usr/bin/hipcc", "/usr/local/bin/hipcc", "/opt/rocm/bin/hipcc"});
}

absl::StatusOr<std::unique_ptr<Backend>> CreateAmdBackend(const AmdBackendOptions& options) {
  AmdBackendOptions opts = options;
  if (opts.work_dir.empty()) return absl::InvalidArgumentError("amd backend: work_dir is required");
  KEVO_ASSIGN_OR_RETURN(std::vector<std::string> targets, ParseAmdTargets(absl::StrJoin(opts.targets, ",")));
  opts.targets = std::move(targets);
  KEVO_ASSIGN_OR_RETURN(opts.work_dir, PrepareWorkDir(opts.work_dir, "amd backend"));
  opts.hipcc = FindHipcc(opts.hipcc);
  if (opts.hipcc.empty()) {
    return absl::FailedPreconditionError(
        "amd backend: hipcc not found (install Debian's hipcc: scripts/install-deps.sh does)");
  }
  KEVO_ASSIGN_OR_RETURN(std::unique_ptr<sandbox::Sandbox> sb,
                        sandbox::Sandbox::Create({opts.use_bwrap, opts.bwrap_path}));
  auto version = RunVersion(*sb, opts.hipcc);
  if (!version.ok() || !version->Succeeded()) {
    return absl::FailedPreconditionError(absl::StrCat("amd backend: ", opts.hipcc, " does not run"));
  }
  RocmProbe probe;
  if (opts.ignore_gpus) {
    probe.description = "GPUs ignored (test option)";
  } else {
    probe = ProbeRocm();
  }
  const std::string identity = HipccIdentity(version->stdout_data);
  std::string gpu_reason;
  AmdGpuPath gpu;
  if (probe.gpus > 0) gpu = SetUpGpuPath(opts, sb.get(), &gpu_reason);
  LogInfo("amd: ", identity, "; targets ", absl::StrJoin(opts.targets, ","), "; ", probe.description,
          gpu.stages != nullptr ? ": validating and timing on the GPU"
                                : absl::StrCat(gpu_reason.empty() ? "" : ", but ", gpu_reason, ": compile-only"));
  if (FindLlvmObjdump().empty()) {
    LogWarning(
        "amd: llvm-objdump (llvm-15) not found: kernels are not disassembled, and the static "
        "score leaves out the global access width");
  }
  return std::make_unique<AmdBackend>(opts, std::move(sb), identity, std::move(probe), std::move(gpu),
                                      std::move(gpu_reason));
}

}  // namespace kevo::worker
