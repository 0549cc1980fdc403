#include "worker/backends/mtia_sim/mtia_backend.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include "common/expr.h"
#include "common/hash.h"
#include "common/log.h"
#include "common/status.h"
#include "common/task/task_loader.h"
#include "common/tensor.h"
#include "mtia_sim/mtia.h"
#include "worker/pipeline/elf_symbols.h"
#include "worker/pipeline/eval_pipeline.h"
#include "worker/pipeline/kernel_builder.h"
#include "worker/pipeline/speed_of_light.h"
#include "worker/pipeline/symbol_policy.h"
#include "worker/runner/protocol.h"

namespace kevo::worker {

extern const char kMtiaHeaderSource[];  // mtia_header.cc (generated)

namespace fs = std::filesystem;
namespace {

bool StartsWith(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

// Flags of MTIA candidates and of the MTIA baseline (docs/mtia-simulator.md,
// "Candidate ABI"); the include folder is added per backend. Host-side code
// of a kernel is free in the cycle model, so -O2 is plenty.
std::vector<std::string> MtiaFlags(const std::string& include_dir) {
  return {"-std=c++20", "-O2", "-fPIC", "-I" + include_dir};
}

// Linked into every MTIA kernel .so: a missing or misspelt kevo_mtia_launch
// becomes a link error (the builder links with -z defs).
constexpr char kMtiaWrapper[] = R"(#include "mtia_sim/mtia.h"
extern "C" void kevo_mtia_launch(kevo::mtia::Grid& grid, void** args);
extern "C" __attribute__((used, visibility("hidden"))) void* const kevo_mtia_launch_check =
    reinterpret_cast<void*>(&kevo_mtia_launch);
)";

// The naive MTIA baseline the task ships (reference_mtia.cc), or null.
const v1::Reference* MtiaReference(const v1::Task& task) {
  for (const v1::Reference& r : task.extra_references()) {
    if (absl::AsciiStrToLower(r.language()) == kMtiaLanguage && !r.source().empty()) return &r;
  }
  return nullptr;
}

// Op families whose flops run on the Dot Product Engine.
bool UsesDpe(const v1::Task& task) {
  const std::string& f = task.op_family();
  return f == "matmul" || f == "conv" || f == "fusion";
}

struct MtiaEvalRun : EvalRun {
  BuildResult cand;      // the candidate's .so
  BuildResult baseline;  // reference_mtia.cc's .so (timed against)
  BuildResult golden;    // the task's C++ reference .so (defines correctness)
};

class MtiaBackend final : public Backend {
 public:
  MtiaBackend(MtiaBackendOptions options, mtia::Config chip, std::unique_ptr<sandbox::Sandbox> sandbox,
              std::string compiler_version, std::string runner_hash, std::vector<std::string> compiler_visible)
      : options_(std::move(options)),
        chip_(std::move(chip)),
        sandbox_(std::move(sandbox)),
        compiler_version_(std::move(compiler_version)),
        include_dir_(options_.work_dir + "/include"),
        builder_(sandbox_.get(), options_.compiler,
                 absl::StrCat(compiler_version_, "\nmtia.h ", Sha256Hex(kMtiaHeaderSource)),
                 options_.work_dir + "/build", options_.compile_timeout,
                 std::max<int64_t>(options_.memory_limit_bytes, int64_t{4} << 30), std::move(compiler_visible)),
        harness_(sandbox_.get(), HarnessOptions(options_, runner_hash)) {}

  absl::StatusOr<v1::Hello> Describe() override;
  v1::Evaluation Evaluate(const v1::Task& task, const v1::Candidate& candidate, const EventSink& on_event) override;

