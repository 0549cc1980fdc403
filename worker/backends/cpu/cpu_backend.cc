#include "worker/backends/cpu/cpu_backend.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"

#include "common/expr.h"
#include "common/hash.h"
#include "common/log.h"
#include "common/status.h"
#include "common/task/task_loader.h"
#include "common/tensor.h"
#include "worker/backends/cpu/calibration.h"
#include "worker/pipeline/elf_symbols.h"
#include "worker/pipeline/eval_pipeline.h"
#include "worker/pipeline/kernel_builder.h"
#include "worker/pipeline/kernelbench_eval.h"
#include "worker/pipeline/production_eval.h"
#include "worker/pipeline/speed_of_light.h"
#include "worker/pipeline/symbol_policy.h"
#include "worker/runner/protocol.h"

namespace kevo::worker {
namespace fs = std::filesystem;
namespace {

const std::vector<std::string>& CandidateFlags() {
  static const auto* flags = new std::vector<std::string>{"-O3", "-march=native", "-fopenmp", "-fPIC"};
  return *flags;
}

// The last-level cache the worker's CPUs share, as the kernel's cache
// topology says (a VM's CPUID may report the whole host's L3, which sysconf
// passes on), else sysconf's figure; at most 256 MiB (beyond that the figure
// is not believable for one VM).
int64_t LastLevelCacheBytes() {
  int64_t bytes = 0;
  std::ifstream in("/sys/devices/system/cpu/cpu0/cache/index3/size");
  std::string text;
  if (in >> text && !text.empty()) {
    const char unit = text.back();
    int64_t value = 0;
    if (absl::SimpleAtoi(absl::string_view(text).substr(0, text.size() - (std::isdigit(unit) ? 0 : 1)), &value)) {
      bytes = unit == 'K' ? value << 10 : unit == 'M' ? value << 20 : value;
    }
  }
  if (bytes <= 0) bytes = std::max<long>(sysconf(_SC_LEVEL3_CACHE_SIZE), 0);
  return std::min<int64_t>(bytes, int64_t{256} << 20);
}

// Whether the task computes on bf16 inputs, whose dot products AVX512_BF16
// does at twice the FP32 FMA rate.
bool UsesBf16(const v1::Task& task) {
  for (const v1::TensorSpec& in : task.inputs()) {
    if (in.dtype() == v1::BF16) return true;
  }
  return false;
}

// The cpu stages carry the two built kernels along.
struct CpuEvalRun : EvalRun {
  BuildResult cand;  // the candidate's .so, set by the compile stage
  BuildResult ref;   // the reference's (baseline) .so
};

class CpuBackend final : public RivalBackend {
 public:
  CpuBackend(CpuBackendOptions options, std::unique_ptr<sandbox::Sandbox> sandbox, std::string compiler_version,
             std::string cpu_model, std::string runner_hash, std::vector<std::string> compiler_visible)
      : options_(std::move(options)),
        sandbox_(std::move(sandbox)),
        compiler_version_(std::move(compiler_version)),
        cpu_model_(std::move(cpu_model)),
        runner_hash_(std::move(runner_hash)),
        builder_(
            sandbox_.get(), options_.compiler,
            absl::StrCat(compiler_version_, "\n", cpu_model_, "\n", Sha256Hex(ProcField("/proc/cpuinfo", "flags"))),
            options_.work_dir + "/build", options_.compile_timeout,
            std::max<int64_t>(options_.memory_limit_bytes, int64_t{4} << 30), std::move(compiler_visible)),
        harness_(sandbox_.get(), HarnessOptions(options_, runner_hash_)),
        kernelbench_(sandbox_.get(), KernelBenchOptionsFor(options_)),
        production_(sandbox_.get(), ProductionOptionsFor(options_)) {}

  static std::vector<std::string> SystemPaths() { return SandboxSystemPaths(); }

  absl::Status Init();
  absl::StatusOr<v1::Hello> Describe() override;

 protected:
  v1::Evaluation Run(const v1::Task& task, const v1::Candidate& candidate, const v1::Candidate* rival,
                     const EventSink& on_event) override;

