#include "worker/backends/cpu/cpu_backend.h"

#include <seccomp.h>
#include <signal.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "absl/strings/match.h"
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
#include "common/tensor.h"
#include "worker/backends/cpu/calibration.h"
#include "worker/backends/cpu/elf_symbols.h"
#include "worker/backends/cpu/kernel_builder.h"
#include "worker/backends/cpu/symbol_policy.h"
#include "worker/runner/protocol.h"

namespace kevo::worker {
namespace fs = std::filesystem;
namespace {

const std::vector<std::string>& CandidateFlags() {
  static const auto* flags =
      new std::vector<std::string>{"-O3", "-march=native", "-fopenmp", "-fPIC"};
  return *flags;
}
const std::vector<std::string>& ReferenceFlags() {
  static const auto* flags = new std::vector<std::string>{"-O2", "-fPIC"};
  return *flags;
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::ostringstream data;
  data << in.rdbuf();
  return data.str();
}

absl::Status WriteFile(const std::string& path, const std::string& data) {
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
  return absl::StrCat(pretty.empty() ? std::string(u.sysname) : pretty, " (", u.sysname, " ",
                      u.release, " ", u.machine, ")");
}

std::string HostName() {
  char buf[256] = {};
  gethostname(buf, sizeof(buf) - 1);
  return buf;
}

std::string DeterministicBytes(const google::protobuf::Message& m) {
  std::string out;
  {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    m.SerializeToCodedStream(&coded);
  }
  return out;
}

int64_t UnixMicros() { return absl::ToUnixMicros(absl::Now()); }

std::string SyscallName(int nr) {
  char* name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr);
  std::string out = name != nullptr ? name : "";
  free(name);
  return out;
}

std::string Tail(const std::string& s, size_t n) {
  return s.size() <= n ? s : "..." + s.substr(s.size() - n);
}

// How a runner process ended, as the evaluation sees it.
struct RunnerOutcome {
  v1::EvalStatus status = v1::OK;
  std::string message;
  std::string violation;
  int signal = 0;
};

RunnerOutcome ClassifyRunnerExit(const sandbox::Result& run, const runner::Report& report,
                                 absl::Duration timeout) {
  RunnerOutcome out;
  out.signal = run.term_signal;
  const std::string output = Tail(run.stderr_data + run.stdout_data, 1500);
  const std::string said = output.empty() ? "" : absl::StrCat("; output: ", output);
  if (run.timed_out || run.term_signal == SIGXCPU) {
    out.status = v1::RUN_TIMEOUT;
    out.message = run.timed_out
                      ? absl::StrCat("did not finish within ", absl::FormatDuration(timeout))
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
      out.message = absl::StrCat("alloc failed ", report.alloc_failures.front(),
                                 " bytes (memory limit)",
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
    case runner::kExitLoadFailed:
      out.status = v1::RUNTIME_ERROR;
      out.message = absl::StrCat("could not be loaded: ", report.load_error);
      return out;
    default:
      out.status = v1::INFRA_ERROR;
      out.message = absl::StrCat("runner failed (", run.Summary(), "): ",
                                 report.error.empty() ? output : report.error);
      return out;
  }
}

// Golden outputs of the reference: the raw outputs file and its layout.
struct Golden {
  std::string outputs;
};

// One evaluation on its way through the stages. A stage that ends the
// evaluation calls Fail(), which records the failed stage's event and the
// final status.
struct EvalRun {
  const v1::Task& task;
  const v1::Candidate& candidate;
  const EventSink& on_event;
  v1::Evaluation ev;
  absl::Time stage_start;
  std::string scratch;  // this evaluation's folder, removed at the end
  BuildResult cand;     // the candidate's .so, set by the compile stage
  BuildResult ref;      // the reference's (baseline) .so

  // Appends a stage event (seconds since stage_start) and passes it on.
  void Emit(v1::Stage stage, bool ok, const std::string& message);
  // Returns false, so a stage can `return run.Fail(...)`.
  bool Fail(v1::Stage stage, v1::EvalStatus status, const std::string& message);
};

class CpuBackend final : public Backend {
 public:
  CpuBackend(CpuBackendOptions options, std::unique_ptr<sandbox::Sandbox> sandbox,
             std::string compiler_version, std::string cpu_model, std::string runner_hash,
             std::vector<std::string> compiler_visible)
      : options_(std::move(options)),
        sandbox_(std::move(sandbox)),
        compiler_version_(std::move(compiler_version)),
        cpu_model_(std::move(cpu_model)),
        runner_hash_(std::move(runner_hash)),
        builder_(sandbox_.get(), options_.compiler,
                 absl::StrCat(compiler_version_, "\n", cpu_model_, "\n",
                              Sha256Hex(ProcField("/proc/cpuinfo", "flags"))),
                 options_.work_dir + "/build", options_.compile_timeout,
                 std::max<int64_t>(options_.memory_limit_bytes, int64_t{4} << 30),
                 std::move(compiler_visible)) {
    // What the runner may see inside bubblewrap: shared libraries, the
    // runner, the built kernels and the timed inputs; not the rest of the
    // host (a candidate's static constructor runs before the post-load
    // filter forbids openat).
    runner_visible_ = SystemPaths();
    runner_visible_.push_back("/sys/devices/system/cpu");
    runner_visible_.push_back(fs::path(options_.runner_path).parent_path().string());
    runner_visible_.push_back(options_.work_dir + "/build");
    runner_visible_.push_back(options_.work_dir + "/inputs");
  }

  // The read-only system folders every sandboxed command sees.
  static std::vector<std::string> SystemPaths() {
    return {"/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc/ld.so.cache",
            "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives"};
  }

  absl::Status Init();
  absl::StatusOr<v1::Hello> Describe() override;
  v1::Evaluation Evaluate(const v1::Task& task, const v1::Candidate& candidate,
                          const EventSink& on_event) override;

 private:
  struct RunnerRun {
    RunnerOutcome outcome;
    sandbox::Result result;
  };
  absl::StatusOr<RunnerRun> RunRunner(const std::vector<std::string>& args, const std::string& dir,
                                      absl::Duration timeout, int64_t output_bytes) const;
  absl::StatusOr<Golden> GetGolden(const v1::Task& task, const BuildResult& reference,
                                   const std::vector<uint64_t>& seeds, int64_t output_bytes) const;
  // Each returns true when the evaluation goes on to the next stage.
  bool CompileStage(EvalRun& run) const;
  bool ValidateStage(EvalRun& run) const;
  bool ProfileStage(EvalRun& run) const;
  absl::StatusOr<std::string> GetTimedInputs(const v1::Task& task) const;
  std::string NewScratchDir() const;
  v1::Fingerprint MakeFingerprint() const;

  const CpuBackendOptions options_;
  const std::unique_ptr<sandbox::Sandbox> sandbox_;
  const std::string compiler_version_;
  const std::string cpu_model_;
  const std::string runner_hash_;
  const KernelBuilder builder_;
  std::vector<std::string> runner_visible_;  // set by the constructor
  Ceilings ceilings_;  // written once by Init()
  mutable std::atomic<uint64_t> scratch_counter_{0};
  mutable absl::Mutex profile_mu_;  // serialises the profile stage across slots
};

absl::Status CpuBackend::Init() {
  if (!options_.calibrate) return absl::OkStatus();
  KEVO_ASSIGN_OR_RETURN(ceilings_, MeasureCeilings(builder_, *sandbox_, NewScratchDir(), SystemPaths()));
  LogInfo("cpu backend calibrated: bandwidth ", ceilings_.mem_bandwidth_gbs, " GB/s, fp32 peak ",
          ceilings_.fp32_peak_gflops, " GFLOP/s");
  return absl::OkStatus();
}

std::string CpuBackend::NewScratchDir() const {
  return absl::StrCat(options_.work_dir, "/evals/", getpid(), "-", scratch_counter_.fetch_add(1), "-",
                      absl::ToUnixMicros(absl::Now()) % 1000000);
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
  *hello.mutable_fingerprint() = MakeFingerprint();
  hello.set_mem_bandwidth_gbs(ceilings_.mem_bandwidth_gbs);
  hello.set_fp32_peak_gflops(ceilings_.fp32_peak_gflops);
  hello.set_compile_only(false);
  (*hello.mutable_capabilities())["cores"] = absl::StrCat(std::thread::hardware_concurrency());
  (*hello.mutable_capabilities())["sandbox"] = hello.fingerprint().sandbox();
  return hello;
}

absl::StatusOr<CpuBackend::RunnerRun> CpuBackend::RunRunner(const std::vector<std::string>& args,
                                                           const std::string& dir,
                                                           absl::Duration timeout,
                                                           int64_t output_bytes) const {
  sandbox::Command cmd;
  cmd.argv.push_back(options_.runner_path);
  cmd.argv.insert(cmd.argv.end(), args.begin(), args.end());
  // glibc's fatal messages (stack smashing, heap corruption) go to stderr
  // rather than /dev/tty, which the seccomp filter would not let it open.
  cmd.env = {"PATH=/usr/bin:/bin", "LC_ALL=C", "LIBC_FATAL_STDERR_=1"};
  cmd.cwd = dir;
  cmd.writable_dirs = {dir};
  cmd.visible_paths = runner_visible_;
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  cmd.limits.wall_timeout = timeout;
  cmd.limits.cpu_seconds = absl::ToDoubleSeconds(timeout) * cores + 1;
  cmd.limits.address_space_bytes = options_.memory_limit_bytes;
  cmd.limits.file_size_bytes = output_bytes + (int64_t{16} << 20);
  cmd.limits.open_files = 64;
  KEVO_ASSIGN_OR_RETURN(sandbox::Result result, sandbox_->Run(cmd));
  auto report_text = ReadFile(dir + "/report.txt");
  runner::Report report = runner::ParseReport(report_text.ok() ? *report_text : "");
  RunnerRun run;
  run.outcome = ClassifyRunnerExit(result, report, timeout);
  run.result = std::move(result);
  return run;
}

absl::StatusOr<Golden> CpuBackend::GetGolden(const v1::Task& task, const BuildResult& reference,
                                             const std::vector<uint64_t>& seeds,
                                             int64_t output_bytes) const {
  const std::string key = Sha256Hex(absl::StrCat("kevo-golden-v1\n", runner_hash_, "\n",
                                                 reference.library_path, "\n",
                                                 absl::StrJoin(seeds, ","), "\n",
                                                 DeterministicBytes(task)));
  const std::string dir = absl::StrCat(options_.work_dir, "/golden/", key);
  const std::string outputs_path = dir + "/outputs.bin";
  if (auto cached = ReadFile(outputs_path); cached.ok() && static_cast<int64_t>(cached->size()) == output_bytes) {
    return Golden{*std::move(cached)};
  }
  const std::string scratch = NewScratchDir();
  std::error_code ec;
  fs::create_directories(scratch, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", scratch, ": ", ec.message()));
  KEVO_RETURN_IF_ERROR(WriteFile(scratch + "/task.pb", task.SerializeAsString()));
  KEVO_ASSIGN_OR_RETURN(
      RunnerRun run,
      RunRunner({"run", "--task=" + scratch + "/task.pb", "--kernel=" + reference.library_path,
                 "--seeds=" + absl::StrJoin(seeds, ","), "--outputs=" + scratch + "/outputs.bin",
                 "--result=" + scratch + "/result.json", "--report=" + scratch + "/report.txt"},
                scratch, options_.run_timeout, output_bytes));
  auto cleanup = [&] { fs::remove_all(scratch, ec); };
  if (run.outcome.status != v1::OK) {
    cleanup();
    return absl::InternalError(absl::StrCat("the task's reference failed: ",
                                            v1::EvalStatus_Name(run.outcome.status), ": ",
                                            run.outcome.message));
  }
  auto outputs = ReadFile(scratch + "/outputs.bin");
  if (!outputs.ok() || static_cast<int64_t>(outputs->size()) != output_bytes) {
    cleanup();
    return absl::InternalError("the reference run wrote incomplete outputs");
  }
  if (auto result = ReadFile(scratch + "/result.json"); result.ok()) {
    auto cases = runner::CasesFromJson(*result);
    if (cases.ok()) {
      for (const auto& c : *cases) {
        if (!c.modified_input.empty() || !c.nondet_output.empty() || !c.overflowed.empty()) {
          LogWarning("task ", task.name(), ": its reference misbehaves at ", c.binding, "/seed ",
                     c.seed, " (modified input '", c.modified_input, "', nondeterministic '",
                     c.nondet_output, "', overflow '", c.overflowed, "')");
        }
      }
    }
  }
  // Publish for the next evaluation; losing a race to another slot is fine.
  fs::create_directories(dir + ".tmp-" + fs::path(scratch).filename().string(), ec);
  const std::string staged = dir + ".tmp-" + fs::path(scratch).filename().string();
  if (!ec && WriteFile(staged + "/outputs.bin", *outputs).ok()) {
    fs::rename(staged, dir, ec);
    if (ec) fs::remove_all(staged, ec);
  }
  cleanup();
  return Golden{*std::move(outputs)};
}

absl::StatusOr<std::string> CpuBackend::GetTimedInputs(const v1::Task& task) const {
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
  std::vector<std::thread> threads;
  for (size_t i = 0; i < specs.size(); ++i) {
    data[i].resize(static_cast<size_t>(sizes[i]));
    threads.emplace_back([&, i] { FillTensor(*specs[i], shapes[i], /*seed=*/1, data[i].data()); });
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

// Compares one case's outputs and fills `result`.
void JudgeCase(const v1::Task& task, const runner::CaseReport& report,
               const std::vector<runner::OutputSlot>& slots, const std::string& got,
               const std::string& want, v1::CaseResult& result) {
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
    CompareResult cmp = CompareTensors(slot.dtype, got.data() + slot.offset, want.data() + slot.offset,
                                       slot.count, tol);
    result.set_max_abs_err(std::max(result.max_abs_err(), cmp.max_abs_err));
    result.set_max_rel_err(std::max(result.max_rel_err(), cmp.max_rel_err));
    if (cmp.ok || result.status() != v1::OK) continue;
    result.set_status(cmp.nonfinite ? v1::NONFINITE : v1::WRONG_ANSWER);
    result.set_output(slot.output);
    result.set_first_bad_index(cmp.first_bad_index);
    result.set_detail(absl::StrCat(
        slot.output, "[", cmp.first_bad_index, "] = ",
        ElementAsDouble(slot.dtype, got.data() + slot.offset, cmp.first_bad_index), ", want ",
        ElementAsDouble(slot.dtype, want.data() + slot.offset, cmp.first_bad_index), "; ",
        cmp.bad_count, " of ", slot.count, " elements outside atol ", tol.atol, " + rtol ",
        tol.rtol, cmp.nonfinite ? " (NaN/Inf where the reference is finite)" : ""));
  }
  if (result.status() == v1::OK && !report.nondet_output.empty()) {
    result.set_status(v1::NONDETERMINISTIC);
    result.set_output(report.nondet_output);
    result.set_first_bad_index(report.nondet_index);
    result.set_detail(absl::StrCat(report.nondet_output, "[", report.nondet_index,
                                   "] differs between two calls on the same inputs"));
  }
}

v1::Timing ToTiming(const runner::TimingSeries& s) {
  v1::Timing t;
  for (double x : s.samples_s) t.add_samples_s(x);
  t.set_median_s(s.median_s);
  t.set_spread(s.spread);
  return t;
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

v1::Evaluation CpuBackend::Evaluate(const v1::Task& task, const v1::Candidate& candidate,
                                    const EventSink& on_event) {
  EvalRun run{task, candidate, on_event};
  v1::Evaluation& ev = run.ev;
  ev.set_task_name(task.name());
  ev.set_platform("cpu");
  ev.set_created_unix_micros(UnixMicros());
  ev.set_candidate_hash(Sha256Hex(absl::StrCat(candidate.source(), "\n",
                                               absl::StrJoin(candidate.extra_flags(), "\x1f"))));
  ev.set_binding_timed(task.time().name());
  *ev.mutable_fingerprint() = MakeFingerprint();
  if (CompileStage(run) && ValidateStage(run) && ProfileStage(run)) ev.set_status(v1::OK);
  ev.set_finished_unix_micros(UnixMicros());
  if (!options_.keep_eval_dirs && !run.scratch.empty()) {
    std::error_code ec;
    fs::remove_all(run.scratch, ec);
  }
  return std::move(ev);
}

bool CpuBackend::CompileStage(EvalRun& run) const {
  const v1::Task& task = run.task;
  const v1::Candidate& candidate = run.candidate;
  run.stage_start = absl::Now();
  auto fail = [&](v1::EvalStatus status, const std::string& message) {
    return run.Fail(v1::STAGE_COMPILE, status, message);
  };
  const std::string language = absl::AsciiStrToLower(candidate.language());
  if (!language.empty() && language != "c++" && language != "cpp" && language != "cxx") {
    return fail(v1::COMPILE_ERROR, absl::StrCat("language '", candidate.language(),
                                                "' is not supported on cpu (use c++)"));
  }
  std::vector<std::string> extra(candidate.extra_flags().begin(), candidate.extra_flags().end());
  if (absl::Status s = CheckExtraFlags(extra); !s.ok()) {
    return fail(v1::COMPILE_ERROR, std::string(s.message()));
  }
  if (task.validate_size() == 0 || task.outputs_size() == 0) {
    return fail(v1::INFRA_ERROR, "the task has no validate bindings or no outputs");
  }
  auto wrapper = runner::GenerateWrapperSource(task);
  if (!wrapper.ok()) {
    return fail(v1::INFRA_ERROR,
                absl::StrCat("the task's signature is malformed: ", wrapper.status().message()));
  }
  BuildSpec cand_spec{candidate.source(), CandidateFlags(), *wrapper};
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
    std::vector<std::string> forbidden = ForbiddenImports(UndefinedSymbolNames(*symbols));
    if (!forbidden.empty()) {
      run.ev.mutable_diagnostics()->set_violation(absl::StrJoin(forbidden, ", "));
      return fail(v1::SANDBOX_VIOLATION,
                  absl::StrCat("the candidate imports forbidden symbol(s): ",
                               absl::StrJoin(forbidden, ", "),
                               ". Kernels may use only math, memory (malloc/new, memcpy), OpenMP "
                               "and the C++ runtime"));
    }
  }
  auto ref = builder_.Build(BuildSpec{task.reference().source(), ReferenceFlags(), *wrapper});
  if (!ref.ok() || ref->status != v1::OK) {
    std::string why = ref.ok() ? absl::StrCat(ref->message, "\n", ref->compiler_output)
                               : std::string(ref.status().message());
    return fail(v1::INFRA_ERROR, absl::StrCat("the task's reference does not compile: ", why));
  }
  run.cand = *std::move(cand);
  run.ref = *std::move(ref);
  run.Emit(v1::STAGE_COMPILE, /*ok=*/true,
           absl::StrCat("compiled", run.cand.cache_hit ? " (cached)" : "", "; reference",
                        run.ref.cache_hit ? " (cached)" : ""));
  return true;
}

bool CpuBackend::ValidateStage(EvalRun& run) const {
  const v1::Task& task = run.task;
  v1::Evaluation& ev = run.ev;
  run.stage_start = absl::Now();
  auto fail = [&](v1::EvalStatus status, const std::string& message) {
    return run.Fail(v1::STAGE_VALIDATE, status, message);
  };
  const std::vector<uint64_t> seeds = runner::ValidationSeeds(task);
  auto layout = runner::OutputLayout(task, seeds);
  if (!layout.ok()) {
    return fail(v1::INFRA_ERROR,
                absl::StrCat("the task's shapes do not resolve: ", layout.status().message()));
  }
  int64_t output_bytes = 0;
  for (const auto& slot : *layout) output_bytes += slot.bytes;
  auto golden = GetGolden(task, run.ref, seeds, output_bytes);
  if (!golden.ok()) return fail(v1::INFRA_ERROR, std::string(golden.status().message()));

  run.scratch = NewScratchDir();
  const std::string& scratch = run.scratch;
  std::error_code ec;
  fs::create_directories(scratch, ec);
  if (ec) return fail(v1::INFRA_ERROR, absl::StrCat("cannot create ", scratch));
  if (absl::Status s = WriteFile(scratch + "/task.pb", task.SerializeAsString()); !s.ok()) {
    return fail(v1::INFRA_ERROR, std::string(s.message()));
  }
  auto result = RunRunner(
      {"run", "--task=" + scratch + "/task.pb", "--kernel=" + run.cand.library_path,
       "--seeds=" + absl::StrJoin(seeds, ","), "--outputs=" + scratch + "/outputs.bin",
       "--result=" + scratch + "/result.json", "--report=" + scratch + "/report.txt"},
      scratch, options_.run_timeout, output_bytes);
  if (!result.ok()) return fail(v1::INFRA_ERROR, std::string(result.status().message()));
  if (result->outcome.status != v1::OK) {
    ev.mutable_diagnostics()->set_signal(result->outcome.signal);
    ev.mutable_diagnostics()->set_violation(result->outcome.violation);
    return fail(result->outcome.status, absl::StrCat("candidate ", result->outcome.message));
  }
  auto result_json = ReadFile(scratch + "/result.json");
  auto outputs = ReadFile(scratch + "/outputs.bin");
  if (!result_json.ok() || !outputs.ok() || static_cast<int64_t>(outputs->size()) != output_bytes) {
    // The runner writes its results last; only code inside it can end it
    // early with a clean exit status.
    return fail(v1::RUNTIME_ERROR,
                "the runner ended without writing its results: the candidate ended the process "
                "(exit?) or wrote into the runner's files");
  }
  auto cases = runner::CasesFromJson(*result_json);
  if (!cases.ok()) return fail(v1::INFRA_ERROR, std::string(cases.status().message()));
  if (cases->size() != static_cast<size_t>(task.validate_size()) * seeds.size()) {
    return fail(v1::INFRA_ERROR, "the runner reported the wrong number of cases");
  }
  for (const runner::CaseReport& c : *cases) {
    JudgeCase(task, c, *layout, *outputs, golden->outputs, *ev.add_validation());
  }
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
    return fail(first_bad->status(),
                absl::StrCat(v1::EvalStatus_Name(first_bad->status()), " at binding '",
                             first_bad->binding(), "' seed ", first_bad->seed(), ": ",
                             first_bad->detail(), " (", passed, "/", ev.validation_size(),
                             " cases passed)"));
  }
  run.Emit(v1::STAGE_VALIDATE, /*ok=*/true,
           absl::StrCat(passed, "/", ev.validation_size(), " cases passed (", task.validate_size(),
                        " bindings x ", seeds.size(), " seeds)"));
  return true;
}

bool CpuBackend::ProfileStage(EvalRun& run) const {
  const v1::Task& task = run.task;
  v1::Evaluation& ev = run.ev;
  const std::string& scratch = run.scratch;
  run.stage_start = absl::Now();
  auto fail = [&](v1::EvalStatus status, const std::string& message) {
    return run.Fail(v1::STAGE_PROFILE, status, message);
  };
  std::error_code ec;
  fs::remove(scratch + "/report.txt", ec);
  auto timed_inputs = GetTimedInputs(task);
  if (!timed_inputs.ok()) {
    return fail(v1::INFRA_ERROR, absl::StrCat("cannot generate the timed inputs: ",
                                              timed_inputs.status().message()));
  }
  // The outputs of both kernels at the timed binding, checked after timing.
  std::vector<std::pair<const v1::TensorSpec*, int64_t>> timed_outputs;  // spec, elements
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
  // One profile at a time per worker: two slots timing at once on shared
  // cores and memory bandwidth would disturb each other's samples.
  absl::MutexLock profile_lock(&profile_mu_);
  auto prof_run = RunRunner(
      {"profile", "--task=" + scratch + "/task.pb", "--kernel=" + run.cand.library_path,
       "--baseline=" + run.ref.library_path, "--inputs=" + *timed_inputs,
       "--outputs=" + scratch + "/timed_outputs.bin", "--result=" + scratch + "/profile.json",
       "--report=" + scratch + "/report.txt",
       absl::StrCat("--time_cap_s=", options_.profile_time_cap_s),
       absl::StrCat("--mem_budget_bytes=", options_.memory_limit_bytes / 3)},
      // Sampling stops at the cap; the rest is loading and copying hundreds
      // of MiB of inputs, warm-up and the final check, which a busy host
      // slows down a lot. A candidate that hangs was already caught by
      // validation, so the margin is generous.
      scratch, 2 * options_.run_timeout + absl::Seconds(3 * options_.profile_time_cap_s + 30),
      2 * timed_output_bytes);
  if (!prof_run.ok()) return fail(v1::INFRA_ERROR, std::string(prof_run.status().message()));
  if (prof_run->outcome.status != v1::OK) {
    ev.mutable_diagnostics()->set_signal(prof_run->outcome.signal);
    ev.mutable_diagnostics()->set_violation(prof_run->outcome.violation);
    return fail(prof_run->outcome.status,
                absl::StrCat("candidate (at the timed binding '", task.time().name(), "') ",
                             prof_run->outcome.message));
  }
  auto prof_json = ReadFile(scratch + "/profile.json");
  auto timed_bytes = ReadFile(scratch + "/timed_outputs.bin");
  if (!prof_json.ok() || !timed_bytes.ok() ||
      static_cast<int64_t>(timed_bytes->size()) != 2 * timed_output_bytes) {
    return fail(v1::RUNTIME_ERROR,
                "the profiler ended without writing its results: the candidate ended the "
                "process (exit?) or wrote into the runner's files");
  }
  auto profile = runner::ProfileFromJson(*prof_json);
  if (!profile.ok()) return fail(v1::INFRA_ERROR, std::string(profile.status().message()));
  if (!profile->modified_input.empty()) {
    return fail(v1::INPUT_MODIFIED, absl::StrCat("input '", profile->modified_input,
                                                 "' changed while timing at binding '",
                                                 task.time().name(), "'"));
  }
  // Candidate vs baseline at the timed binding, same tolerances as validation.
  int64_t offset = 0;
  for (const auto& [spec, count] : timed_outputs) {
    const char* got = timed_bytes->data() + offset;
    const char* want = timed_bytes->data() + timed_output_bytes + offset;
    Tolerances tol = ToleranceFor(task, spec->dtype());
    CompareResult cmp = CompareTensors(spec->dtype(), got, want, count, tol);
    if (!cmp.ok) {
      return fail(cmp.nonfinite ? v1::NONFINITE : v1::WRONG_ANSWER,
                  absl::StrCat("at the timed binding '", task.time().name(), "': ", spec->name(),
                               "[", cmp.first_bad_index, "] = ",
                               ElementAsDouble(spec->dtype(), got, cmp.first_bad_index),
                               ", baseline ",
                               ElementAsDouble(spec->dtype(), want, cmp.first_bad_index), "; ",
                               cmp.bad_count, " of ", count, " elements outside atol ", tol.atol,
                               " + rtol ", tol.rtol, " (max abs err ", cmp.max_abs_err, ")"));
    }
    offset += count * static_cast<int64_t>(DTypeSize(spec->dtype()));
  }
  if (profile->candidate.median_s <= 0 || profile->baseline.median_s <= 0) {
    return fail(v1::INFRA_ERROR, "the profiler measured no time");
  }
  *ev.mutable_timing() = ToTiming(profile->candidate);
  *ev.mutable_baseline() = ToTiming(profile->baseline);
  ev.set_speedup(profile->baseline.median_s / profile->candidate.median_s);
  const SymbolValues timed = BindingValues(task.time());
  double bytes = 0, flops = 0;
  if (!task.bytes_moved().empty()) {
    if (auto v = EvalExpr(task.bytes_moved(), timed); v.ok()) bytes = static_cast<double>(*v);
  }
  if (!task.flops().empty()) {
    if (auto v = EvalExpr(task.flops(), timed); v.ok()) flops = static_cast<double>(*v);
  }
  double roofline_s = 0;
  if (ceilings_.mem_bandwidth_gbs > 0) {
    roofline_s = std::max(roofline_s, bytes / (ceilings_.mem_bandwidth_gbs * 1e9));
  }
  if (ceilings_.fp32_peak_gflops > 0) {
    roofline_s = std::max(roofline_s, flops / (ceilings_.fp32_peak_gflops * 1e9));
  }
  ev.set_roofline_fraction(roofline_s / profile->candidate.median_s);
  auto& counters = *ev.mutable_profile();
  counters["copies"] = static_cast<double>(profile->copies);
  counters["working_set_bytes"] = static_cast<double>(profile->working_set_bytes);
  counters["converged"] = profile->converged ? 1 : 0;
  counters["candidate_calls_per_sample"] = static_cast<double>(profile->candidate.calls_per_sample);
  counters["baseline_calls_per_sample"] = static_cast<double>(profile->baseline.calls_per_sample);
  counters["achieved_bandwidth_gbs"] = bytes / profile->candidate.median_s / 1e9;
  counters["achieved_gflops"] = flops / profile->candidate.median_s / 1e9;
  counters["peak_rss_bytes"] = static_cast<double>(prof_run->result.peak_rss_bytes);
  run.Emit(v1::STAGE_PROFILE, /*ok=*/true,
           absl::StrCat("median ", profile->candidate.median_s * 1e3, " ms (spread ",
                        profile->candidate.spread * 100, "%), baseline ",
                        profile->baseline.median_s * 1e3, " ms, speedup ", ev.speedup(), "x, ",
                        ev.timing().samples_s_size(), " samples",
                        profile->converged ? "" : " (time cap reached before 1% spread)"));
  return true;
}

std::string FirstLineOf(const std::string& s) { return s.substr(0, s.find('\n')); }

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

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> CreateCpuBackend(const CpuBackendOptions& options) {
  CpuBackendOptions opts = options;
  if (opts.work_dir.empty()) return absl::InvalidArgumentError("cpu backend: work_dir is required");
  if (opts.memory_limit_bytes < (int64_t{256} << 20)) {
    return absl::InvalidArgumentError("cpu backend: memory_limit_bytes must be at least 256 MiB");
  }
  if (opts.profile_time_cap_s <= 0) return absl::InvalidArgumentError("cpu backend: profile_time_cap_s must be > 0");
  std::error_code ec;
  fs::create_directories(opts.work_dir, ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat("cpu backend: cannot create ", opts.work_dir, ": ", ec.message()));
  opts.work_dir = fs::canonical(opts.work_dir, ec).string();
  for (const char* sub : {"build", "golden", "inputs", "evals"}) fs::create_directories(opts.work_dir + "/" + sub, ec);
  RemoveStaleScratch(opts.work_dir);
  if (opts.runner_path.empty()) {
    opts.runner_path = (fs::read_symlink("/proc/self/exe", ec).parent_path() / "kevo-runner-cpu").string();
  }
  opts.runner_path = fs::absolute(opts.runner_path, ec).lexically_normal().string();
  if (access(opts.runner_path.c_str(), X_OK) != 0) {
    return absl::FailedPreconditionError(absl::StrCat("cpu backend: runner ", opts.runner_path,
                                                      " is missing or not executable"));
  }
  KEVO_ASSIGN_OR_RETURN(std::unique_ptr<sandbox::Sandbox> sb,
                        sandbox::Sandbox::Create({opts.use_bwrap, "/usr/bin/bwrap"}));
  sandbox::Command version;
  version.argv = {opts.compiler, "--version"};
  version.env = {"PATH=/usr/local/bin:/usr/bin:/bin", "LC_ALL=C"};
  version.limits.wall_timeout = absl::Seconds(30);
  auto v = sb->Run(version);
  if (!v.ok() || !v->Succeeded()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cpu backend: compiler '", opts.compiler, "' does not run: ",
        v.ok() ? v->Summary() : std::string(v.status().message())));
  }
  std::string cpu_model = ProcField("/proc/cpuinfo", "model name");
  if (cpu_model.empty()) cpu_model = "unknown CPU";
  auto runner_bytes = ReadFile(opts.runner_path);
  if (!runner_bytes.ok()) return absl::FailedPreconditionError(std::string(runner_bytes.status().message()));
  // The compiler sees the system folders, plus its own installation when it
  // lives elsewhere (e.g. /opt/gcc-13/bin/g++ -> /opt/gcc-13).
  std::vector<std::string> compiler_visible = CpuBackend::SystemPaths();
  std::string compiler_path = opts.compiler;
  if (compiler_path.find('/') == std::string::npos) {
    for (absl::string_view dir : {"/usr/local/bin", "/usr/bin", "/bin"}) {
      std::string p = absl::StrCat(dir, "/", compiler_path);
      if (access(p.c_str(), X_OK) == 0) {
        compiler_path = p;
        break;
      }
    }
  }
  fs::path real = fs::weakly_canonical(compiler_path, ec);
  if (!ec && real.has_parent_path()) compiler_visible.push_back(real.parent_path().parent_path().string());
  auto backend = std::make_unique<CpuBackend>(opts, std::move(sb), FirstLineOf(v->stdout_data),
                                              cpu_model, Sha256Hex(*runner_bytes),
                                              std::move(compiler_visible));
  KEVO_RETURN_IF_ERROR(backend->Init());
  return backend;
}

}  // namespace kevo::worker
