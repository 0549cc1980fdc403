#include "worker/pipeline/eval_pipeline.h"

#include <seccomp.h>
#include <signal.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <nlohmann/json.hpp>

#include "common/expr.h"
#include "common/hash.h"
#include "common/log.h"
#include "common/status.h"
#include "common/tensor.h"
#include "worker/pipeline/elf_symbols.h"

namespace kevo::worker {
namespace fs = std::filesystem;
namespace {

std::string SyscallName(int nr) {
  char* name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr);
  std::string out = name != nullptr ? name : "";
  free(name);
  return out;
}

std::string Tail(const std::string& s, size_t n) { return s.size() <= n ? s : "..." + s.substr(s.size() - n); }

}  // namespace

absl::StatusOr<std::string> ReadFileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::ostringstream data;
  data << in.rdbuf();
  return data.str();
}

absl::Status WriteFileBytes(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << data;
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

// The value after "key" and a colon on the first matching line of a
// /proc-style file.
std::string ProcField(const std::string& path, std::string_view key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) != 0) continue;
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    return std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
  }
  return "";
}

std::string OsDescription() {
  std::string pretty;
  std::ifstream in("/etc/os-release");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("PRETTY_NAME=", 0) == 0) {
      pretty = std::string(absl::StripSuffix(absl::StripPrefix(line.substr(12), "\""), "\""));
    }
  }
  utsname u{};
  uname(&u);
  return absl::StrCat(pretty.empty() ? std::string(u.sysname) : pretty, " (", u.sysname, " ", u.release, " ", u.machine,
                      ")");
}

std::string HostName() {
  char buf[256] = {};
  gethostname(buf, sizeof(buf) - 1);
  return buf;
}

int64_t UnixMicros() { return absl::ToUnixMicros(absl::Now()); }

void BeginEvaluation(const v1::Task& task, const v1::Candidate& candidate, const std::string& platform,
                     const v1::Fingerprint& fingerprint, v1::Evaluation* ev) {
  ev->set_task_name(task.name());
  ev->set_platform(platform);
  ev->set_created_unix_micros(UnixMicros());
  ev->set_candidate_hash(CandidateHash(candidate));
  ev->set_binding_timed(task.time().name());
  *ev->mutable_fingerprint() = fingerprint;
}

RunnerOutcome ClassifyRunnerExit(const sandbox::Result& run, const runner::Report& report, absl::Duration timeout) {
  RunnerOutcome out;
  out.signal = run.term_signal;
  const std::string output = Tail(run.stderr_data + run.stdout_data, 1500);
  const std::string said = output.empty() ? "" : absl::StrCat("; output: ", output);
  if (run.timed_out || run.term_signal == SIGXCPU) {
    out.status = v1::RUN_TIMEOUT;
    out.message = run.timed_out ? absl::StrCat("did not finish within ", absl::FormatDuration(timeout))
                                : "exceeded its CPU-time limit (SIGXCPU)";
    return out;
  }
  if (report.sigsys_nr.has_value() || run.term_signal == SIGSYS ||
      (run.term_signal == 0 && run.exit_code == runner::kExitSandboxViolation)) {
    out.status = v1::SANDBOX_VIOLATION;
    if (report.sigsys_nr.has_value()) {
      std::string name = SyscallName(*report.sigsys_nr);
      out.violation = name.empty() ? absl::StrCat("syscall ", *report.sigsys_nr) : name;
      out.message = absl::StrCat("system call ", name.empty() ? "?" : name, " (", *report.sigsys_nr,
                                 ") is not allowed in the sandbox");
    } else {
      out.violation = "unknown system call";
      out.message = "stopped by the seccomp filter (SIGSYS)";
    }
    return out;
  }
  const bool crashed = run.term_signal != 0 || run.exit_code != runner::kExitOk;
  if (run.term_signal == SIGXFSZ || (run.term_signal == 0 && run.exit_code == runner::kExitResourceExhausted) ||
      (crashed && !report.alloc_failures.empty())) {
    out.status = v1::RESOURCE_EXHAUSTED;
    if (run.term_signal == SIGXFSZ) {
      out.message = "wrote more than the file-size limit (SIGXFSZ)";
    } else if (!report.alloc_failures.empty()) {
      out.message = absl::StrCat("alloc failed ", report.alloc_failures.front(), " bytes (memory limit)",
                                 report.bad_alloc.empty() ? "" : "; std::bad_alloc escaped",
                                 run.term_signal ? absl::StrCat("; then ", run.Summary()) : "");
    } else {
      out.message = absl::StrCat("out of memory: ", report.bad_alloc);
    }
    return out;
  }
  if (run.term_signal == SIGKILL) {
    // Not our timeout and not RLIMIT_CPU's SIGXCPU: most likely the kernel's
    // OOM killer.
    out.status = v1::RESOURCE_EXHAUSTED;
    out.message = "killed by SIGKILL (out of memory?)";
    return out;
  }
  if (run.term_signal != 0) {
    out.status = v1::RUNTIME_ERROR;
    out.message = absl::StrCat("crashed: ", run.Summary(), said);
    return out;
  }
  switch (run.exit_code) {
    case runner::kExitOk:
      return out;
    case runner::kExitCandidateException:
      out.status = v1::RUNTIME_ERROR;
      out.message = absl::StrCat("threw an exception: ", report.exception);
      return out;
    case runner::kExitDeviceFault:
      out.status = v1::RUNTIME_ERROR;
      out.message = absl::StrCat("faulted on the GPU: ", report.device_error,
                                 " (the runner ended; the GPU is health-checked before more work)");
      return out;
    case runner::kExitUnfinishedWork:
      out.status = v1::UNFINISHED_ON_RETURN;
      out.message = absl::StrCat("returned before its work was done: ", report.unfinished);
      return out;
    case runner::kExitLoadFailed:
      out.status = v1::RUNTIME_ERROR;
      out.message = absl::StrCat("could not be loaded: ", report.load_error);
      return out;
    default:
      out.status = v1::INFRA_ERROR;
      out.message = absl::StrCat("runner failed (", run.Summary(), "): ", report.error.empty() ? output : report.error);
      return out;
  }
}