 private:
  // NativeRunnerOptions, and the CPU topology (OpenMP reads it).
  static RunnerHarnessOptions HarnessOptions(const CpuBackendOptions& o, const std::string& hash) {
    RunnerHarnessOptions h = NativeRunnerOptions(o.runner_path, o.work_dir, o.run_timeout, o.memory_limit_bytes, hash);
    h.visible_paths.push_back("/sys/devices/system/cpu");
    return h;
  }
  static KernelBenchOptions KernelBenchOptionsFor(const CpuBackendOptions& o) {
    KernelBenchOptions k;
    k.python = o.kernelbench_python;
    k.runner_path = o.kernelbench_runner_path.empty()
                        ? (fs::path(o.runner_path).parent_path() / kKernelBenchRunnerName).string()
                        : o.kernelbench_runner_path;
    k.device = "cpu";
    k.work_dir = o.work_dir + "/kernelbench";
    k.compile_timeout = o.compile_timeout;
    k.run_timeout = o.run_timeout;
    k.torch_compile_timeout = o.torch_compile_timeout;
    k.memory_limit_bytes = o.memory_limit_bytes;
    k.profile_time_cap_s = o.profile_time_cap_s;
    k.sample_target_s = o.kernelbench_sample_target_s;
    return k;
  }
  static ProductionOptions ProductionOptionsFor(const CpuBackendOptions& o) {
    ProductionOptions p;
    p.python = o.kernelbench_python;
    p.runner_path = (fs::path(o.runner_path).parent_path() / kProductionRunnerName).string();
    p.platform = "cpu";
    p.work_dir = o.work_dir;
    p.visible_paths = {o.work_dir + "/build", o.work_dir + "/inputs"};
    p.time_cap_s = o.profile_time_cap_s;
    p.timeout = o.run_timeout + absl::Seconds(4 * o.profile_time_cap_s);  // its loop may run to 3x the cap
    p.torch_compile_timeout = o.torch_compile_timeout;
    p.memory_limit_bytes = o.memory_limit_bytes;
    long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (llc > 0) p.llc_bytes = llc;
    // PyTorch at its default thread count and at the worker's (every core,
    // as the candidate's OpenMP runs); the runner drops the duplicate.
    p.threads = {static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))};
    return p;
  }
  // A candidate's kernel built with `wrapper` and checked for forbidden
  // imports; `status` is OK, or why it cannot run (with `message`, and the
  // diagnostics' compiler output or violation filled in `diagnostics`).
  struct Compiled {
    v1::EvalStatus status = v1::OK;
    std::string message;
    BuildResult build;
  };
  Compiled CompileKernel(const v1::Candidate& candidate, const std::string& wrapper,
                         v1::Diagnostics* diagnostics) const;
  // Each returns true when the evaluation goes on to the next stage.
  bool CompileStage(CpuEvalRun& run) const;
  bool ProfileStage(CpuEvalRun& run) const;
  v1::Fingerprint MakeFingerprint() const;

  const CpuBackendOptions options_;
  const std::unique_ptr<sandbox::Sandbox> sandbox_;
  const std::string compiler_version_;
  const std::string cpu_model_;
  const std::string runner_hash_;
  const KernelBuilder builder_;
  const RunnerHarness harness_;
  const KernelBenchEvaluator kernelbench_;
  const ProductionTimer production_;
  const int64_t llc_bytes_ = LastLevelCacheBytes();
  // The highest ceilings measured on this worker (at start-up and after
  // timing candidates): limits no kernel beats, so a figure measured low
  // under load never lowers them.
  Ceilings Limits() const;
  void KeepHighest(const Ceilings& measured) const;
  mutable absl::Mutex ceilings_mu_;
  mutable Ceilings ceilings_ ABSL_GUARDED_BY(ceilings_mu_);
  // Timing runs alone on the worker: the profile stage holds it exclusively,
  // the compile and validate stages of the other slots shared, so no
  // compile of this worker runs beside a timing.
  mutable absl::Mutex host_mu_;
};

absl::Status CpuBackend::Init() {
  if (!options_.calibrate) return absl::OkStatus();
  KEVO_ASSIGN_OR_RETURN(Ceilings measured,
                        MeasureCeilings(builder_, *sandbox_, harness_.NewScratchDir(), SystemPaths()));
  KeepHighest(measured);
  LogInfo("cpu backend calibrated: bandwidth ", measured.mem_bandwidth_gbs, " GB/s (read-only ", measured.read_gbs,
          ", streaming copy ", measured.copy_gbs, "), fp32 peak ", measured.fp32_peak_gflops, " GFLOP/s",
          measured.bf16_peak_gflops > 0 ? absl::StrCat(", bf16 peak ", measured.bf16_peak_gflops, " GFLOP/s") : "");
  return absl::OkStatus();
}

