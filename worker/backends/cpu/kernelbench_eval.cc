#include "worker/backends/cpu/kernelbench_eval.h"

#include <unistd.h>

#include <filesystem>
#include <map>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/hash.h"
#include "common/log.h"
#include "common/status.h"
#include "common/task/kernelbench.h"
#include "common/tensor.h"

namespace kevo::worker {
namespace fs = std::filesystem;
namespace {

// Extra wall time for starting Python and importing torch, which takes
// seconds on a busy host.
constexpr absl::Duration kStartupAllowance = absl::Seconds(60);
// Files the runner writes are limited to this size (RLIMIT_FSIZE): outputs
// of every seed, and load_inline's objects.
constexpr int64_t kMaxFileBytes = int64_t{4} << 30;

// One output of one case, as the runner lays it out in its outputs file.
struct OutputMeta {
  std::string name;
  v1::DType dtype = v1::DTYPE_UNSPECIFIED;
  std::vector<int64_t> shape;
  int64_t offset = 0;
  int64_t bytes = 0;
};

struct CaseMeta {
  uint64_t seed = 0;
  std::vector<OutputMeta> outputs;
  std::string modified_input;
  std::string nondet_output;
  int64_t nondet_index = -1;
};

absl::StatusOr<std::vector<CaseMeta>> CasesFromJson(const nlohmann::json& result) {
  std::vector<CaseMeta> cases;
  try {
    for (const auto& c : result.at("cases")) {
      CaseMeta m;
      m.seed = c.at("seed").get<uint64_t>();
      m.modified_input = c.value("modified_input", "");
      m.nondet_output = c.value("nondet_output", "");
      m.nondet_index = c.value("nondet_index", int64_t{-1});
      for (const auto& o : c.at("outputs")) {
        OutputMeta out;
        out.name = o.at("name").get<std::string>();
        if (!v1::DType_Parse(o.at("dtype").get<std::string>(), &out.dtype)) {
          return absl::InternalError(absl::StrCat("unknown dtype ", o.at("dtype").dump()));
        }
        out.shape = o.at("shape").get<std::vector<int64_t>>();
        out.offset = o.at("offset").get<int64_t>();
        out.bytes = o.at("bytes").get<int64_t>();
        m.outputs.push_back(std::move(out));
      }
      cases.push_back(std::move(m));
    }
  } catch (const nlohmann::json::exception& e) {
    return absl::InternalError(absl::StrCat("malformed runner result: ", e.what()));
  }
  return cases;
}

std::string ShapeString(const OutputMeta& o) {
  return absl::StrCat("[", absl::StrJoin(o.shape, ", "), "] ", std::string(DTypeName(o.dtype)));
}

// Why a candidate case's outputs cannot be compared element by element with
// the reference's, or "" when they can.
std::string LayoutMismatch(const CaseMeta& got, const CaseMeta& want) {
  if (got.outputs.size() != want.outputs.size()) {
    return absl::StrCat("returned ", got.outputs.size(), " tensor(s), the reference ",
                        want.outputs.size());
  }
  for (size_t i = 0; i < got.outputs.size(); ++i) {
    const OutputMeta& g = got.outputs[i];
    const OutputMeta& w = want.outputs[i];
    if (g.shape != w.shape || g.dtype != w.dtype) {
      return absl::StrCat(g.name, " is ", ShapeString(g), ", the reference's ", ShapeString(w));
    }
  }
  return "";
}

// The "File ..., line N in f" lines faulthandler printed when its watchdog
// ended the runner (most recent call first), minus the runner's own frames.
std::string HungAt(const std::string& stderr_text) {
  std::vector<std::string> where;
  for (absl::string_view line : absl::StrSplit(stderr_text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (!absl::StartsWith(line, "File ") || absl::StrContains(line, kKernelBenchRunnerName) ||
        absl::StrContains(line, "kernelbench_runner.py")) {
      continue;
    }
    where.emplace_back(line);
    if (where.size() == 3) break;
  }
  return where.empty() ? "" : absl::StrCat(" (stuck in ", absl::StrJoin(where, " <- "), ")");
}

bool IsCompilePhase(const std::string& phase) {
  return phase == "import" || phase == "build" || phase == "import_torch" || phase == "start";
}

}  // namespace

// What one runner process left behind.
struct KernelBenchEvaluator::Outcome {
  v1::EvalStatus status = v1::OK;
  std::string message;
  std::string traceback;
  std::string phase;
  nlohmann::json result;  // null when the runner wrote none
  sandbox::Result process;
  int signal = 0;
};

struct KernelBenchEvaluator::Golden {
  std::string outputs;
  std::vector<CaseMeta> cases;
};

KernelBenchEvaluator::KernelBenchEvaluator(const sandbox::Sandbox* sandbox, KernelBenchOptions options)
    : sandbox_(sandbox),
      options_(std::move(options)),
      harness_(sandbox, PythonRunnerOptions(options_.python, options_.runner_path, options_.work_dir,
                                            options_.extra_visible_paths, options_.run_timeout,
                                            options_.memory_limit_bytes, options_.open_files, options_.env)) {
  std::error_code ec;
  for (const char* sub : {"golden", "evals"}) fs::create_directories(options_.work_dir + "/" + sub, ec);
}

bool KernelBenchEvaluator::Available() const {
  return access(options_.python.c_str(), X_OK) == 0 && access(options_.runner_path.c_str(), R_OK) == 0;
}

KernelBenchEvaluator::Outcome KernelBenchEvaluator::RunRunner(const std::vector<std::string>& args,
                                                              const std::string& device,
                                                              const std::string& dir,
                                                              absl::Duration timeout) const {
  Outcome out;
  std::vector<std::string> argv = {options_.runner_path};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.push_back("--device=" + device);
  argv.push_back("--result=" + dir + "/result.json");
  argv.push_back("--phase=" + dir + "/phase");
  argv.push_back(absl::StrCat("--compile_timeout_s=", absl::ToDoubleSeconds(options_.compile_timeout)));
  argv.push_back(absl::StrCat("--run_timeout_s=", absl::ToDoubleSeconds(options_.run_timeout)));
  auto run = harness_.Run(argv, dir, timeout, kMaxFileBytes);
  if (!run.ok()) {
    out.status = v1::INFRA_ERROR;
    out.message = absl::StrCat("cannot start ", options_.python, ": ", run.status().message());
    return out;
  }
  out.process = run->result;
  out.signal = run->outcome.signal;
  if (auto phase = ReadFileBytes(dir + "/phase"); phase.ok()) {
    out.phase = std::string(absl::StripAsciiWhitespace(*phase));
  }
  if (auto text = ReadFileBytes(dir + "/result.json"); text.ok()) {
    out.result = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
    if (out.result.is_discarded()) out.result = nullptr;
  }
  const std::string stderr_text = out.process.stderr_data;
  const bool watchdog = !out.process.timed_out && out.process.term_signal == 0 &&
                        out.process.exit_code == 1 && absl::StrContains(stderr_text, "Timeout (");
  if ((out.process.timed_out || watchdog) && out.phase == "baseline") {
    out.status = v1::INFRA_ERROR;
    out.message = absl::StrCat("a baseline (torch.compile) did not build within ",
                               absl::FormatDuration(options_.torch_compile_timeout),
                               " and did not stop when asked");
    return out;
  }
  if (out.process.timed_out || watchdog) {
    const bool compiling = IsCompilePhase(out.phase);
    out.status = compiling ? v1::COMPILE_TIMEOUT : v1::RUN_TIMEOUT;
    out.message = absl::StrCat(
        compiling ? "did not import and build within " : "did not finish within ",
        absl::FormatDuration(compiling ? options_.compile_timeout : options_.run_timeout),
        watchdog ? HungAt(stderr_text) : "");
    return out;
  }
  if (out.result.is_object()) {
    const std::string status = out.result.value("status", "INFRA_ERROR");
    if (!v1::EvalStatus_Parse(status, &out.status)) out.status = v1::INFRA_ERROR;
    out.message = out.result.value("message", "");
    out.traceback = out.result.value("traceback", "");
    if (out.status == v1::OK && !out.process.Succeeded()) {
      out.status = v1::RUNTIME_ERROR;
      out.message = absl::StrCat("ended badly after writing its results: ", out.process.Summary());
    }
    return out;
  }
  if (run->outcome.status != v1::OK) {
    out.status = run->outcome.status;
    out.message = run->outcome.message;
    return out;
  }
  // Only code inside the runner can end it cleanly before it writes its
  // result: the candidate called os._exit().
  out.status = v1::RUNTIME_ERROR;
  out.message = absl::StrCat("ended the process (", out.process.Summary(),
                             ") without the runner writing its results: os._exit()?");
  return out;
}

absl::StatusOr<KernelBenchEvaluator::Golden> KernelBenchEvaluator::GoldenOutputs(
    const v1::Task& task, const std::vector<uint64_t>& seeds, const std::string& device) const {
  auto runner_text = ReadFileBytes(options_.runner_path);
  if (!runner_text.ok()) return runner_text.status();
  const std::string key = Sha256Hex(absl::StrCat(
      "kevo-kernelbench-golden-v1\n", Sha256Hex(*runner_text), "\n", options_.python, "\n",
      options_.device, "\n", absl::StrJoin(seeds, ","), "\n", task.reference().source()));
  const std::string dir = absl::StrCat(options_.work_dir, "/golden/kb-", key);
  auto load = [](const std::string& from) -> absl::StatusOr<Golden> {
    auto result_text = ReadFileBytes(from + "/result.json");
    auto outputs = ReadFileBytes(from + "/outputs.bin");
    if (!result_text.ok() || !outputs.ok()) return absl::NotFoundError("no cached golden outputs");
    nlohmann::json result = nlohmann::json::parse(*result_text, nullptr, false);
    if (!result.is_object()) return absl::InternalError("malformed golden result");
    auto cases = CasesFromJson(result);
    if (!cases.ok()) return cases.status();
    Golden g{*std::move(outputs), *std::move(cases)};
    int64_t total = 0;
    for (const CaseMeta& c : g.cases) {
      for (const OutputMeta& o : c.outputs) total += o.bytes;
    }
    if (total != static_cast<int64_t>(g.outputs.size())) {
      return absl::InternalError("golden outputs are incomplete");
    }
    return g;
  };
  if (auto cached = load(dir); cached.ok()) return cached;

  const std::string scratch = harness_.NewScratchDir();
  std::error_code ec;
  fs::create_directories(scratch, ec);
  KEVO_RETURN_IF_ERROR(WriteFileBytes(scratch + "/problem.py", task.reference().source()));
  Outcome run = RunRunner({"run", "--problem=" + scratch + "/problem.py",
                           "--seeds=" + absl::StrJoin(seeds, ","),
                           "--outputs=" + scratch + "/outputs.bin"},
                          device, scratch,
                          options_.compile_timeout + options_.run_timeout + kStartupAllowance);
  if (run.status != v1::OK) {
    fs::remove_all(scratch, ec);
    return absl::InternalError(absl::StrCat(
        "the KernelBench problem's Model failed (", v1::EvalStatus_Name(run.status), "): ",
        run.message, run.traceback.empty() ? "" : "\n", run.traceback));
  }
  auto golden = load(scratch);
  if (golden.ok()) {
    // Publish for the next evaluation; losing a race to another slot is fine.
    const std::string staged = dir + ".tmp-" + fs::path(scratch).filename().string();
    fs::create_directories(staged, ec);
    if (!ec && WriteFileBytes(staged + "/outputs.bin", golden->outputs).ok() &&
        WriteFileBytes(staged + "/result.json", run.result.dump()).ok()) {
      fs::rename(staged, dir, ec);
    }
    if (ec) fs::remove_all(staged, ec);
  }
  fs::remove_all(scratch, ec);
  return golden;
}

v1::Evaluation KernelBenchEvaluator::Evaluate(const v1::Task& task, const v1::Candidate& candidate,
                                              const EventSink& on_event, const std::string& platform,
                                              const v1::Fingerprint& fingerprint,
                                              const DeviceHold& hold) const {
  EvalRun run{task, candidate, on_event};
  v1::Evaluation& ev = run.ev;
  BeginEvaluation(task, candidate, platform, fingerprint, &ev);
  ev.mutable_fingerprint()->clear_flags();
  ev.mutable_fingerprint()->set_sandbox(sandbox_->UsesBwrap() ? "bwrap+rlimits" : "rlimits");
  run.stage_start = absl::Now();
  const std::string language = absl::AsciiStrToLower(candidate.language());
  bool ok = true;
  if (!language.empty() && language != task::kPythonLanguage && language != "py") {
    ok = run.Fail(v1::STAGE_COMPILE, v1::COMPILE_ERROR,
                  absl::StrCat("KernelBench task '", task.name(), "' takes Python candidates (a module "
                               "defining class ModelNew), not language '", candidate.language(), "'"));
  } else if (absl::Status s = task::ValidateKernelBenchTask(task); !s.ok()) {
    ok = run.Fail(v1::STAGE_COMPILE, v1::INFRA_ERROR, std::string(s.message()));
  } else if (!Available()) {
    ok = run.Fail(v1::STAGE_COMPILE, v1::INFRA_ERROR,
                  absl::StrCat("this worker cannot run KernelBench problems: ", options_.python,
                               " or the runner ", options_.runner_path, " is missing"));
  }
  if (ok) {
    run.scratch = harness_.NewScratchDir();
    std::error_code ec;
    fs::create_directories(run.scratch, ec);
    const std::string problem = run.scratch + "/problem.py";
    const std::string cand = run.scratch + "/candidate.py";
    absl::Status written = WriteFileBytes(problem, task.reference().source());
    if (written.ok()) written = WriteFileBytes(cand, candidate.source());
    if (!written.ok()) {
      run.Fail(v1::STAGE_COMPILE, v1::INFRA_ERROR, std::string(written.message()));
    } else if (options_.exclusive_device) {
      if (ImportAhead(run, problem, cand) &&
          hold(run, [&](const std::string& device) {
            return CompileAndValidate(run, problem, cand, device) && Profile(run, problem, cand, device);
          })) {
        ev.set_status(v1::OK);
      }
    } else if (CompileAndValidate(run, problem, cand, options_.device) &&
               hold(run, [&](const std::string& device) { return Profile(run, problem, cand, device); })) {
      ev.set_status(v1::OK);
    }
  }
  ev.set_finished_unix_micros(UnixMicros());
  if (!run.scratch.empty()) {
    std::error_code ec;
    fs::remove_all(run.scratch, ec);
  }
  LogInfo("kernelbench ", task.name(), " on ", options_.device, ": ", v1::EvalStatus_Name(ev.status()),
          ev.status() == v1::OK ? absl::StrCat(" speedup ", ev.speedup(), "x over PyTorch eager")
                                : absl::StrCat(": ", FirstLineOf(ev.diagnostics().message())));
  return std::move(ev);
}

bool KernelBenchEvaluator::ImportAhead(EvalRun& run, const std::string& problem,
                                       const std::string& candidate) const {
  const absl::Time start = absl::Now();
  Outcome out = RunRunner({"compile", "--problem=" + problem, "--candidate=" + candidate}, options_.device,
                          run.scratch, options_.compile_timeout + kStartupAllowance);
  (*run.ev.mutable_profile())["import_ahead_s"] = absl::ToDoubleSeconds(absl::Now() - start);
  if (out.status == v1::OK) return true;
  std::string message = out.message;
  if (!out.traceback.empty()) absl::StrAppend(&message, "\n", out.traceback);
  run.ev.mutable_diagnostics()->set_compiler_output(out.traceback);
  run.ev.mutable_diagnostics()->set_signal(out.signal);
  return run.Fail(v1::STAGE_COMPILE, out.status, absl::StrCat("candidate ", message));
}

bool KernelBenchEvaluator::CompileAndValidate(EvalRun& run, const std::string& problem,
                                              const std::string& candidate,
                                              const std::string& device) const {
  const v1::Task& task = run.task;
  v1::Evaluation& ev = run.ev;
  const std::vector<uint64_t> seeds = runner::ValidationSeeds(task);
  auto golden = GoldenOutputs(task, seeds, device);
  if (!golden.ok()) return run.Fail(v1::STAGE_COMPILE, v1::INFRA_ERROR, std::string(golden.status().message()));

  run.stage_start = absl::Now();
  Outcome out = RunRunner({"run", "--problem=" + problem, "--candidate=" + candidate,
                           "--seeds=" + absl::StrJoin(seeds, ","),
                           "--outputs=" + run.scratch + "/outputs.bin"},
                          device, run.scratch,
                          options_.compile_timeout + options_.run_timeout + kStartupAllowance);
  if (out.result.is_object()) {
    ev.mutable_fingerprint()->set_compiler(absl::StrCat("Python ", out.result.value("python", "?"),
                                                        ", torch ", out.result.value("torch", "?")));
  }
  const bool compiled = !IsCompilePhase(out.phase) || out.status == v1::OK;
  std::string message = out.message;
  if (!out.traceback.empty()) absl::StrAppend(&message, "\n", out.traceback);
  if (out.status == v1::COMPILE_ERROR || out.status == v1::COMPILE_TIMEOUT ||
      (!compiled && out.status != v1::OK)) {
    ev.mutable_diagnostics()->set_compiler_output(out.traceback);
    ev.mutable_diagnostics()->set_signal(out.signal);
    return run.Fail(v1::STAGE_COMPILE, out.status, absl::StrCat("candidate ", message));
  }
  run.Emit(v1::STAGE_COMPILE, /*ok=*/true,
           absl::StrCat("imported ModelNew (", ev.fingerprint().compiler(), ", ", device, ")"));
  run.stage_start = absl::Now();
  if (out.status != v1::OK) {
    ev.mutable_diagnostics()->set_signal(out.signal);
    return run.Fail(v1::STAGE_VALIDATE, out.status, absl::StrCat("candidate ", message));
  }
  auto cases = CasesFromJson(out.result);
  auto outputs = ReadFileBytes(run.scratch + "/outputs.bin");
  if (!cases.ok() || !outputs.ok()) {
    return run.Fail(v1::STAGE_VALIDATE, v1::RUNTIME_ERROR,
                    "the runner ended without its outputs: the candidate ended the process or "
                    "wrote into the runner's files");
  }
  if (cases->size() != golden->cases.size()) {
    return run.Fail(v1::STAGE_VALIDATE, v1::INFRA_ERROR, "the runner reported the wrong number of cases");
  }
  for (size_t i = 0; i < cases->size(); ++i) {
    const CaseMeta& got = (*cases)[i];
    const CaseMeta& want = golden->cases[i];
    v1::CaseResult& result = *ev.add_validation();
    runner::CaseReport report;
    report.binding = task::kKernelBenchBinding;
    report.seed = got.seed;
    report.modified_input = got.modified_input;
    report.nondet_output = got.nondet_output;
    report.nondet_index = got.nondet_index;
    const std::string mismatch = LayoutMismatch(got, want);
    if (!mismatch.empty() && got.modified_input.empty()) {
      result.set_binding(report.binding);
      result.set_seed(report.seed);
      result.set_status(v1::WRONG_ANSWER);
      result.set_first_bad_index(-1);
      result.set_detail(mismatch);
      continue;
    }
    // Both cases' outputs, with offsets relative to the case's first output.
    std::vector<runner::OutputSlot> slots;
    int64_t got_start = got.outputs.empty() ? 0 : got.outputs.front().offset;
    int64_t want_start = want.outputs.empty() ? 0 : want.outputs.front().offset;
    int64_t bytes = 0;
    for (const OutputMeta& o : want.outputs) {
      runner::OutputSlot slot;
      slot.binding = report.binding;
      slot.seed = report.seed;
      slot.output = o.name;
      slot.dtype = o.dtype;
      slot.count = o.bytes / static_cast<int64_t>(DTypeSize(o.dtype));
      slot.offset = o.offset - want_start;
      slot.bytes = o.bytes;
      bytes += o.bytes;
      slots.push_back(std::move(slot));
    }
    if (got_start + bytes > static_cast<int64_t>(outputs->size()) ||
        want_start + bytes > static_cast<int64_t>(golden->outputs.size())) {
      return run.Fail(v1::STAGE_VALIDATE, v1::RUNTIME_ERROR, "the runner's outputs file is truncated");
    }
    JudgeCase(task, report, slots, outputs->substr(got_start, bytes),
              golden->outputs.substr(want_start, bytes), result);
  }
  return ConcludeValidation(run, absl::StrCat(seeds.size(), " seeds of get_inputs()"));
}

bool KernelBenchEvaluator::Profile(EvalRun& run, const std::string& problem,
                                   const std::string& candidate, const std::string& device) const {
  v1::Evaluation& ev = run.ev;
  run.stage_start = absl::Now();
  const std::string problem_key = Sha256Hex(run.task.reference().source());
  std::string compile_note;  // why torch.compile is not timed, when known beforehand
  bool want_compile = false;
  for (const std::string& b : options_.baselines) want_compile |= b == "compile";
  if (want_compile) {
    absl::MutexLock l(&mu_);
    if (auto it = torch_compile_unavailable_.find(problem_key); it != torch_compile_unavailable_.end()) {
      compile_note = it->second;
    }
  }
  auto profile = [&](bool with_compile) {
    return RunRunner(
        {"profile", "--problem=" + problem, "--candidate=" + candidate,
         absl::StrCat("--time_cap_s=", options_.profile_time_cap_s),
         absl::StrCat("--torch_compile_timeout_s=", absl::ToDoubleSeconds(options_.torch_compile_timeout)),
         with_compile ? "--baselines=eager,compile" : "--baselines=eager"},
        device, run.scratch,
        // Warm-up: the candidate gets the compile timeout, torch.compile its
        // own (and a minute's grace); then sampling to the cap, then the
        // final checks.
        options_.compile_timeout + options_.torch_compile_timeout + absl::Seconds(60) +
            2 * options_.run_timeout + kStartupAllowance +
            absl::Seconds(3 * options_.profile_time_cap_s + 30));
  };
  Outcome out = profile(want_compile && compile_note.empty());
  if (out.status == v1::INFRA_ERROR && out.phase == "baseline" && want_compile && compile_note.empty()) {
    // torch.compile hung past its cap where the runner could not stop it:
    // time without it rather than fail the candidate.
    compile_note = absl::StrCat("torch.compile unavailable: ", out.message);
    LogWarning("kernelbench ", run.task.name(), ": ", compile_note, "; timing without it");
    out = profile(false);
  }
  if (out.status != v1::OK) {
    ev.mutable_diagnostics()->set_signal(out.signal);
    std::string message = out.message;
    if (!out.traceback.empty()) absl::StrAppend(&message, "\n", out.traceback);
    return run.Fail(v1::STAGE_PROFILE, out.status, absl::StrCat("candidate (while timing) ", message));
  }
  const nlohmann::json& r = out.result;
  if (const std::string modified = r.value("modified_input", ""); !modified.empty()) {
    return run.Fail(v1::STAGE_PROFILE, v1::INPUT_MODIFIED,
                    absl::StrCat("input '", modified, "' changed while timing"));
  }
  const nlohmann::json series = r.value("series", nlohmann::json::object());
  if (!series.contains("candidate") || !series.contains("eager")) {
    return run.Fail(v1::STAGE_PROFILE, v1::INFRA_ERROR, "the profiler measured no time");
  }
  runner::TimingSeries cand = SeriesFromJson(series["candidate"]);
  runner::TimingSeries eager = SeriesFromJson(series["eager"]);
  if (cand.median_s <= 0) {
    // No real call takes no time: the candidate stopped the runner's clock.
    return run.Fail(v1::STAGE_PROFILE, v1::RUNTIME_ERROR,
                    "candidate timed at 0 s: a call cannot take no time, so the candidate changed "
                    "the runner's clock (or its timing); its figure is not accepted");
  }
  if (eager.median_s <= 0) {
    return run.Fail(v1::STAGE_PROFILE, v1::INFRA_ERROR, "the profiler measured no time for PyTorch eager");
  }
  *ev.mutable_timing() = ToTiming(cand);
  *ev.mutable_baseline() = ToTiming(eager);
  ev.set_speedup(eager.median_s / cand.median_s);
  auto& counters = *ev.mutable_profile();
  counters["baseline_kind_pytorch_eager"] = 1;
  counters["candidate_calls_per_sample"] = static_cast<double>(cand.calls_per_sample);
  counters["baseline_calls_per_sample"] = static_cast<double>(eager.calls_per_sample);
  counters["copies"] = r.value("copies", 1.0);
  counters["working_set_bytes"] = r.value("working_set_bytes", 0.0);
  counters["converged"] = r.value("converged", false) ? 1 : 0;
  counters["peak_rss_bytes"] = static_cast<double>(out.process.peak_rss_bytes);
  if (r.contains("threads")) {
    counters["threads_candidate"] = r["threads"].value("candidate", 0.0);
    counters["threads_baseline"] = r["threads"].value("baseline", 0.0);
  }
  if (r.contains("escaped_samples")) {
    counters["escaped_samples"] = r["escaped_samples"].value("candidate", 0.0);
    counters["baseline_escaped_samples"] = r["escaped_samples"].value("eager", 0.0);
  }
  if (r.contains("l2_flush_bytes")) counters["l2_flush_bytes"] = r.value("l2_flush_bytes", 0.0);
  auto& notes = *ev.mutable_notes();
  const std::string torch = r.value("torch", "?");
  const std::string where = absl::StrCat(device, ", ", r.value("device_name", std::string("?")));
  notes["baseline"] = absl::StrCat("PyTorch eager: the problem's Model (torch ", torch, ", ", where, ")");
  std::string compile_line;
  if (series.contains("torch_compile")) {
    runner::TimingSeries compiled = SeriesFromJson(series["torch_compile"]);
    counters["torch_compile_median_s"] = compiled.median_s;
    counters["torch_compile_spread"] = compiled.spread;
    if (compiled.median_s > 0) counters["speedup_vs_torch_compile"] = compiled.median_s / cand.median_s;
    counters["torch_compile_warmup_s"] = r.value("torch_compile_warmup_s", 0.0);
    notes["baseline_torch_compile"] = absl::StrCat("torch.compile(Model), torch ", torch, ", ", where);
    compile_line = absl::StrCat(", torch.compile ", compiled.median_s * 1e3, " ms (candidate ",
                                counters["speedup_vs_torch_compile"], "x over it)");
  } else {
    if (compile_note.empty()) {
      const nlohmann::json n = r.value("notes", nlohmann::json::object());
      compile_note = n.value("torch_compile", std::string("torch.compile was not timed"));
    }
    notes["baseline_torch_compile"] = compile_note;
    compile_line = absl::StrCat("; ", compile_note);
  }
  if (want_compile && absl::StartsWith(compile_note, "torch.compile unavailable")) {
    absl::MutexLock l(&mu_);
    torch_compile_unavailable_[problem_key] = compile_note;
  }
  const double escaped = counters.contains("escaped_samples") ? counters["escaped_samples"] : 0;
  run.Emit(v1::STAGE_PROFILE, /*ok=*/true,
           absl::StrCat("median ", cand.median_s * 1e3, " ms (spread ", cand.spread * 100,
                        "%), PyTorch eager ", eager.median_s * 1e3, " ms, speedup ", ev.speedup(),
                        "x", compile_line, ", ", cand.samples_s.size(), " samples",
                        r.value("converged", false) ? "" : " (time cap reached before 1% spread)",
                        escaped > 0 ? absl::StrCat("; ", escaped, " samples finished after the "
                                                   "default stream (timed to device sync)")
                                    : ""));
  return true;
}

absl::StatusOr<KernelBenchProbe> ProbeKernelBench(const sandbox::Sandbox& sandbox, const std::string& python,
                                                  const std::string& runner_path, const std::string& device,
                                                  const std::string& scratch_dir,
                                                  std::vector<std::string> visible_paths,
                                                  const std::vector<std::string>& env) {
  auto unavailable = [&](const std::string& why) {
    return absl::FailedPreconditionError(absl::StrCat(python, ": ", why));
  };
  if (access(python.c_str(), X_OK) != 0) return unavailable("no such interpreter");
  if (access(runner_path.c_str(), R_OK) != 0) return unavailable(absl::StrCat("the runner ", runner_path, " is missing"));
  std::error_code ec;
  fs::create_directories(scratch_dir, ec);
  // The interpreter's own folders: a virtual environment's (bin/..) and the
  // installation it links to.
  for (const fs::path& p : {fs::path(python), fs::weakly_canonical(python, ec)}) {
    const fs::path prefix = p.parent_path().parent_path();
    if (!prefix.empty() && prefix != "/") visible_paths.push_back(prefix.string());
  }
  visible_paths.push_back(fs::path(runner_path).parent_path().string());
  sandbox::Command cmd;
  cmd.argv = {python, runner_path, "probe", "--device=" + device, "--result=" + scratch_dir + "/probe.json"};
  cmd.env = {"PATH=/usr/bin:/bin", "LC_ALL=C"};
  for (const std::string& e : env) {
    if (absl::StartsWith(e, "PATH=")) cmd.env.front() = e;
    else cmd.env.push_back(e);
  }
  cmd.cwd = scratch_dir;
  cmd.writable_dirs = {scratch_dir};
  cmd.visible_paths = visible_paths;
  cmd.limits.wall_timeout = absl::Seconds(120);
  cmd.limits.open_files = 1024;
  auto r = sandbox.Run(cmd);
  auto text = ReadFileBytes(scratch_dir + "/probe.json");
  fs::remove_all(scratch_dir, ec);
  if (!r.ok()) return unavailable(std::string(r.status().message()));
  nlohmann::json j = text.ok() ? nlohmann::json::parse(*text, nullptr, false) : nlohmann::json();
  if (!j.is_object()) {
    return unavailable(absl::StrCat("the probe wrote no result (", r->Summary(), ") ",
                                    FirstLineOf(r->stderr_data)));
  }
  if (j.value("status", "") != "OK") return unavailable(j.value("message", std::string("probe failed")));
  KernelBenchProbe p;
  p.python = python;
  p.python_version = j.value("python", "");
  p.torch = j.value("torch", "");
  p.torch_cuda = j.value("torch_cuda", "");
  p.triton = j.value("triton", "");
  p.torch_compile = j.value("torch_compile_available", false);
  p.devices = j.value("devices", std::vector<std::string>{});
  p.visible_paths = visible_paths;
  for (const std::string& dir : j.value("prefixes", std::vector<std::string>{})) {
    if (dir != "/") p.visible_paths.push_back(dir);
  }
  if (const std::string t = j.value("torch_dir", ""); !t.empty()) p.visible_paths.push_back(t);
  return p;
}

}  // namespace kevo::worker