// Compares one case's outputs and fills `result`.
void JudgeCase(const v1::Task& task, const runner::CaseReport& report, const std::vector<runner::OutputSlot>& slots,
               const std::string& got, const std::string& want, v1::CaseResult& result) {
  result.set_binding(report.binding);
  result.set_seed(report.seed);
  result.set_first_bad_index(-1);
  result.set_status(v1::OK);
  if (!report.overflowed.empty()) {
    result.set_status(v1::RUNTIME_ERROR);
    result.set_output(report.overflowed);
    result.set_detail(absl::StrCat("wrote past the end of tensor '", report.overflowed, "'"));
    return;
  }
  if (!report.modified_input.empty()) {
    result.set_status(v1::INPUT_MODIFIED);
    result.set_output(report.modified_input);
    result.set_detail(absl::StrCat("input '", report.modified_input, "' changed during the call"));
    return;
  }
  for (const runner::OutputSlot& slot : slots) {
    if (slot.binding != report.binding || slot.seed != report.seed) continue;
    Tolerances tol = ToleranceFor(task, slot.dtype);
    CompareResult cmp =
        CompareTensors(slot.dtype, got.data() + slot.offset, want.data() + slot.offset, slot.count, tol);
    result.set_max_abs_err(std::max(result.max_abs_err(), cmp.max_abs_err));
    result.set_max_rel_err(std::max(result.max_rel_err(), cmp.max_rel_err));
    if (cmp.ok || result.status() != v1::OK) continue;
    result.set_status(cmp.nonfinite ? v1::NONFINITE : v1::WRONG_ANSWER);
    result.set_output(slot.output);
    result.set_first_bad_index(cmp.first_bad_index);
    result.set_detail(absl::StrCat(slot.output, "[", cmp.first_bad_index,
                                   "] = ", ElementAsDouble(slot.dtype, got.data() + slot.offset, cmp.first_bad_index),
                                   ", want ",
                                   ElementAsDouble(slot.dtype, want.data() + slot.offset, cmp.first_bad_index), "; ",
                                   cmp.bad_count, " of ", slot.count, " elements outside atol ", tol.atol, " + rtol ",
                                   tol.rtol, cmp.nonfinite ? " (NaN/Inf where the reference is finite)" : ""));
  }
  if (result.status() == v1::OK && !report.nondet_output.empty()) {
    result.set_status(v1::NONDETERMINISTIC);
    result.set_output(report.nondet_output);
    result.set_first_bad_index(report.nondet_index);
    result.set_detail(
        absl::StrCat(report.nondet_output, "[", report.nondet_index, "] differs between two calls on the same inputs"));
  }
}

runner::TimingSeries SeriesFromJson(const nlohmann::json& j) {
  runner::TimingSeries s;
  s.samples_s = j.value("samples_s", std::vector<double>{});
  s.median_s = j.value("median_s", 0.0);
  s.spread = j.value("spread", 0.0);
  s.calls_per_sample = j.value("calls_per_sample", int64_t{1});
  return s;
}

v1::Timing ToTiming(const runner::TimingSeries& s) {
  v1::Timing t;
  for (double x : s.samples_s) t.add_samples_s(x);
  t.set_median_s(s.median_s);
  t.set_spread(s.spread);
  return t;
}

absl::StatusOr<TimedOutputs> ResolveTimedOutputs(const v1::Task& task) {
  TimedOutputs out;
  KEVO_ASSIGN_OR_RETURN(std::vector<runner::Param> params, runner::ClassifyParams(task));
  for (const runner::Param& p : params) {
    if (p.kind != runner::ParamKind::kOutput) continue;
    KEVO_ASSIGN_OR_RETURN(std::vector<int64_t> shape, ResolveShape(*p.spec, BindingValues(task.time())));
    out.tensors.emplace_back(p.spec, NumElements(shape));
    out.bytes += NumElements(shape) * static_cast<int64_t>(DTypeSize(p.spec->dtype()));
  }
  return out;
}