Ceilings CpuBackend::Limits() const {
  absl::MutexLock l(&ceilings_mu_);
  return ceilings_;
}

void CpuBackend::KeepHighest(const Ceilings& measured) const {
  absl::MutexLock l(&ceilings_mu_);
  ceilings_.KeepHighest(measured);
}

v1::Fingerprint CpuBackend::MakeFingerprint() const {
  v1::Fingerprint fp;
  fp.set_host(HostName());
  fp.set_cpu_model(cpu_model_);
  fp.set_compiler(compiler_version_);
  for (const std::string& f : CandidateFlags()) fp.add_flags(f);
  fp.set_os(OsDescription());
  fp.set_device(cpu_model_);
  fp.set_sandbox(absl::StrCat(sandbox_->UsesBwrap() ? "bwrap+" : "", "seccomp+rlimits"));
  return fp;
}

absl::StatusOr<v1::Hello> CpuBackend::Describe() {
  v1::Hello hello;
  hello.set_platform("cpu");
  hello.set_device(cpu_model_);
  hello.add_toolchains(compiler_version_);
  hello.add_languages("c++");
  if (kernelbench_.Available()) {
    hello.add_languages("python");
    (*hello.mutable_capabilities())["kernelbench"] = kernelbench_.options().python;
  }
  *hello.mutable_fingerprint() = MakeFingerprint();
  const Ceilings limits = Limits();
  hello.set_mem_bandwidth_gbs(limits.mem_bandwidth_gbs);
  hello.set_fp32_peak_gflops(limits.fp32_peak_gflops);
  if (limits.bf16_peak_gflops > 0) {
    (*hello.mutable_capabilities())["bf16_peak_gflops"] = absl::StrCat(limits.bf16_peak_gflops);
  }
  hello.set_compile_only(false);
  (*hello.mutable_capabilities())["cores"] = absl::StrCat(std::thread::hardware_concurrency());
  (*hello.mutable_capabilities())["sandbox"] = hello.fingerprint().sandbox();
  return hello;
}

v1::Evaluation CpuBackend::Run(const v1::Task& task_in, const v1::Candidate& candidate, const v1::Candidate* rival,
                               const EventSink& on_event) {
  const v1::Task task = kevo::task::TimedOn(task_in, "cpu");  // this platform's timed binding
  if (task.format() == v1::TASK_FORMAT_KERNELBENCH) {
    return kernelbench_.Evaluate(task, candidate, on_event, "cpu", MakeFingerprint(),
                                 [this](EvalRun&, const std::function<bool(const std::string&)>& stages) {
                                   absl::MutexLock lock(&host_mu_);
                                   return stages("cpu");
                                 });
  }
  CpuEvalRun run{{task, candidate, on_event}};
  run.rival = rival;
  v1::Evaluation& ev = run.ev;
  BeginEvaluation(task, candidate, "cpu", MakeFingerprint(), &ev);
  bool built;
  {
    absl::ReaderMutexLock shared(&host_mu_);
    built = CompileStage(run) && harness_.Validate(run, run.cand.library_path, run.ref.library_path);
  }
  if (built && ProfileStage(run)) ev.set_status(v1::OK);
  return run.Finish(options_.keep_eval_dirs);
}

