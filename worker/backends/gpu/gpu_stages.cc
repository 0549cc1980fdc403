#include "worker/backends/gpu/gpu_stages.h"

#include <glob.h>
#include <unistd.h>

#include <algorithm>
#include <deque>
#include <filesystem>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include <nlohmann/json.hpp>

#include "common/hash.h"
#include "common/log.h"
#include "common/status.h"
#include "common/tensor.h"
#include "worker/pipeline/speed_of_light.h"

namespace kevo::worker {
namespace fs = std::filesystem;
namespace {

std::string Tail(const std::string& s, size_t n) { return s.size() <= n ? s : "..." + s.substr(s.size() - n); }

std::vector<std::string> Glob(const std::string& pattern) {
  std::vector<std::string> out;
  glob_t g{};
  if (glob(pattern.c_str(), 0, nullptr, &g) == 0) {
    for (size_t i = 0; i < g.gl_pathc; ++i) out.push_back(g.gl_pathv[i]);
  }
  globfree(&g);
  return out;
}

// The window of kevo_worker_gpu_timing_utilisation: long enough to smooth
// over a few evaluations, short enough to show the current job's use rather
// than the worker's whole life.
constexpr absl::Duration kUtilisationWindow = absl::Seconds(60);

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

// Dense f16/bf16 tensor-core peak from NVIDIA's datasheet (H100 SXM and
// H200 SXM: 989.4 TFLOP/s; docs/nvidia.md), or 0 for a GPU without a figure
// here. Not measured: mma.sync, the instruction a short probe kernel could
// time, reaches only part of Hopper's wgmma rate.
double NvidiaDatasheetTensorPeakGflops(const GpuInfo& gpu) {
  if (absl::StrContains(gpu.name, "H200") ||
      (absl::StrContains(gpu.name, "H100") && absl::StrContains(gpu.name, "HBM3"))) {
    return 989.4e3;
  }
  return 0;
}

RunnerHarnessOptions CpuHarnessOptions(const GpuStagesOptions& o) {
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
  h.runner_hash = o.cpu_runner_hash;
  return h;
}

}  // namespace

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

void AddVisibleFolder(std::vector<std::string>& paths, const std::string& folder) {
  std::error_code ec;
  const fs::path real = fs::weakly_canonical(folder, ec);
  if (ec) return;
  for (const std::string& p : paths) {
    if (real.string().rfind(p + "/", 0) == 0) return;
  }
  paths.push_back(real.string());
}

std::vector<std::string> GpuVisiblePaths(const GpuVendor& vendor, const std::string& runner_path) {
  std::vector<std::string> paths = SandboxSystemPaths();
  paths.push_back("/sys");
  for (const std::string& pattern : vendor.device_globs) {
    for (const std::string& dev : Glob(pattern)) paths.push_back(dev);
  }
  for (const std::string& folder : vendor.extra_paths) AddVisibleFolder(paths, folder);
  const fs::path dir = fs::path(runner_path).parent_path();
  paths.push_back(dir.string());
  paths.push_back((dir.parent_path() / "lib").string());
  return paths;
}

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
      g.arch = d.value("arch", "");
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

absl::StatusOr<GpuProbe> ProbeGpus(const sandbox::Sandbox& sb, const GpuVendor& vendor, const std::string& runner_path,
                                   const std::string& scratch_dir, bool measure) {
  auto no_gpu = [&](const std::string& why) {
    return absl::FailedPreconditionError(
        absl::StrCat("no ", vendor.name, " GPU found (", vendor.runner_name, " probe: ", why, ")"));
  };
  if (access(runner_path.c_str(), X_OK) != 0) {
    return no_gpu(absl::StrCat(runner_path, " is missing: this build has no ", vendor.runner_name,
                               " (its compiler or runtime was not found when it was configured)"));
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
  cmd.visible_paths = GpuVisiblePaths(vendor, runner_path);
  cmd.limits.wall_timeout = absl::Seconds(120);
  auto r = sb.Run(cmd);
  if (!r.ok()) return no_gpu(std::string(r.status().message()));
  auto report = ReadFileBytes(scratch_dir + "/report.txt");
  const runner::Report parsed = runner::ParseReport(report.ok() ? *report : "");
  if (!r->Succeeded()) {
    std::string why = !parsed.error.empty()          ? parsed.error
                      : !parsed.device_error.empty() ? parsed.device_error
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

// One GPU: its timing slot and its health.
struct GpuStages::Gpu {
  GpuInfo info;
  std::unique_ptr<RunnerHarness> harness;  // the GPU runner --device=index
  absl::Mutex slot;                        // held by validate + profile
  absl::Mutex mu;
  bool healthy ABSL_GUARDED_BY(mu) = true;
  // When the slot was taken (InfinitePast while free), and the busy
  // intervals of the last kUtilisationWindow.
  absl::Time held_since ABSL_GUARDED_BY(mu) = absl::InfinitePast();
  std::deque<std::pair<absl::Time, absl::Time>> busy ABSL_GUARDED_BY(mu);
};

const GpuVendor& NvidiaVendor() {
  static const auto* v = new GpuVendor{
      "NVIDIA", "kevo-runner-cuda", {"/dev/nvidia*"}, {"/usr/local/cuda"}, &NvidiaDatasheetTensorPeakGflops};
  return *v;
}

const GpuVendor& RocmVendor() {
  // /dev/kfd (compute) and the render nodes of /dev/dri (one per GPU).
  static const auto* v = new GpuVendor{"ROCm", "kevo-runner-hip", {"/dev/kfd", "/dev/dri"}, {}};
  return *v;
}

GpuStages::GpuStages(const sandbox::Sandbox* sandbox, GpuStagesOptions options, GpuProbe probe)
    : sandbox_(sandbox),
      options_(std::move(options)),
      probe_(std::move(probe)),
      cpu_harness_(sandbox_, CpuHarnessOptions(options_)),
      start_(absl::Now()) {
  for (const GpuInfo& info : probe_.gpus) {
    auto gpu = std::make_unique<Gpu>();
    gpu->info = info;
    RunnerHarnessOptions h;
    h.runner_path = options_.runner_path;
    h.work_dir = absl::StrCat(options_.work_dir, "/gpu", info.index);
    h.visible_paths = GpuVisiblePaths(*options_.vendor, options_.runner_path);
    h.visible_paths.push_back(options_.work_dir + "/build");
    h.visible_paths.push_back(options_.work_dir + "/inputs");
    h.run_timeout = options_.run_timeout;
    h.memory_limit_bytes = 0;  // see GpuStagesOptions::memory_limit_bytes
    h.open_files = 1024;
    h.runner_hash = options_.runner_hash;
    h.extra_args = {absl::StrCat("--device=", info.index)};
    std::error_code ec;
    fs::create_directories(h.work_dir + "/evals", ec);
    gpu->harness = std::make_unique<RunnerHarness>(sandbox_, std::move(h));
    gpus_.push_back(std::move(gpu));
  }
}

GpuStages::~GpuStages() = default;

double GpuStages::TimingUtilisation() const {
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

bool GpuStages::CheckHealth(Gpu& gpu) const {
  const std::string dir = absl::StrCat(gpu.harness->NewScratchDir(), "-health");
  std::error_code ec;
  fs::create_directories(dir, ec);
  auto r = gpu.harness->Run({"health", "--report=" + dir + "/report.txt"}, dir, absl::Seconds(60), 0);
  const bool ok = r.ok() && r->outcome.status == v1::OK;
  if (!ok) {
    LogError("GPU ", gpu.info.index, " (", gpu.info.name,
             ") failed its health check: ", r.ok() ? r->outcome.message : std::string(r.status().message()));
  }
  fs::remove_all(dir, ec);
  absl::MutexLock l(&gpu.mu);
  gpu.healthy = ok;
  return ok;
}

GpuStages::Gpu& GpuStages::PickGpu() {
  // A free GPU if there is one, else the next in turn (waiting for it).
  for (auto& g : gpus_) {
    if (g->slot.TryLock()) return *g;
  }
  Gpu& g = *gpus_[next_gpu_.fetch_add(1) % gpus_.size()];
  g.slot.Lock();
  return g;
}

absl::StatusOr<GpuStages::CpuReferenceProfile> GpuStages::CpuReference(const v1::Task& task, const std::string& ref_so,
                                                                       const std::string& timed_inputs) {
  const std::string key = Sha256Hex(absl::StrCat(DeterministicBytes(task), "\n", ref_so));
  {
    absl::MutexLock l(&cpu_ref_mu_);
    if (auto it = cpu_ref_cache_.find(key); it != cpu_ref_cache_.end()) return it->second;
  }
  KEVO_ASSIGN_OR_RETURN(TimedOutputs timed_outputs, ResolveTimedOutputs(task));
  const int64_t out_bytes = timed_outputs.bytes;
  const std::string dir = cpu_harness_.NewScratchDir();
  std::error_code ec;
  fs::create_directories(dir, ec);
  KEVO_RETURN_IF_ERROR(WriteFileBytes(dir + "/task.pb", task.SerializeAsString()));
  // The reference against itself: its samples are the baseline's.
  auto r = cpu_harness_.Run(
      {"profile", "--task=" + dir + "/task.pb", "--kernel=" + ref_so, "--baseline=" + ref_so,
       "--inputs=" + timed_inputs, "--outputs=" + dir + "/outputs.bin", "--result=" + dir + "/profile.json",
       "--report=" + dir + "/report.txt", absl::StrCat("--time_cap_s=", options_.profile_time_cap_s),
       absl::StrCat("--mem_budget_bytes=", options_.memory_limit_bytes / 3)},
      dir, 2 * options_.run_timeout + absl::Seconds(3 * options_.profile_time_cap_s + 30),
      runner::ProfileOutputsBytes(out_bytes, runner::kTimedChecks));
  auto cleanup = [&] { fs::remove_all(dir, ec); };
  if (!r.ok()) {
    cleanup();
    return r.status();
  }
  if (r->outcome.status != v1::OK) {
    cleanup();
    return absl::InternalError(absl::StrCat("timing the C++ reference on the CPU failed: ", r->outcome.message));
  }
  // Both kernels' outputs after timing, then a pair per kept timed call
  // (worker/runner/protocol.h): only the first set is kept, so only it is
  // read (the file is up to 2 x (1 + kTimedChecks) outputs, GiBs at a
  // timed_gpu shape).
  auto json = ReadFileBytes(dir + "/profile.json");
  const std::string outputs_path = dir + "/outputs.bin";
  const auto outputs_size = static_cast<int64_t>(fs::file_size(outputs_path, ec));
  auto outputs = ReadFileRange(outputs_path, 0, out_bytes);
  cleanup();
  if (!json.ok() || ec || !outputs.ok()) {
    return absl::InternalError("timing the C++ reference on the CPU wrote no results");
  }
  KEVO_ASSIGN_OR_RETURN(runner::ProfileReport profile, runner::ProfileFromJson(*json));
  if (outputs_size != runner::ProfileOutputsBytes(out_bytes, std::ssize(profile.timed_checks))) {
    return absl::InternalError("timing the C++ reference on the CPU wrote outputs of the wrong size");
  }
  CpuReferenceProfile p;
  p.timing = profile.candidate;
  p.outputs = *std::move(outputs);
  absl::MutexLock l(&cpu_ref_mu_);
  cpu_ref_cache_[key] = p;
  return p;
}

bool GpuStages::Run(EvalRun& run, const std::string& candidate_so, const std::string& reference_so,
                    const GpuBaseline& baseline) {
  const v1::Task& task = run.task;
  // Everything the CPU does comes first, so the GPU never waits on it: the
  // golden outputs (cached; Validate finds them), the timed inputs, and the
  // CPU baseline when there is no GPU one.
  run.Begin(v1::STAGE_VALIDATE);
  const std::vector<uint64_t> seeds = runner::ValidationSeeds(task);
  auto layout = runner::OutputLayout(task, seeds);
  if (!layout.ok()) {
    return run.Fail(v1::STAGE_VALIDATE, v1::INFRA_ERROR,
                    absl::StrCat("the task's shapes do not resolve: ", layout.status().message()));
  }
  int64_t output_bytes = 0;
  for (const auto& slot : *layout) output_bytes += slot.bytes;
  if (auto golden = cpu_harness_.GoldenOutputs(task, reference_so, seeds, output_bytes); !golden.ok()) {
    return run.Fail(v1::STAGE_VALIDATE, v1::INFRA_ERROR, std::string(golden.status().message()));
  }
  auto timed_inputs = cpu_harness_.TimedInputs(task);
  if (!timed_inputs.ok()) {
    return run.Fail(v1::STAGE_PROFILE, v1::INFRA_ERROR,
                    absl::StrCat("cannot generate the timed inputs: ", timed_inputs.status().message()));
  }
  std::optional<CpuReferenceProfile> cpu_ref;
  if (baseline.kind == v1::BASELINE_CPU_REFERENCE) {
    auto p = CpuReference(task, reference_so, *timed_inputs);
    if (!p.ok()) return run.Fail(v1::STAGE_PROFILE, v1::INFRA_ERROR, std::string(p.status().message()));
    cpu_ref = *std::move(p);
  }
  return HoldGpu(run, [&](Gpu& gpu) {
    return gpu.harness->Validate(run, candidate_so, reference_so, &cpu_harness_) &&
           ProfileStage(run, gpu, candidate_so, *timed_inputs, baseline, cpu_ref ? &*cpu_ref : nullptr);
  });
}

bool GpuStages::OnGpu(EvalRun& run, const std::function<bool(const GpuInfo& gpu)>& body) {
  return HoldGpu(run, [&](Gpu& gpu) { return body(gpu.info); });
}

bool GpuStages::HoldGpu(EvalRun& run, const std::function<bool(Gpu& gpu)>& body) {
  const absl::Time wait_start = absl::Now();
  Gpu& gpu = PickGpu();
  const absl::Time held_from = absl::Now();
  {
    absl::MutexLock l(&gpu.mu);
    gpu.held_since = held_from;
  }
  auto& counters = *run.ev.mutable_profile();
  v1::DeviceUse& use = *run.ev.mutable_device_use();
  use.set_gpu_index(gpu.info.index);
  use.set_wait_s(absl::ToDoubleSeconds(held_from - wait_start));
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
  use.set_stage_s(held);
  counters["gpu_timing_utilisation"] = TimingUtilisation();
  return ok;
}

bool GpuStages::ProfileStage(EvalRun& run, Gpu& gpu, const std::string& candidate_so, const std::string& timed_inputs,
                             const GpuBaseline& baseline, const CpuReferenceProfile* cpu_ref) {
  const v1::Task& task = run.task;
  v1::Evaluation& ev = run.ev;
  const std::string& scratch = run.scratch;
  run.Begin(v1::STAGE_PROFILE);
  auto fail = [&](v1::EvalStatus status, const std::string& message) {
    return run.Fail(v1::STAGE_PROFILE, status, message);
  };
  auto timed_outputs = ResolveTimedOutputs(task);
  if (!timed_outputs.ok()) return fail(v1::INFRA_ERROR, std::string(timed_outputs.status().message()));
  const int64_t timed_output_bytes = timed_outputs->bytes;
  const bool gpu_baseline = baseline.kind != v1::BASELINE_CPU_REFERENCE;
  const std::string baseline_arg = gpu_baseline ? baseline.runner_arg : "none";
  // The runner writes the candidate's outputs after timing, then the GPU
  // baseline's, then per kept timed call the candidate's and the baseline's
  // on the same perturbed inputs (worker/runner/protocol.h). Without a GPU
  // baseline nothing in its process can compute what a perturbed call
  // should give: it keeps no timed call, and the candidate's outputs after
  // timing are compared with the C++ reference's at the timed inputs.
  const int64_t check_bytes = runner::ProfileOutputsBytes(timed_output_bytes, 0, gpu_baseline);
  const int min_timed_checks = gpu_baseline ? runner::kTimedChecks : 0;
  const std::string outputs_path = scratch + "/timed_outputs.bin";
  // One run of the GPU runner's profile mode in a fresh process, and the
  // checks of what it wrote; nullopt when the evaluation has failed.
  struct Measured {
    runner::ProfileReport profile;
    std::string timed_bytes;  // the outputs after timing (and the GPU baseline's)
  };
  auto measure = [&]() -> std::optional<Measured> {
    auto failed = [&](v1::EvalStatus status, const std::string& message) -> std::optional<Measured> {
      fail(status, message);
      return std::nullopt;
    };
    std::error_code ec;
    fs::remove(scratch + "/report.txt", ec);
    auto prof = gpu.harness->Run(
        {"profile", "--task=" + scratch + "/task.pb", "--kernel=" + candidate_so, "--baseline=" + baseline_arg,
         "--inputs=" + timed_inputs, "--outputs=" + outputs_path, "--result=" + scratch + "/profile.json",
         "--report=" + scratch + "/report.txt", absl::StrCat("--time_cap_s=", options_.profile_time_cap_s)},
        scratch, options_.run_timeout + absl::Seconds(3 * options_.profile_time_cap_s + 30),
        runner::ProfileOutputsBytes(timed_output_bytes, min_timed_checks, gpu_baseline));
    if (!prof.ok()) return failed(v1::INFRA_ERROR, std::string(prof.status().message()));
    if (prof->outcome.status != v1::OK) {
      ev.mutable_diagnostics()->set_signal(prof->outcome.signal);
      ev.mutable_diagnostics()->set_violation(prof->outcome.violation);
      return failed(prof->outcome.status, absl::StrCat("candidate (at the timed binding '", task.time().name(), "') ",
                                                       prof->outcome.message));
    }
    auto prof_json = ReadFileBytes(scratch + "/profile.json");
    const auto outputs_size = static_cast<int64_t>(fs::file_size(outputs_path, ec));
    const char* unwritten =
        "the profiler ended without writing its results: the candidate ended the "
        "process (exit?) or wrote into the runner's files";
    if (!prof_json.ok() || ec) return failed(v1::RUNTIME_ERROR, unwritten);
    auto profile = runner::ProfileFromJson(*prof_json);
    if (!profile.ok()) return failed(v1::INFRA_ERROR, std::string(profile.status().message()));
    const auto kept = static_cast<int64_t>(profile->timed_checks.size());
    if (kept > min_timed_checks ||
        outputs_size != runner::ProfileOutputsBytes(timed_output_bytes, kept, gpu_baseline)) {
      return failed(v1::RUNTIME_ERROR, unwritten);
    }
    if (!profile->modified_input.empty()) {
      return failed(v1::INPUT_MODIFIED, absl::StrCat("input '", profile->modified_input,
                                                     "' changed while timing at binding '", task.time().name(), "'"));
    }
    if (const std::string& over = profile->overflowed; !over.empty()) {
      return failed(v1::RUNTIME_ERROR, absl::StrCat("wrote past the end of tensor '", over, "' at the timed binding '",
                                                    task.time().name(), "'"));
    }
    // The kept timed calls first, as on the cpu worker: a call that was fast
    // because it returned a stale or faked result is named by its sample.
    if (TimedCheck check = CheckTimedCalls(task, *timed_outputs, *profile, outputs_path, min_timed_checks, "");
        check.status != v1::OK) {
      return failed(check.status, check.message);
    }
    auto timed_bytes = ReadFileRange(outputs_path, 0, check_bytes);
    if (!timed_bytes.ok()) return failed(v1::INFRA_ERROR, std::string(timed_bytes.status().message()));
    const std::string& want_all = gpu_baseline ? *timed_bytes : cpu_ref->outputs;
    const size_t want_offset = gpu_baseline ? static_cast<size_t>(timed_output_bytes) : 0;
    const std::string want_name = gpu_baseline ? "baseline" : "C++ reference";
    int64_t offset = 0;
    for (const auto& [spec, count] : timed_outputs->tensors) {
      const char* got = timed_bytes->data() + offset;
      const char* want = want_all.data() + want_offset + offset;
      Tolerances tol = ToleranceFor(task, spec->dtype());
      CompareResult cmp = CompareTensors(spec->dtype(), got, want, count, tol);
      if (!cmp.ok) {
        return failed(cmp.nonfinite ? v1::NONFINITE : v1::WRONG_ANSWER,
                      absl::StrCat("at the timed binding '", task.time().name(),
                                   "' (checked on the "
                                   "buffers it was timed on): ",
                                   spec->name(), "[", cmp.first_bad_index,
                                   "] = ", ElementAsDouble(spec->dtype(), got, cmp.first_bad_index), ", ", want_name,
                                   " ", ElementAsDouble(spec->dtype(), want, cmp.first_bad_index), "; ", cmp.bad_count,
                                   " of ", count, " elements outside atol ", tol.atol, " + rtol ", tol.rtol));
      }
      offset += count * static_cast<int64_t>(DTypeSize(spec->dtype()));
    }
    const runner::TimingSeries& base = gpu_baseline ? profile->baseline : cpu_ref->timing;
    if (profile->candidate.median_s <= 0 || base.median_s <= 0) {
      return failed(v1::INFRA_ERROR, "the profiler measured no time");
    }
    return Measured{*std::move(profile), *std::move(timed_bytes)};
  };
  std::optional<Measured> measured = measure();
  if (!measured.has_value()) return false;
  const runner::TimingSeries* base = gpu_baseline ? &measured->profile.baseline : &cpu_ref->timing;
  // The memory roof: the higher of the bandwidth the probe measured (a
  // device-to-device copy, which the best kernels beat by a few percent) and
  // the datasheet's (bus width x memory clock). The compute roof: the
  // tensor-core peak for f16/bf16 GEMMs (datasheet), else the measured FP32
  // FMA rate.
  const double copy_bw = gpu.info.copy_bandwidth_gbs;
  const double bw = std::max(copy_bw, gpu.info.theoretical_bandwidth_gbs);
  const v1::DType tc_dtype = TensorCoreDType(task);
  const auto tc_peak_of = options_.vendor->tensor_peak_gflops;
  const double tc_peak = tc_dtype != v1::DTYPE_UNSPECIFIED && tc_peak_of != nullptr ? tc_peak_of(gpu.info) : 0;
  const double compute_peak = tc_peak > 0 ? tc_peak : gpu.info.fp32_gflops;
  DeviceLimits limits;
  limits.bandwidth_gbs = bw;
  limits.bandwidth_source = bw > copy_bw ? "bus width x memory clock" : "device-to-device copy, measured";
  limits.peak_gflops = compute_peak;
  limits.peak_source = tc_peak > 0 ? "tensor cores, datasheet" : "FP32 FMA, measured";
  // The L2 is flushed before each sample, so a call's outputs up to its size
  // may still be in it when the timer stops.
  limits.cache_bytes = static_cast<double>(gpu.info.l2_bytes);
  const Work work = TimedWork(task);
  // A time beyond the speed of light is timed again in a fresh runner
  // (docs/reliability.md, "Speed of light").
  std::optional<SpeedOfLight> sol =
      CheckSpeedOfLight(run, measured->profile.candidate.median_s, work, limits, options_.speed_of_light_margin,
                        [&]() -> std::optional<Remeasured> {
                          measured = measure();
                          if (!measured.has_value()) return std::nullopt;
                          base = gpu_baseline ? &measured->profile.baseline : &cpu_ref->timing;
                          return Remeasured{measured->profile.candidate.median_s, limits};
                        });
  if (!sol.has_value()) return false;
  const runner::ProfileReport* profile = &measured->profile;
  const std::string& want_all = gpu_baseline ? measured->timed_bytes : cpu_ref->outputs;
  const size_t want_offset = gpu_baseline ? static_cast<size_t>(timed_output_bytes) : 0;
  *ev.mutable_timing() = ToTiming(profile->candidate);
  *ev.mutable_baseline() = ToTiming(*base);
  ev.set_speedup(base->median_s / profile->candidate.median_s);
  ev.set_baseline_kind(baseline.kind);
  auto& counters = *ev.mutable_profile();
  counters["compute_peak_gflops"] = compute_peak;
  counters["compute_peak_datasheet"] = tc_peak > 0 ? 1 : 0;
  const std::string bw_roof = absl::StrCat("the bandwidth ", bw, " GB/s (", limits.bandwidth_source, ")");
  const std::string fp32_roof =
      absl::StrCat("the measured FP32 FMA rate ", gpu.info.fp32_gflops, " GFLOP/s and ", bw_roof);
  (*ev.mutable_notes())["roofline"] =
      tc_peak > 0 ? absl::StrCat(std::string(DTypeName(tc_dtype)), " tensor-core peak ", tc_peak / 1e3,
                                 " TFLOP/s (datasheet, dense) and ", bw_roof)
      : tc_dtype != v1::DTYPE_UNSPECIFIED
          ? absl::StrCat("no tensor-core peak known for ", gpu.info.name, ": ", fp32_roof, " (reads high for ",
                         std::string(DTypeName(tc_dtype)), ")")
          : fp32_roof;
  const double achieved_gbs = sol->implied_gbs;
  counters["achieved_bandwidth_gbs"] = achieved_gbs;
  // Of the measured copy rate, as the benches have always shown it.
  if (copy_bw > 0) counters["bandwidth_fraction"] = achieved_gbs / copy_bw;
  counters["measured_bandwidth_gbs"] = copy_bw;
  counters["bandwidth_limit_gbs"] = bw;
  counters["achieved_gflops"] = sol->implied_gflops;
  counters["converged"] = profile->converged ? 1 : 0;
  counters["escaped_samples"] = static_cast<double>(profile->escaped_samples_candidate);
  counters["baseline_escaped_samples"] = static_cast<double>(profile->escaped_samples_baseline);
  counters["l2_flush_bytes"] = static_cast<double>(profile->l2_flush_bytes);
  counters["working_set_bytes"] = static_cast<double>(profile->working_set_bytes);
  counters["timed_checks"] = static_cast<double>(profile->timed_checks.size());
  counters["perturbed_inputs"] = static_cast<double>(profile->perturbed_inputs.size());
  const std::string escaped = counters["escaped_samples"] > 0
                                  ? absl::StrCat("; ", counters["escaped_samples"],
                                                 " samples finished after the default stream (timed to device sync)")
                                  : "";
  const std::string base_label = gpu_baseline ? baseline.label : "C++ reference on the CPU";
  (*ev.mutable_notes())["baseline"] =
      gpu_baseline ? absl::StrCat(baseline.description.empty() ? baseline.label : baseline.description, " on GPU ",
                                  gpu.info.index, " (", gpu.info.name, ")")
                   : absl::StrCat("the task's C++ reference (-O2) on this worker's CPU (", ev.fingerprint().cpu_model(),
                                  "): a CPU time, not a GPU one");
  run.Emit(v1::STAGE_PROFILE, /*ok=*/true,
           absl::StrCat(
               "GPU ", gpu.info.index, ": median ", profile->candidate.median_s * 1e6, " us (spread ",
               profile->candidate.spread * 100, "%), ", base_label, " ", base->median_s * 1e6, " us, speedup ",
               ev.speedup(), "x, ", absl::StrFormat("%.0f", achieved_gbs), " GB/s",
               copy_bw > 0 ? absl::StrFormat(" (%.0f%% of the measured copy rate)", 100 * achieved_gbs / copy_bw) : "",
               ", ", ev.timing().samples_s_size(), " samples",
               profile->converged ? "" : " (time cap reached before 1% spread)", escaped));
  if (options_.time_production) {
    options_.time_production(run, candidate_so, timed_inputs,
                             want_all.substr(want_offset, static_cast<size_t>(timed_output_bytes)), gpu.info.index);
  }
  return true;
}

}  // namespace kevo::worker