TimedCheck CompareTimedOutputs(const v1::Task& task, const TimedOutputs& outputs, const std::string& both) {
  TimedCheck check;
  int64_t offset = 0;
  for (const auto& [spec, count] : outputs.tensors) {
    const char* got = both.data() + offset;
    const char* want = both.data() + outputs.bytes + offset;
    Tolerances tol = ToleranceFor(task, spec->dtype());
    CompareResult cmp = CompareTensors(spec->dtype(), got, want, count, tol);
    if (!cmp.ok) {
      check.status = cmp.nonfinite ? v1::NONFINITE : v1::WRONG_ANSWER;
      check.message = absl::StrCat(
          "at the timed binding '", task.time().name(), "': ", spec->name(), "[", cmp.first_bad_index,
          "] = ", ElementAsDouble(spec->dtype(), got, cmp.first_bad_index), ", baseline ",
          ElementAsDouble(spec->dtype(), want, cmp.first_bad_index), "; ", cmp.bad_count, " of ", count,
          " elements outside atol ", tol.atol, " + rtol ", tol.rtol, " (max abs err ", cmp.max_abs_err, ")");
      return check;
    }
    offset += count * static_cast<int64_t>(DTypeSize(spec->dtype()));
  }
  return check;
}

void EvalRun::Begin(v1::Stage stage) {
  stage_start = absl::Now();
  std::string name = v1::Stage_Name(stage);
  LogInfo(absl::AsciiStrToLower(absl::StripPrefix(name, "STAGE_")), " started");
}

void EvalRun::Emit(v1::Stage stage, bool ok, const std::string& message) {
  v1::StageEvent* e = ev.add_events();
  e->set_stage(stage);
  e->set_ok(ok);
  e->set_message(message);
  e->set_unix_micros(UnixMicros());
  e->set_seconds(absl::ToDoubleSeconds(absl::Now() - stage_start));
  if (on_event) on_event(*e);
}

bool EvalRun::Fail(v1::Stage stage, v1::EvalStatus status, const std::string& message) {
  Emit(stage, /*ok=*/false, message);
  ev.set_status(status);
  ev.mutable_diagnostics()->set_message(message);
  return false;
}

v1::Evaluation EvalRun::Finish(bool keep_scratch) {
  ev.set_finished_unix_micros(UnixMicros());
  if (!keep_scratch && !scratch.empty()) {
    std::error_code ec;
    fs::remove_all(scratch, ec);
  }
  return std::move(ev);
}

std::vector<std::string> SandboxSystemPaths() {
  return {"/usr",
          "/lib",
          "/lib64",
          "/lib32",
          "/bin",
          "/sbin",
          "/etc/ld.so.cache",
          "/etc/ld.so.conf",
          "/etc/ld.so.conf.d",
          "/etc/alternatives"};
}

RunnerHarnessOptions NativeRunnerOptions(const std::string& runner_path, const std::string& work_dir,
                                         absl::Duration run_timeout, int64_t memory_limit_bytes,
                                         const std::string& runner_hash) {
  RunnerHarnessOptions h;
  h.runner_path = runner_path;
  h.work_dir = work_dir;
  h.visible_paths = SandboxSystemPaths();
  h.visible_paths.push_back(fs::path(runner_path).parent_path().string());
  h.visible_paths.push_back(work_dir + "/build");
  h.visible_paths.push_back(work_dir + "/inputs");
  h.run_timeout = run_timeout;
  h.memory_limit_bytes = memory_limit_bytes;
  h.runner_hash = runner_hash;
  return h;
}

RunnerHarnessOptions PythonRunnerOptions(const std::string& python, const std::string& script,
                                         const std::string& work_dir, const std::vector<std::string>& extra_visible,
                                         absl::Duration run_timeout, int64_t memory_limit_bytes, int64_t open_files,
                                         const std::vector<std::string>& env) {
  RunnerHarnessOptions h;
  h.runner_path = python;
  h.work_dir = work_dir;
  h.visible_paths = SandboxSystemPaths();
  h.visible_paths.push_back("/sys/devices/system/cpu");
  h.visible_paths.push_back(fs::path(script).parent_path().string());
  h.visible_paths.insert(h.visible_paths.end(), extra_visible.begin(), extra_visible.end());
  h.run_timeout = run_timeout;
  h.memory_limit_bytes = memory_limit_bytes;
  h.open_files = open_files;
  h.env = env;
  return h;
}

std::string FirstLineOf(const std::string& s) { return s.substr(0, s.find('\n')); }

absl::StatusOr<std::string> PrepareWorkDir(const std::string& work_dir, std::string_view who) {
  std::error_code ec;
  fs::create_directories(work_dir, ec);
  if (ec) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(who), ": cannot create ", work_dir, ": ", ec.message()));
  }
  const std::string dir = fs::canonical(work_dir, ec).string();
  for (const char* sub : {"build", "golden", "inputs", "evals"}) fs::create_directories(dir + "/" + sub, ec);
  RemoveStaleScratch(dir);
  return dir;
}

bool CandidateBuild::Fail(v1::EvalStatus s, std::string m) {
  status = s;
  message = std::move(m);
  return false;
}

