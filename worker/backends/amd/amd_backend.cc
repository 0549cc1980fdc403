#include "worker/backends/amd/amd_backend.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/log.h"
#include "common/status.h"
#include "worker/backends/amd/hip_build.h"
#include "worker/backends/cpu/eval_pipeline.h"
#include "worker/backends/cpu/kernel_builder.h"

namespace kevo::worker {
namespace fs = std::filesystem;
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
std::string ResourceSummary(const std::vector<KernelResources>& kernels,
                            const std::vector<std::string>& targets) {
  const std::map<std::string, double> c = ResourceCounters(kernels);
  std::vector<std::string> parts;
  for (const std::string& t : targets) {
    auto v = [&](const char* what) {
      auto it = c.find(absl::StrCat(t, "_", what));
      return it == c.end() ? 0 : static_cast<int>(it->second);
    };
    parts.push_back(absl::StrFormat(
        "%s: %d kernel(s), %d VGPRs, %d AGPRs, %d SGPRs, %d B LDS, %d B scratch, %d spills, "
        "occupancy %d waves/SIMD",
        t, v("kernels"), v("vgprs"), v("agprs"), v("sgprs"), v("lds_bytes"), v("scratch_bytes"),
        v("vgpr_spills") + v("sgpr_spills"), v("occupancy_waves")));
  }
  return absl::StrJoin(parts, "; ");
}

class AmdBackend final : public Backend {
 public:
  AmdBackend(AmdBackendOptions options, std::unique_ptr<sandbox::Sandbox> sandbox,
             std::string hipcc_identity, RocmProbe probe)
      : options_(std::move(options)),
        sandbox_(std::move(sandbox)),
        hipcc_identity_(std::move(hipcc_identity)),
        probe_(std::move(probe)),
        builder_(sandbox_.get(), options_.hipcc,
                 absl::StrCat(hipcc_identity_, "\n", absl::StrJoin(options_.targets, ",")),
                 options_.work_dir + "/build", options_.compile_timeout,
                 options_.memory_limit_bytes, SandboxSystemPaths(), HipLayout()) {}

  absl::StatusOr<v1::Hello> Describe() override;
  v1::Evaluation Evaluate(const v1::Task& task, const v1::Candidate& candidate,
                          const EventSink& on_event) override;

 private:
  // Why this worker only compiles, for the Hello and every evaluation.
  std::string CompileOnlyReason() const {
    if (probe_.gpus > 0) {
      return absl::StrCat(probe_.description,
                          ", but this build has no HIP runner to run candidates on them");
    }
    return probe_.description;
  }
  v1::Fingerprint MakeFingerprint() const;

