#include "worker/pipeline/kernelbench_eval.h"

#include <unistd.h>

#include <filesystem>
#include <map>
#include <random>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include <nlohmann/json.hpp>

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

// The tolerances the runner compares with, per dtype it can meet:
// "F32=atol,rtol;F16=...".
std::string ToleranceArg(const v1::Task& task) {
  std::vector<std::string> parts;
  for (v1::DType d : {v1::F32, v1::F64, v1::F16, v1::BF16, v1::I32, v1::I64, v1::U8, v1::I8}) {
    const Tolerances t = ToleranceFor(task, d);
    parts.push_back(absl::StrCat(v1::DType_Name(d), "=", t.atol, ",", t.rtol));
  }
  return absl::StrJoin(parts, ";");
}

// A random hex string the runner puts into its result: a result file without
// it was written by someone else (the candidate, before ending the runner).
std::string NewNonce() {
  std::random_device rd;
  return absl::StrCat(absl::Hex(rd(), absl::kZeroPad8), absl::Hex(rd(), absl::kZeroPad8),
                      absl::Hex(rd(), absl::kZeroPad8), absl::Hex(rd(), absl::kZeroPad8));
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

// A float the runner wrote as a number, or as "inf" / "nan" (JSON has
// neither); 0 when absent.
double NumberOrText(const nlohmann::json& obj, const char* key) {
  if (!obj.contains(key)) return 0;
  const nlohmann::json& v = obj.at(key);
  if (v.is_number()) return v.get<double>();
  if (v.is_string()) {
    double d = 0;
    if (absl::SimpleAtod(v.get<std::string>(), &d)) return d;
  }
  return 0;
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

KernelBenchEvaluator::KernelBenchEvaluator(const sandbox::Sandbox* sandbox, KernelBenchOptions options)
    : sandbox_(sandbox),
      options_(std::move(options)),
      harness_(sandbox, PythonRunnerOptions(options_.python, options_.runner_path, options_.work_dir,
                                            options_.extra_visible_paths, options_.run_timeout,
                                            options_.memory_limit_bytes, options_.open_files, options_.env)) {
  std::error_code ec;
  fs::create_directories(options_.work_dir + "/evals", ec);
}

bool KernelBenchEvaluator::Available() const {
  return access(options_.python.c_str(), X_OK) == 0 && access(options_.runner_path.c_str(), R_OK) == 0;
}

KernelBenchEvaluator::Outcome KernelBenchEvaluator::RunRunner(const std::vector<std::string>& args,
                                                              const std::string& device, const std::string& dir,
                                                              absl::Duration timeout) const {
  Outcome out;
  std::vector<std::string> argv = {options_.runner_path};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.push_back("--device=" + device);
  argv.push_back("--result=" + dir + "/result.json");
  argv.push_back("--phase=" + dir + "/phase");
  argv.push_back(absl::StrCat("--compile_timeout_s=", absl::ToDoubleSeconds(options_.compile_timeout)));
  argv.push_back(absl::StrCat("--run_timeout_s=", absl::ToDoubleSeconds(options_.run_timeout)));
  // evaluate: the judge's result must carry the nonce it read (and removed)
  // before it started the candidate's process.
  const bool judged = !args.empty() && args.front() == "evaluate";
  const std::string nonce = judged ? NewNonce() : "";
  if (judged) {
    if (absl::Status s = WriteFileBytes(dir + "/nonce", nonce); !s.ok()) {
      out.status = v1::INFRA_ERROR;
      out.message = std::string(s.message());
      return out;
    }
    argv.push_back("--nonce_file=" + dir + "/nonce");
  }
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
    if (judged && out.result.is_object() && out.result.value("nonce", "") != nonce) {
      LogWarning("kernelbench: a result file without the judge's nonce in ", dir, ": forged by the candidate");
      out.result = nullptr;
    }
  }
  const std::string stderr_text = out.process.stderr_data;
  const bool watchdog = !out.process.timed_out && out.process.term_signal == 0 && out.process.exit_code == 1 &&
                        absl::StrContains(stderr_text, "Timeout (");
  if ((out.process.timed_out || watchdog) && out.phase == "baseline") {
    out.status = v1::INFRA_ERROR;
    out.message = absl::StrCat("a baseline (torch.compile) did not build within ",
                               absl::FormatDuration(options_.torch_compile_timeout), " and did not stop when asked");
    return out;
  }
  if (out.process.timed_out || watchdog) {
    const bool compiling = IsCompilePhase(out.phase);
    out.status = compiling ? v1::COMPILE_TIMEOUT : v1::RUN_TIMEOUT;
    out.message = absl::StrCat(compiling ? "did not import and build within " : "did not finish within ",
                               absl::FormatDuration(compiling ? options_.compile_timeout : options_.run_timeout),
                               watchdog ? HungAt(stderr_text) : "");
    return out;
  }
  if (out.result.is_object()) {
    const std::string status = out.result.value("status", "INFRA_ERROR");
    if (!v1::EvalStatus_Parse(status, &out.status)) out.status = v1::INFRA_ERROR;
    out.message = out.result.value("message", "");
    out.traceback = out.result.value("traceback", "");
    if (out.status == v1::RUN_TIMEOUT || out.status == v1::COMPILE_TIMEOUT) {
      absl::StrAppend(&out.message, HungAt(stderr_text));  // the candidate's stacks, printed on its way out
    }
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

v1::Evaluation KernelBenchEvaluator::Evaluate(const v1::Task& task, const v1::Candidate& candidate,
                                              const EventSink& on_event, const std::string& platform,
                                              const v1::Fingerprint& fingerprint, const DeviceHold& hold) const {
  EvalRun run{task, candidate, on_event};
  v1::Evaluation& ev = run.ev;
  BeginEvaluation(task, candidate, platform, fingerprint, &ev);
  ev.mutable_fingerprint()->clear_flags();
  ev.mutable_fingerprint()->set_sandbox(sandbox_->UsesBwrap() ? "bwrap+rlimits" : "rlimits");
  run.Begin(v1::STAGE_COMPILE);
  const std::string language = absl::AsciiStrToLower(candidate.language());
  bool ok = true;
  if (!language.empty() && language != task::kPythonLanguage && language != "py") {
    ok = run.Fail(v1::STAGE_COMPILE, v1::COMPILE_ERROR,
                  absl::StrCat("KernelBench task '", task.name(),
                               "' takes Python candidates (a module "
                               "defining class ModelNew), not language '",
                               candidate.language(), "'"));
  } else if (absl::Status s = task::ValidateKernelBenchTask(task); !s.ok()) {
    ok = run.Fail(v1::STAGE_COMPILE, v1::INFRA_ERROR, std::string(s.message()));
  } else if (!Available()) {
    ok = run.Fail(v1::STAGE_COMPILE, v1::INFRA_ERROR,
                  absl::StrCat("this worker cannot run KernelBench problems: ", options_.python, " or the runner ",
                               options_.runner_path, " is missing"));
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
    } else {
      Capture(run);
      if (ImportAhead(run, problem, cand) &&
          hold(run, [&](const std::string& device) { return Judge(run, problem, cand, device); })) {
        // The import (where a module-level load_inline builds, into the
        // scratch folder's extension cache) leaves the device to others; the
        // judge then holds it for validation and timing.
        ev.set_status(v1::OK);
      }
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

namespace {

// The runner's capture (kernelbench_runner.py, capture_mode) as a proto.
v1::ModelGraph GraphFromJson(const nlohmann::json& graph) {
  v1::ModelGraph out;
  if (!graph.is_object()) {
    out.set_error("the runner wrote no graph");
    return out;
  }
  out.set_error(graph.value("error", ""));
  out.set_torch(graph.value("torch", ""));
  std::string at;
  try {
    for (const nlohmann::json& n : graph.value("nodes", nlohmann::json::array())) {
      at = n.dump().substr(0, 300);
      v1::GraphNode* node = out.add_nodes();
      node->set_name(n.at("name").get<std::string>());
      node->set_op(n.at("op").get<std::string>());
      node->set_target(n.value("target", ""));
      for (const nlohmann::json& i : n.value("inputs", nlohmann::json::array())) node->add_inputs(i.get<std::string>());
      const nlohmann::json attrs = n.value("attrs", nlohmann::json::object());  // items() must not outlive it
      for (const auto& [k, v] : attrs.items()) {
        (*node->mutable_attrs())[k] = v.get<std::string>();
      }
      for (const nlohmann::json& d : n.value("shape", nlohmann::json::array())) node->add_shape(d.get<int64_t>());
      v1::DType dtype = v1::DTYPE_UNSPECIFIED;
      if (v1::DType_Parse(n.value("dtype", ""), &dtype)) node->set_dtype(dtype);
      node->set_contiguous(n.value("contiguous", false));
    }
  } catch (const nlohmann::json::exception& e) {
    out.clear_nodes();
    out.set_error(absl::StrCat("malformed graph from the runner: ", e.what(), " at ", at));
  }
  return out;
}

}  // namespace

void KernelBenchEvaluator::Capture(EvalRun& run) const {
  const std::string key = Sha256Hex(run.task.reference().source());
  {
    absl::MutexLock lock(&mu_);
    if (!captured_.insert(key).second) return;
  }
  const absl::Time start = absl::Now();
  const std::string dir = run.scratch + "/capture";
  std::error_code ec;
  fs::create_directories(dir, ec);
  // The sandbox shows the runner its own folder only: the problem goes there.
  absl::Status copied = WriteFileBytes(dir + "/problem.py", run.task.reference().source());
  Outcome out;
  if (copied.ok()) {
    out = RunRunner({"capture", "--problem=" + dir + "/problem.py"}, "cpu", dir,
                    options_.compile_timeout + kStartupAllowance);
  } else {
    out.status = v1::INFRA_ERROR;
    out.message = std::string(copied.message());
  }
  (*run.ev.mutable_profile())["capture_s"] = absl::ToDoubleSeconds(absl::Now() - start);
  v1::ModelGraph graph;
  if (out.status == v1::OK) {
    graph = GraphFromJson(out.result.value("graph", nlohmann::json()));
  } else {
    graph.set_error(absl::StrCat("the capture failed: ", out.message));
  }
  LogInfo("kernelbench ", run.task.name(), ": captured ", graph.nodes_size(), " graph nodes",
          graph.error().empty() ? "" : absl::StrCat(" (", graph.error(), ")"));
  *run.ev.mutable_model_graph() = std::move(graph);
}

bool KernelBenchEvaluator::ImportAhead(EvalRun& run, const std::string& problem, const std::string& candidate) const {
  const absl::Time start = absl::Now();
  Outcome out = RunRunner({"compile", "--problem=" + problem, "--candidate=" + candidate}, options_.device, run.scratch,
                          options_.compile_timeout + kStartupAllowance);
  (*run.ev.mutable_profile())["import_ahead_s"] = absl::ToDoubleSeconds(absl::Now() - start);
  if (out.status == v1::OK) return true;
  std::string message = out.message;
  if (!out.traceback.empty()) absl::StrAppend(&message, "\n", out.traceback);
  run.ev.mutable_diagnostics()->set_compiler_output(out.traceback);
  run.ev.mutable_diagnostics()->set_signal(out.signal);
  return run.Fail(v1::STAGE_COMPILE, out.status, absl::StrCat("candidate ", message));
}

bool KernelBenchEvaluator::Judge(EvalRun& run, const std::string& problem, const std::string& candidate,
                                 const std::string& device) const {
  const v1::Task& task = run.task;
  v1::Evaluation& ev = run.ev;
  const std::vector<uint64_t> seeds = runner::ValidationSeeds(task);
  const std::string problem_key = Sha256Hex(task.reference().source());
  std::string compile_note;  // why torch.compile is not timed, when known beforehand
  bool want_compile = false;
  for (const std::string& b : options_.baselines) want_compile |= b == "compile";
  if (want_compile) {
    absl::MutexLock l(&mu_);
    if (auto it = torch_compile_unavailable_.find(problem_key); it != torch_compile_unavailable_.end()) {
      compile_note = it->second;
    }
  }
  auto evaluate = [&](bool with_compile) {
    std::vector<std::string> argv = {
        "evaluate",
        "--problem=" + problem,
        "--candidate=" + candidate,
        "--seeds=" + absl::StrJoin(seeds, ","),
        "--tolerances=" + ToleranceArg(task),
        absl::StrCat("--time_cap_s=", options_.profile_time_cap_s),
        absl::StrCat("--torch_compile_timeout_s=", absl::ToDoubleSeconds(options_.torch_compile_timeout)),
        with_compile ? "--baselines=eager,compile" : "--baselines=eager"};
    if (options_.sample_target_s >= 0) argv.push_back(absl::StrCat("--sample_target_s=", options_.sample_target_s));
    return RunRunner(argv, device, run.scratch,
                     // The judge limits every stage itself (import and build: the compile
                     // timeout; each call: the run timeout; torch.compile: its own); this
                     // is the backstop for the judge.
                     options_.compile_timeout + options_.torch_compile_timeout + absl::Seconds(60) +
                         (2 * static_cast<int64_t>(seeds.size()) + 4) * options_.run_timeout + kStartupAllowance +
                         absl::Seconds(3 * options_.profile_time_cap_s + 30));
  };
  run.stage_start = absl::Now();
  Outcome out = evaluate(want_compile && compile_note.empty());
  if (out.status == v1::INFRA_ERROR && out.phase == "baseline" && want_compile && compile_note.empty()) {
    // torch.compile hung past its cap where the judge could not stop it:
    // time without it rather than fail the candidate.
    compile_note = absl::StrCat("torch.compile unavailable: ", out.message);
    LogWarning("kernelbench ", task.name(), ": ", compile_note, "; timing without it");
    out = evaluate(false);
  }
  const nlohmann::json& r = out.result;
  if (r.is_object()) {
    ev.mutable_fingerprint()->set_compiler(
        absl::StrCat("Python ", r.value("python", "?"), ", torch ", r.value("torch", "?")));
  }
  const std::string stage =
      r.is_object() ? r.value("stage", "compile") : (IsCompilePhase(out.phase) ? "compile" : "validate");
  std::string message = out.message;
  if (!out.traceback.empty()) absl::StrAppend(&message, "\n", out.traceback);
  // A problem too large for this worker is not the candidate's fault.
  const std::string who = r.is_object() && r.value("blame", "") == "problem"
                              ? absl::StrCat("KernelBench problem '", task.name(), "': ")
                              : std::string("candidate ");
  if (out.status != v1::OK &&
      (stage == "compile" || out.status == v1::COMPILE_ERROR || out.status == v1::COMPILE_TIMEOUT)) {
    ev.mutable_diagnostics()->set_compiler_output(out.traceback);
    ev.mutable_diagnostics()->set_signal(out.signal);
    return run.Fail(v1::STAGE_COMPILE, out.status, absl::StrCat(who, message));
  }
  run.Emit(v1::STAGE_COMPILE, /*ok=*/true,
           absl::StrCat("imported ModelNew in its own process (", ev.fingerprint().compiler(), ", ", device, ")"));
  run.stage_start = absl::Now();
  if (out.status != v1::OK && stage == "validate") {
    ev.mutable_diagnostics()->set_signal(out.signal);
    return run.Fail(v1::STAGE_VALIDATE, out.status, absl::StrCat(who, message));
  }
  if (r.is_object()) {
    for (const nlohmann::json& c : r.value("cases", nlohmann::json::array())) {
      v1::CaseResult& result = *ev.add_validation();
      v1::EvalStatus status = v1::INFRA_ERROR;
      if (!v1::EvalStatus_Parse(c.value("status", "INFRA_ERROR"), &status)) status = v1::INFRA_ERROR;
      result.set_binding(task::kKernelBenchBinding);
      result.set_seed(c.value("seed", uint64_t{0}));
      result.set_status(status);
      result.set_output(c.value("output", ""));
      result.set_first_bad_index(c.value("first_bad_index", int64_t{-1}));
      result.set_max_abs_err(NumberOrText(c, "max_abs_err"));
      result.set_max_rel_err(NumberOrText(c, "max_rel_err"));
      result.set_detail(c.value("detail", ""));
    }
  }
  if (ev.validation_size() == 0) {
    return run.Fail(v1::STAGE_VALIDATE, v1::RUNTIME_ERROR,
                    "the judge ended without its verdict: the candidate ended it or wrote into its files");
  }
  if (!ConcludeValidation(run, absl::StrCat(seeds.size(), " seeds of get_inputs()"))) return false;
  run.stage_start = absl::Now();
  if (out.status != v1::OK) {
    ev.mutable_diagnostics()->set_signal(out.signal);
    return run.Fail(v1::STAGE_PROFILE, out.status, absl::StrCat(who, "(while timing) ", message));
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
  ev.set_baseline_kind(v1::BASELINE_PYTORCH_EAGER);
  auto& counters = *ev.mutable_profile();
  counters["candidate_calls_per_sample"] = static_cast<double>(cand.calls_per_sample);
  counters["baseline_calls_per_sample"] = static_cast<double>(eager.calls_per_sample);
  counters["working_set_bytes"] = r.value("working_set_bytes", 0.0);
  counters["converged"] = r.value("converged", false) ? 1 : 0;
  counters["peak_rss_bytes"] = static_cast<double>(out.process.peak_rss_bytes);
  // What isolation costs and shows: the judge's round trip to the
  // candidate's process (taken out of its samples), the timed calls whose
  // outputs were checked, the time to draw fresh inputs.
  counters["ipc_overhead_s"] = r.value("ipc_overhead_s", 0.0);
  // Its bound (a round trip to a process that never ran candidate code) and
  // the copy rate behind the floor a candidate's time must clear.
  if (r.contains("trusted_round_trip_s") && r["trusted_round_trip_s"].is_number()) {
    counters["trusted_round_trip_s"] = r.value("trusted_round_trip_s", 0.0);
  }
  if (r.contains("device_copy_gbs")) counters["device_copy_gbs"] = r.value("device_copy_gbs", 0.0);
  // On a GPU: the trusted control's call through the candidate's path and the
  // same kernel in the judge's process, whose difference ipc_overhead_s is.
  if (const nlohmann::json control = r.value("path_control", nlohmann::json::object());
      control.contains("cross_s") && control["cross_s"].is_number()) {
    counters["path_control_cross_s"] = control.value("cross_s", 0.0);
    counters["path_control_inproc_s"] = control.value("inproc_s", 0.0);
  }
  counters["timed_calls_checked"] = r.value("timed_calls_checked", 0.0);
  counters["input_generation_s"] = r.value("input_generation_s", 0.0);
  // Where the evaluation's time went (the runner's stages: compile,
  // validate, profile), bounded keys for the worker's metrics and the docs.
  for (const char* stage_name : {"compile", "validate", "profile"}) {
    const nlohmann::json seconds = r.value("stage_seconds", nlohmann::json::object());
    if (seconds.contains(stage_name)) {
      counters[absl::StrCat("stage_", stage_name, "_s")] = seconds.value(stage_name, 0.0);
    }
  }
  if (r.contains("l2_flush_bytes")) counters["l2_flush_bytes"] = r.value("l2_flush_bytes", 0.0);
  auto& notes = *ev.mutable_notes();
  const std::string torch = r.value("torch", "?");
  const std::string where = absl::StrCat(device, ", ", r.value("device_name", std::string("?")));
  notes["baseline"] = absl::StrCat("PyTorch eager: the problem's Model (torch ", torch, ", ", where, ")");
  if (const std::string differs = r.value("reference_nondeterministic", std::string()); !differs.empty()) {
    notes["reference_nondeterministic"] =
        absl::StrCat("the problem's Model gave two different results on the same inputs (", differs,
                     "), so ModelNew's two calls had to agree within the tolerance, not bitwise");
  }
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
  run.Emit(
      v1::STAGE_PROFILE, /*ok=*/true,
      absl::StrCat("median ", cand.median_s * 1e3, " ms (spread ", cand.spread * 100, "%), PyTorch eager ",
                   eager.median_s * 1e3, " ms, speedup ", ev.speedup(), "x", compile_line, ", ", cand.samples_s.size(),
                   " samples", r.value("converged", false) ? "" : " (time cap reached before 1% spread)",
                   ", every timed call's output checked"));
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
  if (access(runner_path.c_str(), R_OK) != 0)
    return unavailable(absl::StrCat("the runner ", runner_path, " is missing"));
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
    if (absl::StartsWith(e, "PATH="))
      cmd.env.front() = e;
    else
      cmd.env.push_back(e);
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
    return unavailable(absl::StrCat("the probe wrote no result (", r->Summary(), ") ", FirstLineOf(r->stderr_data)));
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