bool BuildCandidate(const KernelBuilder& builder, const v1::Task& task, const v1::Candidate& candidate,
                    const std::vector<std::string_view>& languages, std::string_view where,
                    std::vector<std::string> flags,
                    const std::function<absl::Status(const std::vector<std::string>&)>& check_extra_flags,
                    CandidateBuild& out) {
  const std::string language = absl::AsciiStrToLower(candidate.language());
  if (std::find(languages.begin(), languages.end(), language) == languages.end()) {
    return out.Fail(v1::COMPILE_ERROR,
                    absl::StrCat("language '", candidate.language(), "' is not supported on ", std::string(where)));
  }
  const std::vector<std::string> extra(candidate.extra_flags().begin(), candidate.extra_flags().end());
  if (absl::Status s = check_extra_flags(extra); !s.ok()) return out.Fail(v1::COMPILE_ERROR, std::string(s.message()));
  auto wrapper = runner::GenerateWrapperSource(task);
  if (!wrapper.ok()) {
    return out.Fail(v1::INFRA_ERROR, absl::StrCat("the task's signature is malformed: ", wrapper.status().message()));
  }
  flags.insert(flags.end(), extra.begin(), extra.end());
  auto build = builder.Build(BuildSpec{candidate.source(), std::move(flags), *wrapper});
  if (!build.ok()) return out.Fail(v1::INFRA_ERROR, std::string(build.status().message()));
  out.build = *std::move(build);
  out.status = out.build.status;
  out.message = out.build.message;
  return out.status == v1::OK;
}

bool CheckCandidateBuild(const v1::Task& task, const std::vector<std::string>& imports,
                         const DeviceImportPolicy* policy, CandidateBuild& out) {
  if (policy != nullptr) {
    ImportVerdict verdict = CheckDeviceImports(imports, *policy);
    out.forbidden = verdict.forbidden;
    if (!verdict.ok) return out.Fail(v1::SANDBOX_VIOLATION, verdict.message);
  }
  auto defines = DefinesGlobalSymbol(out.build.library_path, task.signature().function());
  if (!defines.ok()) return out.Fail(v1::INFRA_ERROR, std::string(defines.status().message()));
  if (!*defines) {
    return out.Fail(v1::COMPILE_ERROR,
                    absl::StrCat("the candidate does not define extern \"C\" ", task.signature().function(),
                                 "(...) (a C++ function without extern \"C\", a typo, or a "
                                 "__global__ kernel instead of the host function that launches it)"));
  }
  out.status = v1::OK;
  return true;
}

absl::StatusOr<std::string> TaskWrapperSource(const v1::Task& task) {
  if (task.validate_size() == 0 || task.outputs_size() == 0) {
    return absl::FailedPreconditionError("the task has no validate bindings or no outputs");
  }
  auto wrapper = runner::GenerateWrapperSource(task);
  if (!wrapper.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("the task's signature is malformed: ", wrapper.status().message()));
  }
  return wrapper;
}

const std::vector<std::string>& CppReferenceFlags() {
  static const auto* flags = new std::vector<std::string>{"-O2", "-fPIC"};
  return *flags;
}

absl::StatusOr<BuildResult> BuildTaskReference(const KernelBuilder& builder, const BuildSpec& spec,
                                               std::string_view what) {
  auto built = builder.Build(spec);
  if (built.ok() && built->status == v1::OK) return built;
  const std::string why =
      built.ok() ? absl::StrCat(built->message, "\n", built->compiler_output) : std::string(built.status().message());
  return absl::InternalError(absl::StrCat("the task's ", std::string(what), " does not compile: ", why));
}

absl::StatusOr<sandbox::Result> RunVersion(const sandbox::Sandbox& sandbox, const std::string& program) {
  sandbox::Command version;
  version.argv = {program, "--version"};
  version.env = {"PATH=/usr/local/bin:/usr/bin:/bin", "LC_ALL=C"};
  version.limits.wall_timeout = absl::Seconds(60);
  return sandbox.Run(version);
}

std::string RunnerPath(const std::string& configured, std::string_view name) {
  std::error_code ec;
  const std::string path = configured.empty()
                               ? (fs::read_symlink("/proc/self/exe", ec).parent_path() / std::string(name)).string()
                               : configured;
  return fs::absolute(path, ec).lexically_normal().string();
}

absl::StatusOr<std::string> RunnerHash(const std::string& path, std::string_view who) {
  if (access(path.c_str(), X_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(std::string(who), ": runner ", path, " is missing or not executable"));
  }
  auto bytes = ReadFileBytes(path);
  if (!bytes.ok()) return absl::FailedPreconditionError(std::string(bytes.status().message()));
  return Sha256Hex(*bytes);
}

std::string FindTool(const std::string& configured, const char* env_var, const std::vector<std::string>& defaults) {
  std::vector<std::string> candidates;
  if (!configured.empty()) {
    candidates.push_back(configured);
  } else {
    if (const char* env = std::getenv(env_var); env != nullptr && *env) candidates.push_back(env);
    candidates.insert(candidates.end(), defaults.begin(), defaults.end());
  }
  for (const std::string& c : candidates) {
    if (access(c.c_str(), X_OK) == 0) return c;
  }
  return "";
}

absl::StatusOr<HostCompiler> ProbeHostCompiler(const sandbox::Sandbox& sandbox, const std::string& compiler,
                                               std::string_view who) {
  auto v = RunVersion(sandbox, compiler);
  if (!v.ok() || !v->Succeeded()) {
    return absl::FailedPreconditionError(absl::StrCat(std::string(who), ": compiler '", compiler, "' does not run: ",
                                                      v.ok() ? v->Summary() : std::string(v.status().message())));
  }
  HostCompiler out;
  out.version = FirstLineOf(v->stdout_data);
  out.visible_paths = SandboxSystemPaths();
  std::string path = compiler;
  if (path.find('/') == std::string::npos) {
    for (absl::string_view dir : {"/usr/local/bin", "/usr/bin", "/bin"}) {
      std::string p = absl::StrCat(dir, "/", compiler);
      if (access(p.c_str(), X_OK) == 0) {
        path = p;
        break;
      }
    }
  }
  std::error_code ec;
  fs::path real = fs::weakly_canonical(path, ec);
  if (!ec && real.has_parent_path()) out.visible_paths.push_back(real.parent_path().parent_path().string());
  return out;
}