  const AmdBackendOptions options_;
  const std::unique_ptr<sandbox::Sandbox> sandbox_;
  const std::string hipcc_identity_;
  const RocmProbe probe_;
  const KernelBuilder builder_;
};

v1::Fingerprint AmdBackend::MakeFingerprint() const {
  v1::Fingerprint fp;
  fp.set_host(HostName());
  fp.set_cpu_model(ProcField("/proc/cpuinfo", "model name"));
  fp.set_compiler(hipcc_identity_);
  for (const std::string& f : HipCandidateFlags(options_.targets)) fp.add_flags(f);
  fp.set_os(OsDescription());
  fp.set_device(absl::StrCat("compile-only: ", absl::StrJoin(options_.targets, ", ")));
  fp.set_sandbox(sandbox_->UsesBwrap() ? "bwrap+rlimits" : "rlimits");
  return fp;
}

absl::StatusOr<v1::Hello> AmdBackend::Describe() {
  v1::Hello hello;
  hello.set_platform("amd");
  hello.set_device(absl::StrCat("no GPU (static analysis for ", absl::StrJoin(options_.targets, ", "), ")"));
  hello.add_toolchains(hipcc_identity_);
  hello.add_languages("hip");
  *hello.mutable_fingerprint() = MakeFingerprint();
  hello.set_compile_only(true);
  for (const std::string& t : options_.targets) hello.add_targets(t);
  auto& caps = *hello.mutable_capabilities();
  caps["compile_only_reason"] = CompileOnlyReason();
  caps["rocm_gpus"] = absl::StrCat(probe_.gpus);
  for (const std::string& t : options_.targets) {
    if (const AmdTarget* target = FindAmdTarget(t); target != nullptr) caps[t] = target->description;
  }
  return hello;
}

v1::Evaluation AmdBackend::Evaluate(const v1::Task& task, const v1::Candidate& candidate,
                                    const EventSink& on_event) {
  EvalRun run{task, candidate, on_event};
  v1::Evaluation& ev = run.ev;
  BeginEvaluation(task, candidate, "amd", MakeFingerprint(), &ev);
  ev.set_compile_only(true);
  run.stage_start = absl::Now();
  HipCompileResult built = CompileHipCandidate(builder_, task, candidate, options_.targets);
  auto& counters = *ev.mutable_profile();
  for (const auto& [k, v] : ResourceCounters(built.kernels)) counters[k] = v;
  if (built.status != v1::OK) {
    ev.mutable_diagnostics()->set_compiler_output(built.build.compiler_output);
    if (!built.forbidden.empty()) ev.mutable_diagnostics()->set_violation(absl::StrJoin(built.forbidden, ", "));
    run.Fail(v1::STAGE_COMPILE, built.status, built.message);
    ev.set_finished_unix_micros(UnixMicros());
    return std::move(ev);
  }
  run.Emit(v1::STAGE_COMPILE, /*ok=*/true,
           absl::StrCat("hipcc ", absl::StrJoin(options_.targets, ","),
                        built.build.cache_hit ? " (cached)" : "",
                        absl::StrFormat(" %.1fs; ", built.build.seconds),
                        ResourceSummary(built.kernels, options_.targets)));
  run.stage_start = absl::Now();
  const double score = StaticScore(built.kernels);
  ev.set_static_score(score);
  counters["static_score"] = score;
  run.Emit(v1::STAGE_PROFILE, /*ok=*/true,
           absl::StrFormat("static score %.3f (occupancy, spills and LDS from the compiler's "
                           "report; not a measurement): compile-only worker (%s), so the "
                           "candidate was neither validated nor timed",
                           score, CompileOnlyReason()));
  ev.set_status(v1::OK);
  ev.set_finished_unix_micros(UnixMicros());
  return std::move(ev);
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
  std::vector<std::string> candidates;
  if (!configured.empty()) {
    candidates.push_back(configured);
  } else {
    if (const char* env = std::getenv("HIPCC"); env != nullptr && *env) candidates.push_back(env);
    for (const char* dir : {"/usr/bin", "/usr/local/bin", "/opt/rocm/bin"}) {
      candidates.push_back(absl::StrCat(dir, "/hipcc"));
    }
  }
  for (const std::string& c : candidates) {
    if (access(c.c_str(), X_OK) == 0) return c;
  }
  return "";
}

absl::StatusOr<std::unique_ptr<Backend>> CreateAmdBackend(const AmdBackendOptions& options) {
  AmdBackendOptions opts = options;
  if (opts.work_dir.empty()) return absl::InvalidArgumentError("amd backend: work_dir is required");
  KEVO_ASSIGN_OR_RETURN(std::vector<std::string> targets,
                        ParseAmdTargets(absl::StrJoin(opts.targets, ",")));
  opts.targets = std::move(targets);
  KEVO_ASSIGN_OR_RETURN(opts.work_dir, PrepareWorkDir(opts.work_dir, "amd backend"));
  opts.hipcc = FindHipcc(opts.hipcc);
  if (opts.hipcc.empty()) {
    return absl::FailedPreconditionError(
        "amd backend: hipcc not found (install Debian's hipcc: scripts/install-deps.sh does)");
  }
  KEVO_ASSIGN_OR_RETURN(std::unique_ptr<sandbox::Sandbox> sb,
                        sandbox::Sandbox::Create({opts.use_bwrap, "/usr/bin/bwrap"}));
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
  LogInfo("amd: ", identity, "; targets ", absl::StrJoin(opts.targets, ","), "; ",
          probe.description, ": compile-only");
  return std::make_unique<AmdBackend>(opts, std::move(sb), identity, std::move(probe));
}

}  // namespace kevo::worker