bool CpuBackend::CompileStage(CpuEvalRun& run) const {
  const v1::Task& task = run.task;
  const v1::Candidate& candidate = run.candidate;
  run.Begin(v1::STAGE_COMPILE);
  auto fail = [&](v1::EvalStatus status, const std::string& message) {
    return run.Fail(v1::STAGE_COMPILE, status, message);
  };
  auto wrapper = TaskWrapperSource(task);
  if (!wrapper.ok()) return fail(v1::INFRA_ERROR, std::string(wrapper.status().message()));
  Compiled cand = CompileKernel(candidate, *wrapper, run.ev.mutable_diagnostics());
  if (cand.status != v1::OK) return fail(cand.status, cand.message);
  auto ref = BuildTaskReference(builder_, {task.reference().source(), CppReferenceFlags(), *wrapper}, "reference");
  if (!ref.ok()) return fail(v1::INFRA_ERROR, std::string(ref.status().message()));
  run.cand = std::move(cand.build);
  run.ref = *std::move(ref);
  const std::string rival_note =
      BuildRival(run, options_.time_production, [&](const v1::Candidate& rival) -> absl::StatusOr<BuildResult> {
        v1::Diagnostics ignored;
        Compiled built = CompileKernel(rival, *wrapper, &ignored);
        if (built.status != v1::OK) return absl::FailedPreconditionError(built.message);
        return std::move(built.build);
      });
  // For the worker's build-cache metric (kevo_worker_build_cache_lookups_total).
  (*run.ev.mutable_profile())["build_cache_hit"] = run.cand.cache_hit ? 1 : 0;
  run.Emit(v1::STAGE_COMPILE, /*ok=*/true,
           absl::StrCat("compiled", run.cand.cache_hit ? " (cached)" : "", "; reference",
                        run.ref.cache_hit ? " (cached)" : "", rival_note));
  return true;
}

CpuBackend::Compiled CpuBackend::CompileKernel(const v1::Candidate& candidate, const std::string& wrapper,
                                               v1::Diagnostics* diagnostics) const {
  Compiled out;
  auto fail = [&](v1::EvalStatus status, std::string message) {
    out.status = status;
    out.message = std::move(message);
    return out;
  };
  const std::string language = absl::AsciiStrToLower(candidate.language());
  if (!language.empty() && language != "c++" && language != "cpp" && language != "cxx") {
    return fail(v1::COMPILE_ERROR,
                absl::StrCat("language '", candidate.language(), "' is not supported on cpu (use c++)"));
  }
  std::vector<std::string> extra(candidate.extra_flags().begin(), candidate.extra_flags().end());
  if (absl::Status s = CheckExtraFlags(extra); !s.ok()) return fail(v1::COMPILE_ERROR, std::string(s.message()));
  BuildSpec spec{candidate.source(), CandidateFlags(), wrapper};
  spec.flags.insert(spec.flags.end(), extra.begin(), extra.end());
  auto built = builder_.Build(spec);
  if (!built.ok()) return fail(v1::INFRA_ERROR, std::string(built.status().message()));
  if (built->status != v1::OK) {
    diagnostics->set_compiler_output(built->compiler_output);
    return fail(built->status, built->message);
  }
  if (!options_.skip_symbol_check) {
    auto symbols = ReadElfSymbols(built->object_path);
    if (!symbols.ok()) return fail(v1::INFRA_ERROR, std::string(symbols.status().message()));
    std::vector<std::string> forbidden = ForbiddenImports(UndefinedSymbolNames(*symbols));
    if (!forbidden.empty()) {
      diagnostics->set_violation(absl::StrJoin(forbidden, ", "));
      return fail(v1::SANDBOX_VIOLATION,
                  absl::StrCat("the candidate imports forbidden symbol(s): ", absl::StrJoin(forbidden, ", "),
                               ". Kernels may use only math, memory (malloc/new, memcpy), OpenMP "
                               "and the C++ runtime"));
    }
  }
  out.build = *std::move(built);
  return out;
}