// Removes scratch left behind by workers that died mid-evaluation. Only
// entries older than an hour go: other processes may share the work folder.
void RemoveStaleScratch(const std::string& work_dir) {
  const auto cutoff = fs::file_time_type::clock::now() - std::chrono::hours(1);
  std::error_code ec;
  auto sweep = [&](const std::string& dir, std::string_view marker) {
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      const std::string name = entry.path().filename().string();
      if (name.find(marker) == std::string::npos) continue;
      std::error_code stat_ec;
      if (entry.last_write_time(stat_ec) < cutoff && !stat_ec) fs::remove_all(entry.path(), stat_ec);
    }
  };
  sweep(work_dir + "/evals", "");
  sweep(work_dir + "/build", "tmp-");
  sweep(work_dir + "/golden", ".tmp-");
  sweep(work_dir + "/inputs", ".tmp-");
}

std::string RunnerHarness::NewScratchDir() const {
  return absl::StrCat(options_.work_dir, "/evals/", getpid(), "-", scratch_counter_.fetch_add(1), "-",
                      absl::ToUnixMicros(absl::Now()) % 1000000);
}

absl::StatusOr<RunnerHarness::RunnerRun> RunnerHarness::Run(const std::vector<std::string>& args,
                                                            const std::string& dir, absl::Duration timeout,
                                                            int64_t output_bytes) const {
  sandbox::Command cmd;
  cmd.argv.push_back(options_.runner_path);
  cmd.argv.insert(cmd.argv.end(), args.begin(), args.end());
  cmd.argv.insert(cmd.argv.end(), options_.extra_args.begin(), options_.extra_args.end());
  // glibc's fatal messages (stack smashing, heap corruption) go to stderr
  // rather than /dev/tty, which the seccomp filter would not let it open.
  cmd.env = {"PATH=/usr/bin:/bin", "LC_ALL=C", "LIBC_FATAL_STDERR_=1"};
  for (const std::string& e : options_.env) {
    if (absl::StartsWith(e, "PATH="))
      cmd.env.front() = e;
    else
      cmd.env.push_back(e);
  }
  cmd.cwd = dir;
  cmd.writable_dirs = {dir};
  cmd.visible_paths = options_.visible_paths;
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  cmd.limits.wall_timeout = timeout;
  cmd.limits.cpu_seconds = absl::ToDoubleSeconds(timeout) * cores + 1;
  cmd.limits.address_space_bytes = options_.memory_limit_bytes;
  cmd.limits.file_size_bytes = output_bytes + (int64_t{16} << 20);
  cmd.limits.open_files = options_.open_files;
  KEVO_ASSIGN_OR_RETURN(sandbox::Result result, sandbox_->Run(cmd));
  auto report_text = ReadFileBytes(dir + "/report.txt");
  runner::Report report = runner::ParseReport(report_text.ok() ? *report_text : "");
  RunnerRun run;
  run.outcome = ClassifyRunnerExit(result, report, timeout);
  run.result = std::move(result);
  return run;
}