 private:
  static RunnerHarnessOptions HarnessOptions(const MtiaBackendOptions& o, const std::string& hash) {
    RunnerHarnessOptions h = NativeRunnerOptions(o.runner_path, o.work_dir, o.run_timeout, o.memory_limit_bytes,
                                                 absl::StrCat(hash, " chip ", o.chip));
    h.extra_args = {"--mtia_config=" + o.chip};
    return h;
  }
  std::string DeviceName() const { return absl::StrCat(chip_.name, " (simulated)"); }
  double DramGbs() const { return chip_.dram_bytes_per_cycle * chip_.clock_hz / 1e9; }
  double DpeGflops() const { return chip_.dpe_peak_flops_per_cycle(false) * chip_.clock_hz / 1e9; }
  // SIMD engine, fp32, one fused op (2 flops) per lane per cycle.
  double SimdGflops() const { return 2 * chip_.simd_lanes_f32 * chip_.num_pes() * chip_.clock_hz / 1e9; }
  v1::Fingerprint MakeFingerprint() const;
  bool CompileStage(MtiaEvalRun& run) const;
  bool ProfileStage(MtiaEvalRun& run) const;

  const MtiaBackendOptions options_;
  const mtia::Config chip_;
  const std::unique_ptr<sandbox::Sandbox> sandbox_;
  const std::string compiler_version_;
  const std::string include_dir_;
  const KernelBuilder builder_;
  const RunnerHarness harness_;
};

v1::Fingerprint MtiaBackend::MakeFingerprint() const {
  v1::Fingerprint fp;
  fp.set_host(HostName());
  std::string cpu = ProcField("/proc/cpuinfo", "model name");
  fp.set_cpu_model(cpu.empty() ? "unknown CPU" : cpu);
  fp.set_compiler(compiler_version_);
  for (const std::string& f : MtiaFlags("<include>")) fp.add_flags(f);
  fp.set_os(OsDescription());
  fp.set_device(DeviceName());
  fp.set_sandbox(absl::StrCat(sandbox_->UsesBwrap() ? "bwrap+" : "", "seccomp+rlimits"));
  return fp;
}

absl::StatusOr<v1::Hello> MtiaBackend::Describe() {
  v1::Hello hello;
  hello.set_platform("mtia-sim");
  hello.set_device(DeviceName());
  hello.add_toolchains(compiler_version_);
  hello.add_toolchains(
      absl::StrCat("kevo MTIA simulator (", chip_.name, ", mtia.h ", Sha256Hex(kMtiaHeaderSource).substr(0, 12), ")"));
  hello.add_languages(kMtiaLanguage);
  *hello.mutable_fingerprint() = MakeFingerprint();
  // The simulated chip's figures, not the host's.
  hello.set_mem_bandwidth_gbs(DramGbs());
  hello.set_fp32_peak_gflops(DpeGflops());
  hello.set_compile_only(false);
  auto& caps = *hello.mutable_capabilities();
  caps["chip"] = chip_.name;
  caps["clock_ghz"] = absl::StrCat(chip_.clock_hz / 1e9);
  caps["pes"] = absl::StrCat(chip_.grid_rows, "x", chip_.grid_cols);
  caps["local_memory_kib"] = absl::StrCat(chip_.local_memory_bytes / 1024);
  caps["lls_mib"] = absl::StrCat(chip_.lls_bytes >> 20);
  caps["dram_gbs"] = absl::StrCat(DramGbs());
  caps["sram_gbs"] = absl::StrCat(chip_.sram_bytes_per_cycle * chip_.clock_hz / 1e9);
  caps["dpe_fp16_gflops"] = absl::StrCat(DpeGflops());
  caps["dpe_int8_gops"] = absl::StrCat(chip_.dpe_peak_flops_per_cycle(true) * chip_.clock_hz / 1e9);
  caps["simd_fp32_gflops"] = absl::StrCat(SimdGflops());
  caps["timing"] = "simulated (deterministic cycle model)";
  caps["sandbox"] = hello.fingerprint().sandbox();
  return hello;
}

v1::Evaluation MtiaBackend::Evaluate(const v1::Task& task_in, const v1::Candidate& candidate,
                                     const EventSink& on_event) {
  const v1::Task task = kevo::task::TimedOn(task_in, "mtia-sim");  // this platform's timed binding
  MtiaEvalRun run{{task, candidate, on_event}};
  v1::Evaluation& ev = run.ev;
  BeginEvaluation(task, candidate, "mtia-sim", MakeFingerprint(), &ev);
  if (CompileStage(run) && harness_.Validate(run, run.cand.library_path, run.golden.library_path) &&
      ProfileStage(run)) {
    ev.set_status(v1::OK);
  }
  return run.Finish(options_.keep_eval_dirs);
}

bool MtiaBackend::CompileStage(MtiaEvalRun& run) const {
  const v1::Task& task = run.task;
  const v1::Candidate& candidate = run.candidate;
  run.Begin(v1::STAGE_COMPILE);
  auto fail = [&](v1::EvalStatus status, const std::string& message) {
    return run.Fail(v1::STAGE_COMPILE, status, message);
  };
  const std::string language = absl::AsciiStrToLower(candidate.language());
  if (language != kMtiaLanguage) {
    return fail(v1::COMPILE_ERROR,
                absl::StrCat("language '", candidate.language(), "' is not supported on mtia-sim (use ", kMtiaLanguage,
                             ": C++ against mtia_sim/mtia.h exporting ", mtia::kLaunchSymbol, ")"));
  }
  const v1::Reference* baseline = MtiaReference(task);
  if (baseline == nullptr) {
    return fail(v1::INFRA_ERROR, absl::StrCat("FAILED_PRECONDITION: task '", task.name(),
                                              "' has no reference_mtia.cc: no MTIA baseline (add a naive MTIA "
                                              "port of the reference as reference_mtia.cc in the task folder)"));
  }
  std::vector<std::string> extra(candidate.extra_flags().begin(), candidate.extra_flags().end());
  if (absl::Status s = CheckExtraFlags(extra); !s.ok()) {
    return fail(v1::COMPILE_ERROR, std::string(s.message()));
  }
  auto wrapper = TaskWrapperSource(task);
  if (!wrapper.ok()) return fail(v1::INFRA_ERROR, std::string(wrapper.status().message()));
  BuildSpec cand_spec{candidate.source(), MtiaFlags(include_dir_), kMtiaWrapper};
  cand_spec.flags.insert(cand_spec.flags.end(), extra.begin(), extra.end());
  auto cand = builder_.Build(cand_spec);
  if (!cand.ok()) return fail(v1::INFRA_ERROR, std::string(cand.status().message()));
  if (cand->status != v1::OK) {
    run.ev.mutable_diagnostics()->set_compiler_output(cand->compiler_output);
    return fail(cand->status, cand->message);
  }
  if (!options_.skip_symbol_check) {
    auto symbols = ReadElfSymbols(cand->object_path);
    if (!symbols.ok()) return fail(v1::INFRA_ERROR, std::string(symbols.status().message()));
    std::vector<std::string> forbidden;
    for (const std::string& name : UndefinedSymbolNames(*symbols)) {
      if (!IsAllowedMtiaImport(name)) forbidden.push_back(name);
    }
    if (!forbidden.empty()) {
      run.ev.mutable_diagnostics()->set_violation(absl::StrJoin(forbidden, ", "));
      return fail(v1::SANDBOX_VIOLATION,
                  absl::StrCat("the candidate imports forbidden symbol(s): ", absl::StrJoin(forbidden, ", "),
                               ". MTIA kernels may use only mtia.h, math, memory and the C++ "
                               "runtime"));
    }
  }
  auto base =
      BuildTaskReference(builder_, {baseline->source(), MtiaFlags(include_dir_), kMtiaWrapper}, "reference_mtia.cc");
  if (!base.ok()) return fail(v1::INFRA_ERROR, std::string(base.status().message()));
  // The task's C++ reference, for golden outputs (as on the CPU).
  auto golden = BuildTaskReference(builder_, {task.reference().source(), CppReferenceFlags(), *wrapper}, "reference");
  if (!golden.ok()) return fail(v1::INFRA_ERROR, std::string(golden.status().message()));
  run.cand = *std::move(cand);
  run.baseline = *std::move(base);
  run.golden = *std::move(golden);
  run.Emit(
      v1::STAGE_COMPILE, /*ok=*/true,
      absl::StrCat("compiled", run.cand.cache_hit ? " (cached)" : "", "; MTIA baseline",
                   run.baseline.cache_hit ? " (cached)" : "", "; reference", run.golden.cache_hit ? " (cached)" : ""));
  return true;
}

bool MtiaBackend::ProfileStage(MtiaEvalRun& run) const {
  const v1::Task& task = run.task;
  v1::Evaluation& ev = run.ev;
  // No lock: simulated time does not depend on what else the host runs.
  std::optional<RunnerHarness::Profiled> profiled =
      harness_.Profile(run, {.candidate_so = run.cand.library_path,
                             .baseline_so = run.baseline.library_path,
                             .timeout = 2 * options_.run_timeout,
                             .who = "candidate or MTIA baseline",
                             .mismatch_suffix = " (baseline: reference_mtia.cc)"});
  if (!profiled.has_value()) return false;
  const runner::ProfileReport* profile = &profiled->report;
  auto fail = [&](v1::EvalStatus status, const std::string& message) {
    return run.Fail(v1::STAGE_PROFILE, status, message);
  };
  if (profile->candidate.median_s <= 0) {
    return fail(v1::RUNTIME_ERROR, "the candidate launched no kernel on the grid (0 simulated cycles)");
  }
  if (profile->baseline.median_s <= 0) {
    return fail(v1::INFRA_ERROR, "the task's reference_mtia.cc launched no kernel on the grid");
  }
  const Work work = TimedWork(task);
  // The speed-of-light check against the simulated chip's own figures: its
  // DRAM bandwidth and its fastest engine (the DPE: a kernel may run any
  // task's flops there). The simulated time is deterministic, so it is not
  // timed twice. A kernel that computes on the host instead of on the grid
  // shows here.
  DeviceLimits limits;
  limits.bandwidth_gbs = DramGbs();
  limits.bandwidth_source = absl::StrCat(chip_.name, " DRAM");
  limits.peak_gflops = std::max(DpeGflops(), SimdGflops());
  limits.peak_source = absl::StrCat(chip_.name, ", its fastest engine");
  std::optional<SpeedOfLight> sol = CheckSpeedOfLight(run, profile->candidate.median_s, work, limits,
                                                      options_.speed_of_light_margin, /*remeasure=*/nullptr);
  if (!sol.has_value()) return false;
  // The roofline shown is against the engine the op family's flops run on.
  const double peak_gflops = UsesDpe(task) ? DpeGflops() : SimdGflops();
  limits.peak_gflops = peak_gflops;
  ev.set_roofline_fraction(
      MeasureSpeedOfLight(profile->candidate.median_s, work, limits, options_.speed_of_light_margin).fraction);
  *ev.mutable_timing() = ToTiming(profile->candidate);
  *ev.mutable_baseline() = ToTiming(profile->baseline);
  ev.set_speedup(profile->baseline.median_s / profile->candidate.median_s);
  ev.set_baseline_kind(v1::BASELINE_REFERENCE);
  ev.set_deterministic_timing(true);
  auto& counters = *ev.mutable_profile();
  for (const auto& [key, value] : profile->counters) counters[key] = value;
  counters["achieved_bandwidth_gbs"] = sol->implied_gbs;
  counters["achieved_gflops"] = sol->implied_gflops;
  counters["roofline_peak_gflops"] = peak_gflops;
  counters["peak_rss_bytes"] = static_cast<double>(profiled->peak_rss_bytes);
  const auto c = [&](const char* key) {
    auto it = profile->counters.find(key);
    return it == profile->counters.end() ? 0.0 : it->second;
  };
  run.Emit(v1::STAGE_PROFILE, /*ok=*/true,
           absl::StrCat("simulated ", profile->candidate.median_s * 1e6, " us on ", chip_.name, " (", c("cycles"),
                        " cycles, PE utilisation ", 100 * c("pe_utilization"), "%, DRAM ", 100 * c("dram_utilization"),
                        "%), MTIA baseline ", profile->baseline.median_s * 1e6, " us, speedup ", ev.speedup(), "x"));
  return true;
}

}  // namespace

bool IsAllowedMtiaImport(std::string_view name) {
  if (IsAllowedImport(name)) return true;
  // std::string (KernelError messages, Config::name) and std::runtime_error
  // (KernelError's base): pure computation in libstdc++.
  return StartsWith(name, "_ZNSt7__cxx1112basic_string") || StartsWith(name, "_ZNKSt7__cxx1112basic_string") ||
         StartsWith(name, "_ZNSt13runtime_error") || StartsWith(name, "_ZNKSt13runtime_error") ||
         StartsWith(name, "_ZTVSt13runtime_error") || name == "_ZSt25__throw_bad_function_callv";
}

absl::StatusOr<std::unique_ptr<Backend>> CreateMtiaBackend(const MtiaBackendOptions& options) {
  MtiaBackendOptions opts = options;
  if (opts.work_dir.empty()) return absl::InvalidArgumentError("mtia-sim backend: work_dir is required");
  mtia::Config chip;
  if (!mtia::ConfigForChip(opts.chip, &chip)) {
    return absl::InvalidArgumentError(
        absl::StrCat("mtia-sim backend: unknown chip '", opts.chip, "' (", mtia::kChipNames, ")"));
  }
  if (opts.memory_limit_bytes < (int64_t{512} << 20)) {
    return absl::InvalidArgumentError("mtia-sim backend: memory_limit_bytes must be at least 512 MiB");
  }
  KEVO_ASSIGN_OR_RETURN(opts.work_dir, PrepareWorkDir(opts.work_dir, "mtia-sim backend"));
  std::error_code ec;
  for (const char* sub : {"include/mtia_sim", "include/worker/mtia_sim"}) {
    fs::create_directories(opts.work_dir + "/" + sub, ec);
  }
  // The header candidates compile against: this binary's own copy, written
  // atomically (other workers may share the folder). Candidates written
  // before the simulator left worker/ include it by its old path, which
  // forwards to it.
  const std::pair<std::string, std::string> headers[] = {
      {"/include/mtia_sim/mtia.h", kMtiaHeaderSource},
      {"/include/worker/mtia_sim/mtia.h",
       "// The MTIA kernel API's old path (before it moved out of worker/).\n#include \"mtia_sim/mtia.h\"\n"}};
  for (const auto& [path, text] : headers) {
    const std::string header = opts.work_dir + path;
    auto current = ReadFileBytes(header);
    if (!current.ok() || *current != text) {
      const std::string tmp = absl::StrCat(header, ".tmp-", getpid());
      KEVO_RETURN_IF_ERROR(WriteFileBytes(tmp, text));
      fs::rename(tmp, header, ec);
      if (ec) return absl::InternalError(absl::StrCat("cannot write ", header, ": ", ec.message()));
    }
  }
  opts.runner_path = RunnerPath(opts.runner_path, "kevo-runner-mtia");
  KEVO_ASSIGN_OR_RETURN(std::string runner_hash, RunnerHash(opts.runner_path, "mtia-sim backend"));
  KEVO_ASSIGN_OR_RETURN(std::unique_ptr<sandbox::Sandbox> sb,
                        sandbox::Sandbox::Create({opts.use_bwrap, opts.bwrap_path}));
  KEVO_ASSIGN_OR_RETURN(HostCompiler compiler, ProbeHostCompiler(*sb, opts.compiler, "mtia-sim backend"));
  compiler.visible_paths.push_back(opts.work_dir + "/include");
  LogInfo("mtia-sim backend: simulating ", chip.name, " (", chip.grid_rows, "x", chip.grid_cols, " PEs at ",
          chip.clock_hz / 1e9, " GHz)");
  return std::unique_ptr<Backend>(new MtiaBackend(opts, chip, std::move(sb), std::move(compiler.version),
                                                  std::move(runner_hash), std::move(compiler.visible_paths)));
}

}  // namespace kevo::worker