bool CpuBackend::ProfileStage(CpuEvalRun& run) const {
  const v1::Task& task = run.task;
  v1::Evaluation& ev = run.ev;
  const std::string& scratch = run.scratch;
  // Alone on the worker (host_mu_): no other slot's profile, compile or
  // validation runs while this candidate and its baseline are timed, nor
  // while the ceilings are measured again below.
  absl::MutexLock profile_lock(&host_mu_);
  const RunnerHarness::ProfileCall profile_call{
      .candidate_so = run.cand.library_path,
      .baseline_so = run.ref.library_path,
      .extra_args = {absl::StrCat("--time_cap_s=", options_.profile_time_cap_s),
                     absl::StrCat("--mem_budget_bytes=", options_.memory_limit_bytes / 3)},
      // Sampling stops at the cap; the rest is loading and copying
      // hundreds of MiB of inputs, warm-up and the final check, which a
      // busy host slows down a lot. A candidate that hangs was already
      // caught by validation, so the margin is generous.
      .timeout = 2 * options_.run_timeout + absl::Seconds(3 * options_.profile_time_cap_s + 30),
      .min_timed_checks = runner::kTimedChecks};
  std::optional<RunnerHarness::Profiled> profiled = harness_.Profile(run, profile_call);
  if (!profiled.has_value()) return false;
  const runner::ProfileReport* profile = &profiled->report;
  if (profile->candidate.median_s <= 0 || profile->baseline.median_s <= 0) {
    return run.Fail(v1::STAGE_PROFILE, v1::INFRA_ERROR, "the profiler measured no time");
  }
  const Work work = TimedWork(task);
  const double bytes = work.bytes, flops = work.flops;
  // The ceilings measured again now, still holding the profile lock, under
  // the load the candidate was just timed in (the bandwidth, and the peaks
  // too when the task is compute-bound), and kept where they are the highest
  // this worker has seen: on a shared host any one measurement can be low.
  auto measure_limits = [&](CeilingProbe probe, const std::string& dir) {
    Ceilings now;
    auto measured = MeasureCeilings(builder_, *sandbox_, dir, SystemPaths(), probe);
    if (measured.ok()) {
      now = *measured;
      KeepHighest(now);
    } else {
      LogWarning("cpu backend: re-measuring the ceilings failed (the highest earlier figures are used): ",
                 measured.status().ToString());
    }
    return now;
  };
  Ceilings after_timing;
  if (options_.calibrate && (bytes > 0 || flops > 0)) {
    const Ceilings known = Limits();
    const bool compute_bound = known.fp32_peak_gflops > 0 && known.mem_bandwidth_gbs > 0 &&
                               flops / known.fp32_peak_gflops > bytes / known.mem_bandwidth_gbs;
    after_timing = measure_limits(compute_bound ? CeilingProbe::kAll : CeilingProbe::kBandwidth, scratch + "/ceilings");
  }
  // The speed-of-light check (docs/reliability.md): a time that implies
  // beating those limits is timed again in a fresh runner, with the ceilings
  // measured again too, before it can stand.
  const bool bf16 = UsesBf16(task);
  auto device_limits = [&] {
    const Ceilings c = Limits();
    DeviceLimits d;
    d.cache_bytes = static_cast<double>(llc_bytes_);
    d.bandwidth_gbs = c.mem_bandwidth_gbs;
    d.read_gbs = c.read_gbs;
    d.copy_gbs = c.copy_gbs;
    d.bandwidth_source = "the best measured on this worker";
    d.peak_gflops = bf16 ? std::max(c.fp32_peak_gflops, c.bf16_peak_gflops) : c.fp32_peak_gflops;
    d.peak_source = absl::StrCat(bf16 && c.bf16_peak_gflops > c.fp32_peak_gflops ? "bf16 dot products" : "FP32 FMA",
                                 ", the best measured on this worker");
    return d;
  };
  std::optional<SpeedOfLight> sol = CheckSpeedOfLight(
      run, profile->candidate.median_s, work, device_limits(), options_.speed_of_light_margin,
      [&]() -> std::optional<Remeasured> {
        std::optional<RunnerHarness::Profiled> again = harness_.Profile(run, profile_call);
        if (!again.has_value()) return std::nullopt;
        if (again->report.candidate.median_s <= 0 || again->report.baseline.median_s <= 0) {
          run.Fail(v1::STAGE_PROFILE, v1::INFRA_ERROR, "the profiler measured no time (timing it again)");
          return std::nullopt;
        }
        profiled = std::move(again);
        profile = &profiled->report;
        if (options_.calibrate) measure_limits(CeilingProbe::kAll, scratch + "/ceilings-again");
        return Remeasured{profile->candidate.median_s, device_limits()};
      });
  if (!sol.has_value()) return false;
  *ev.mutable_timing() = ToTiming(profile->candidate);
  *ev.mutable_baseline() = ToTiming(profile->baseline);
  ev.set_speedup(profile->baseline.median_s / profile->candidate.median_s);
  ev.set_baseline_kind(v1::BASELINE_REFERENCE);
  const Ceilings limits = Limits();
  auto& counters = *ev.mutable_profile();
  counters["copies"] = static_cast<double>(profile->copies);
  counters["working_set_bytes"] = static_cast<double>(profile->working_set_bytes);
  counters["converged"] = profile->converged ? 1 : 0;
  counters["candidate_calls_per_sample"] = static_cast<double>(profile->candidate.calls_per_sample);
  counters["baseline_calls_per_sample"] = static_cast<double>(profile->baseline.calls_per_sample);
  counters["achieved_bandwidth_gbs"] = sol->implied_gbs;
  counters["achieved_gflops"] = sol->implied_gflops;
  // The limits the roofline is against (the highest measured on this
  // worker), and what the probe right after timing measured.
  counters["measured_bandwidth_gbs"] = limits.mem_bandwidth_gbs;
  if (limits.read_gbs > 0) counters["measured_read_gbs"] = limits.read_gbs;
  if (limits.copy_gbs > 0) counters["measured_copy_gbs"] = limits.copy_gbs;
  counters["measured_fp32_peak_gflops"] = limits.fp32_peak_gflops;
  if (limits.bf16_peak_gflops > 0) counters["measured_bf16_peak_gflops"] = limits.bf16_peak_gflops;
  if (after_timing.mem_bandwidth_gbs > 0) counters["bandwidth_gbs_after_timing"] = after_timing.mem_bandwidth_gbs;
  if (after_timing.fp32_peak_gflops > 0) counters["fp32_peak_gflops_after_timing"] = after_timing.fp32_peak_gflops;
  counters["peak_rss_bytes"] = static_cast<double>(profiled->peak_rss_bytes);
  counters["timed_checks"] = static_cast<double>(profile->timed_checks.size());
  counters["perturbed_inputs"] = static_cast<double>(profile->perturbed_inputs.size());
  run.Emit(v1::STAGE_PROFILE, /*ok=*/true,
           absl::StrCat("median ", profile->candidate.median_s * 1e3, " ms (spread ", profile->candidate.spread * 100,
                        "%), baseline ", profile->baseline.median_s * 1e3, " ms, speedup ", ev.speedup(), "x, ",
                        ev.timing().samples_s_size(), " samples",
                        profile->converged ? "" : " (time cap reached before 1% spread)"));
  // What users run today, timed against the same candidate on the same
  // inputs, still alone on the host.
  if (options_.time_production) {
    auto inputs = harness_.TimedInputs(task);
    if (inputs.ok()) production_.Time(run, run.cand.library_path, *inputs, profiled->baseline_outputs, "cpu");
  }
  return true;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> CreateCpuBackend(const CpuBackendOptions& options) {
  CpuBackendOptions opts = options;
  if (opts.work_dir.empty()) return absl::InvalidArgumentError("cpu backend: work_dir is required");
  if (opts.memory_limit_bytes < (int64_t{256} << 20)) {
    return absl::InvalidArgumentError("cpu backend: memory_limit_bytes must be at least 256 MiB");
  }
  if (opts.profile_time_cap_s <= 0) return absl::InvalidArgumentError("cpu backend: profile_time_cap_s must be > 0");
  KEVO_ASSIGN_OR_RETURN(opts.work_dir, PrepareWorkDir(opts.work_dir, "cpu backend"));
  opts.runner_path = RunnerPath(opts.runner_path, "kevo-runner-cpu");
  KEVO_ASSIGN_OR_RETURN(std::string runner_hash, RunnerHash(opts.runner_path, "cpu backend"));
  KEVO_ASSIGN_OR_RETURN(std::unique_ptr<sandbox::Sandbox> sb,
                        sandbox::Sandbox::Create({opts.use_bwrap, opts.bwrap_path}));
  KEVO_ASSIGN_OR_RETURN(HostCompiler compiler, ProbeHostCompiler(*sb, opts.compiler, "cpu backend"));
  std::string cpu_model = ProcField("/proc/cpuinfo", "model name");
  if (cpu_model.empty()) cpu_model = "unknown CPU";
  auto backend = std::make_unique<CpuBackend>(opts, std::move(sb), std::move(compiler.version), cpu_model,
                                              std::move(runner_hash), std::move(compiler.visible_paths));
  KEVO_RETURN_IF_ERROR(backend->Init());
  return backend;
}

}  // namespace kevo::worker