absl::StatusOr<std::string> RunnerHarness::GoldenOutputs(const v1::Task& task, const std::string& reference_so,
                                                         const std::vector<uint64_t>& seeds,
                                                         int64_t output_bytes) const {
  const std::string key = Sha256Hex(absl::StrCat("kevo-golden-v1\n", options_.runner_hash, "\n", reference_so, "\n",
                                                 absl::StrJoin(seeds, ","), "\n", DeterministicBytes(task)));
  const std::string dir = absl::StrCat(options_.work_dir, "/golden/", key);
  const std::string outputs_path = dir + "/outputs.bin";
  if (auto cached = ReadFileBytes(outputs_path); cached.ok() && static_cast<int64_t>(cached->size()) == output_bytes) {
    return *std::move(cached);
  }
  const std::string scratch = NewScratchDir();
  std::error_code ec;
  fs::create_directories(scratch, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", scratch, ": ", ec.message()));
  KEVO_RETURN_IF_ERROR(WriteFileBytes(scratch + "/task.pb", task.SerializeAsString()));
  KEVO_ASSIGN_OR_RETURN(RunnerRun run,
                        Run({"run", "--task=" + scratch + "/task.pb", "--kernel=" + reference_so,
                             "--seeds=" + absl::StrJoin(seeds, ","), "--outputs=" + scratch + "/outputs.bin",
                             "--result=" + scratch + "/result.json", "--report=" + scratch + "/report.txt"},
                            scratch, options_.run_timeout, output_bytes));
  auto cleanup = [&] { fs::remove_all(scratch, ec); };
  if (run.outcome.status != v1::OK) {
    cleanup();
    return absl::InternalError(absl::StrCat("the task's reference failed: ", v1::EvalStatus_Name(run.outcome.status),
                                            ": ", run.outcome.message));
  }
  auto outputs = ReadFileBytes(scratch + "/outputs.bin");
  if (!outputs.ok() || static_cast<int64_t>(outputs->size()) != output_bytes) {
    cleanup();
    return absl::InternalError("the reference run wrote incomplete outputs");
  }
  if (auto result = ReadFileBytes(scratch + "/result.json"); result.ok()) {
    auto cases = runner::CasesFromJson(*result);
    if (cases.ok()) {
      for (const auto& c : *cases) {
        if (!c.modified_input.empty() || !c.nondet_output.empty() || !c.overflowed.empty()) {
          LogWarning("task ", task.name(), ": its reference misbehaves at ", c.binding, "/seed ", c.seed,
                     " (modified input '", c.modified_input, "', nondeterministic '", c.nondet_output, "', overflow '",
                     c.overflowed, "')");
        }
      }
    }
  }
  // Publish for the next evaluation; losing a race to another slot is fine.
  fs::create_directories(dir + ".tmp-" + fs::path(scratch).filename().string(), ec);
  const std::string staged = dir + ".tmp-" + fs::path(scratch).filename().string();
  if (!ec && WriteFileBytes(staged + "/outputs.bin", *outputs).ok()) {
    fs::rename(staged, dir, ec);
    if (ec) fs::remove_all(staged, ec);
  }
  cleanup();
  return *std::move(outputs);
}

absl::StatusOr<std::string> RunnerHarness::TimedInputs(const v1::Task& task) const {
  KEVO_ASSIGN_OR_RETURN(std::vector<runner::Param> params, runner::ClassifyParams(task));
  std::string identity = "kevo-timed-inputs-v1\n" + DeterministicBytes(task.time());
  std::vector<const v1::TensorSpec*> specs;
  std::vector<std::vector<int64_t>> shapes;
  const SymbolValues symbols = BindingValues(task.time());
  for (const runner::Param& p : params) {
    if (p.kind != runner::ParamKind::kInput) continue;
    KEVO_ASSIGN_OR_RETURN(std::vector<int64_t> shape, ResolveShape(*p.spec, symbols));
    specs.push_back(p.spec);
    shapes.push_back(std::move(shape));
    identity += DeterministicBytes(*p.spec);
  }
  const std::string path = absl::StrCat(options_.work_dir, "/inputs/", Sha256Hex(identity), ".bin");
  int64_t total = 0;
  std::vector<int64_t> sizes;
  for (size_t i = 0; i < specs.size(); ++i) {
    sizes.push_back(NumElements(shapes[i]) * static_cast<int64_t>(DTypeSize(specs[i]->dtype())));
    total += sizes.back();
  }
  std::error_code ec;
  if (fs::exists(path, ec) && static_cast<int64_t>(fs::file_size(path, ec)) == total) return path;
  // One thread per tensor: the generator is serial and large tensors take
  // seconds.
  std::vector<std::string> data(specs.size());
  // A task whose timed binding the worker cannot hold must fail this
  // evaluation, not end the worker with an uncaught std::bad_alloc.
  for (size_t i = 0; i < specs.size(); ++i) {
    try {
      data[i].resize(static_cast<size_t>(sizes[i]));
    } catch (const std::exception& e) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "cannot hold input '", specs[i]->name(), "' at the timed binding '", task.time().name(),
          "': ", FormatBytes(sizes[i]), " (", sizes[i], " bytes; all inputs ", FormatBytes(total), "): ", e.what()));
    }
  }
  std::vector<std::thread> threads;
  for (size_t i = 0; i < specs.size(); ++i) {
    threads.emplace_back([&, i] { FillTensor(*specs[i], shapes[i], /*seed=*/1, data[i].data(), &symbols); });
  }
  for (auto& t : threads) t.join();
  fs::create_directories(options_.work_dir + "/inputs", ec);
  const std::string tmp = absl::StrCat(path, ".tmp-", getpid(), "-", scratch_counter_.fetch_add(1));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    for (const std::string& d : data) out.write(d.data(), static_cast<std::streamsize>(d.size()));
    out.close();
    if (!out) {
      fs::remove(tmp, ec);
      return absl::InternalError(absl::StrCat("cannot write ", tmp));
    }
  }
  fs::rename(tmp, path, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot publish ", path, ": ", ec.message()));
  return path;
}

absl::StatusOr<std::string> ReadFileRange(const std::string& path, int64_t offset, int64_t size) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::string data(static_cast<size_t>(size), '\0');
  in.seekg(offset);
  in.read(data.data(), size);
  if (in.gcount() != size) {
    return absl::DataLossError(absl::StrCat(path, " is shorter than ", offset + size, " bytes"));
  }
  return data;
}

TimedCheck CheckTimedCalls(const v1::Task& task, const TimedOutputs& outputs, const runner::ProfileReport& profile,
                           const std::string& outputs_path, int min_timed_checks, const std::string& mismatch_suffix) {
  if (static_cast<int>(profile.timed_checks.size()) < min_timed_checks) {
    return {v1::RUNTIME_ERROR,
            absl::StrCat("the profiler kept ", profile.timed_checks.size(), " timed calls for the check, not ",
                         min_timed_checks, ": something in its process (the candidate?) interfered")};
  }
  const int64_t pair_bytes = 2 * outputs.bytes;
  for (size_t i = 0; i < profile.timed_checks.size(); ++i) {
    auto pair = ReadFileRange(outputs_path, (1 + static_cast<int64_t>(i)) * pair_bytes, pair_bytes);
    if (!pair.ok()) return {v1::INFRA_ERROR, std::string(pair.status().message())};
    if (TimedCheck check = CompareTimedOutputs(task, outputs, *pair); check.status != v1::OK) {
      // WRONG_ANSWER even for NaN/Inf: a timed call that disagrees where
      // validation agreed skipped or faked its work (the poison it left may
      // be random bytes), whatever the bad element happens to hold.
      return {v1::WRONG_ANSWER,
              absl::StrCat("a timed call disagreed with the baseline on the same inputs (the last call of "
                           "timed sample ",
                           profile.timed_checks[i] + 1, " of ", profile.candidate.samples_s.size(), "), ",
                           check.message, mismatch_suffix)};
    }
  }
  return {};
}

std::optional<RunnerHarness::Profiled> RunnerHarness::Profile(EvalRun& run, const ProfileCall& call) const {
  const v1::Task& task = run.task;
  const std::string& scratch = run.scratch;
  run.Begin(v1::STAGE_PROFILE);
  auto fail = [&](v1::EvalStatus status, const std::string& message) {
    run.Fail(v1::STAGE_PROFILE, status, message);
    return std::nullopt;
  };
  std::error_code ec;
  fs::remove(scratch + "/report.txt", ec);
  auto timed_inputs = TimedInputs(task);
  if (!timed_inputs.ok()) {
    return fail(v1::INFRA_ERROR, absl::StrCat("cannot generate the timed inputs: ", timed_inputs.status().message()));
  }
  // The outputs of both kernels at the timed binding, checked after timing.
  auto timed_outputs = ResolveTimedOutputs(task);
  if (!timed_outputs.ok()) return fail(v1::INFRA_ERROR, std::string(timed_outputs.status().message()));
  std::vector<std::string> args = {"profile",
                                   "--task=" + scratch + "/task.pb",
                                   "--kernel=" + call.candidate_so,
                                   "--baseline=" + call.baseline_so,
                                   "--inputs=" + *timed_inputs,
                                   "--outputs=" + scratch + "/timed_outputs.bin",
                                   "--result=" + scratch + "/profile.json",
                                   "--report=" + scratch + "/report.txt"};
  args.insert(args.end(), call.extra_args.begin(), call.extra_args.end());
  // One output set of each kernel: the check after timing, then per kept
  // timed call (worker/runner/protocol.h).
  const int64_t pair_bytes = 2 * timed_outputs->bytes;
  absl::StatusOr<RunnerRun> prof_run =
      Run(args, scratch, call.timeout, runner::ProfileOutputsBytes(timed_outputs->bytes, runner::kTimedChecks));
  if (!prof_run.ok()) return fail(v1::INFRA_ERROR, std::string(prof_run.status().message()));
  if (prof_run->outcome.status != v1::OK) {
    run.ev.mutable_diagnostics()->set_signal(prof_run->outcome.signal);
    run.ev.mutable_diagnostics()->set_violation(prof_run->outcome.violation);
    return fail(prof_run->outcome.status, absl::StrCat(call.who, " (at the timed binding '", task.time().name(), "') ",
                                                       prof_run->outcome.message));
  }
  const std::string outputs_path = scratch + "/timed_outputs.bin";
  auto prof_json = ReadFileBytes(scratch + "/profile.json");
  const auto outputs_size = static_cast<int64_t>(fs::file_size(outputs_path, ec));
  const char* unwritten =
      "the profiler ended without writing its results: the candidate ended the "
      "process (exit?) or wrote into the runner's files";
  if (!prof_json.ok() || ec) return fail(v1::RUNTIME_ERROR, unwritten);
  // The runner writes its JSON last, in one write, from its own serializer:
  // an empty or unreadable one means code inside it (the candidate's) ended
  // it early or wrote into the file, not a fault of the worker.
  auto profile = runner::ProfileFromJson(*prof_json);
  if (!profile.ok()) return fail(v1::RUNTIME_ERROR, absl::StrCat(unwritten, " (", profile.status().message(), ")"));
  if (profile->timed_checks.size() > static_cast<size_t>(runner::kTimedChecks) ||
      outputs_size != runner::ProfileOutputsBytes(timed_outputs->bytes, std::ssize(profile->timed_checks))) {
    return fail(v1::RUNTIME_ERROR, unwritten);
  }
  if (!profile->modified_input.empty()) {
    return fail(v1::INPUT_MODIFIED, absl::StrCat("input '", profile->modified_input,
                                                 "' changed while timing at binding '", task.time().name(), "'"));
  }
  // Each kept timed call against the baseline on the same inputs, then both
  // kernels after timing; validation's tolerances.
  if (TimedCheck check =
          CheckTimedCalls(task, *timed_outputs, *profile, outputs_path, call.min_timed_checks, call.mismatch_suffix);
      check.status != v1::OK) {
    return fail(check.status, check.message);
  }
  auto both = ReadFileRange(outputs_path, 0, pair_bytes);
  if (!both.ok()) return fail(v1::INFRA_ERROR, std::string(both.status().message()));
  if (TimedCheck check = CompareTimedOutputs(task, *timed_outputs, *both); check.status != v1::OK) {
    return fail(check.status, check.message + call.mismatch_suffix);
  }
  return Profiled{*std::move(profile), prof_run->result.peak_rss_bytes, both->substr(timed_outputs->bytes)};
}

bool RunnerHarness::Validate(EvalRun& run, const std::string& candidate_so, const std::string& reference_so,
                             const RunnerHarness* golden_from) const {
  const v1::Task& task = run.task;
  v1::Evaluation& ev = run.ev;
  run.Begin(v1::STAGE_VALIDATE);
  auto fail = [&](v1::EvalStatus status, const std::string& message) {
    return run.Fail(v1::STAGE_VALIDATE, status, message);
  };
  const std::vector<uint64_t> seeds = runner::ValidationSeeds(task);
  auto layout = runner::OutputLayout(task, seeds);
  if (!layout.ok()) {
    return fail(v1::INFRA_ERROR, absl::StrCat("the task's shapes do not resolve: ", layout.status().message()));
  }
  int64_t output_bytes = 0;
  for (const auto& slot : *layout) output_bytes += slot.bytes;
  auto golden = (golden_from != nullptr ? golden_from : this)->GoldenOutputs(task, reference_so, seeds, output_bytes);
  if (!golden.ok()) return fail(v1::INFRA_ERROR, std::string(golden.status().message()));

  run.scratch = NewScratchDir();
  const std::string& scratch = run.scratch;
  std::error_code ec;
  fs::create_directories(scratch, ec);
  if (ec) return fail(v1::INFRA_ERROR, absl::StrCat("cannot create ", scratch));
  if (absl::Status s = WriteFileBytes(scratch + "/task.pb", task.SerializeAsString()); !s.ok()) {
    return fail(v1::INFRA_ERROR, std::string(s.message()));
  }
  auto result = Run({"run", "--task=" + scratch + "/task.pb", "--kernel=" + candidate_so,
                     "--seeds=" + absl::StrJoin(seeds, ","), "--outputs=" + scratch + "/outputs.bin",
                     "--result=" + scratch + "/result.json", "--report=" + scratch + "/report.txt"},
                    scratch, options_.run_timeout, output_bytes);
  if (!result.ok()) return fail(v1::INFRA_ERROR, std::string(result.status().message()));
  if (result->outcome.status != v1::OK) {
    ev.mutable_diagnostics()->set_signal(result->outcome.signal);
    ev.mutable_diagnostics()->set_violation(result->outcome.violation);
    return fail(result->outcome.status, absl::StrCat("candidate ", result->outcome.message));
  }
  auto result_json = ReadFileBytes(scratch + "/result.json");
  auto outputs = ReadFileBytes(scratch + "/outputs.bin");
  if (!result_json.ok() || !outputs.ok() || static_cast<int64_t>(outputs->size()) != output_bytes) {
    // The runner writes its results last; only code inside it can end it
    // early with a clean exit status.
    return fail(v1::RUNTIME_ERROR,
                "the runner ended without writing its results: the candidate ended the process "
                "(exit?) or wrote into the runner's files");
  }
  // As for the profile's JSON: only code inside the runner spoils it.
  auto cases = runner::CasesFromJson(*result_json);
  if (!cases.ok()) {
    return fail(v1::RUNTIME_ERROR,
                absl::StrCat("the runner's results are not its own: the candidate wrote into the runner's files (",
                             cases.status().message(), ")"));
  }
  if (cases->size() != static_cast<size_t>(task.validate_size()) * seeds.size()) {
    return fail(v1::INFRA_ERROR, "the runner reported the wrong number of cases");
  }
  for (const runner::CaseReport& c : *cases) {
    JudgeCase(task, c, *layout, *outputs, *golden, *ev.add_validation());
  }
  return ConcludeValidation(run, absl::StrCat(task.validate_size(), " bindings x ", seeds.size(), " seeds"));
}

std::string BuildRival(EvalRun& run, bool times_production,
                       const std::function<absl::StatusOr<BuildResult>(const v1::Candidate&)>& build) {
  if (run.rival == nullptr) return "";
  if (!times_production) {
    run.ev.set_rival_error("this worker times no production baselines (--production off, or no torch)");
    return "";
  }
  // Built and checked as a candidate is; it passed validation in its own
  // evaluation and is checked against the reference again where it is timed.
  absl::StatusOr<BuildResult> built = build(*run.rival);
  if (!built.ok()) {
    run.ev.set_rival_error(absl::StrCat("the rival did not build: ", built.status().message()));
    return "";
  }
  run.rival_so = built->library_path;
  return absl::StrCat("; rival", built->cache_hit ? " (cached)" : "");
}

bool ConcludeValidation(EvalRun& run, const std::string& cases_description) {
  const v1::Evaluation& ev = run.ev;
  int passed = 0;
  const v1::CaseResult* first_bad = nullptr;
  for (const v1::CaseResult& r : ev.validation()) {
    if (r.status() == v1::OK) {
      ++passed;
    } else if (first_bad == nullptr) {
      first_bad = &r;
    }
  }
  if (first_bad != nullptr) {
    return run.Fail(v1::STAGE_VALIDATE, first_bad->status(),
                    absl::StrCat(v1::EvalStatus_Name(first_bad->status()), " at binding '", first_bad->binding(),
                                 "' seed ", first_bad->seed(), ": ", first_bad->detail(), " (", passed, "/",
                                 ev.validation_size(), " cases passed)"));
  }
  run.Emit(v1::STAGE_VALIDATE, /*ok=*/true,
           absl::StrCat(passed, "/", ev.validation_size(), " cases passed (", cases_description, ")"));
  return true;
}

}  // namespace kevo::worker
