#include "worker/pipeline/production_eval.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include <nlohmann/json.hpp>

#include "common/log.h"
#include "common/status.h"
#include "common/tensor.h"
#include "worker/runner/protocol.h"

namespace kevo::worker {
namespace fs = std::filesystem;
namespace {

// Extra wall time for starting Python and importing torch, which takes
// seconds on a busy host.
constexpr absl::Duration kStartupAllowance = absl::Seconds(60);

// What the runner needs to know of the task, at its timed binding.
absl::StatusOr<nlohmann::json> SpecJson(const v1::Task& task, const v1::ProductionBaseline& p,
                                        const ProductionOptions& o) {
  KEVO_ASSIGN_OR_RETURN(std::vector<runner::Param> params, runner::ClassifyParams(task));
  const SymbolValues symbols = BindingValues(task.time());
  nlohmann::json spec = {
      {"task", task.name()},      {"torch", p.torch()},
      {"vendor", p.vendor()},     {"threads", o.threads},
      {"llc_bytes", o.llc_bytes}, {"mem_budget_bytes", std::max<int64_t>(o.memory_limit_bytes / 3, int64_t{64} << 20)}};
  spec["inputs"] = nlohmann::json::array();
  spec["outputs"] = nlohmann::json::array();
  spec["params"] = nlohmann::json::array();
  spec["symbols"] = nlohmann::json::object();
  for (const runner::Param& param : params) {
    const char* kind = param.kind == runner::ParamKind::kInput    ? "input"
                       : param.kind == runner::ParamKind::kOutput ? "output"
                                                                  : "symbol";
    spec["params"].push_back({{"name", param.name}, {"kind", kind}});
    if (param.kind == runner::ParamKind::kSymbol) continue;
    KEVO_ASSIGN_OR_RETURN(std::vector<int64_t> shape, ResolveShape(*param.spec, symbols));
    spec[param.kind == runner::ParamKind::kInput ? "inputs" : "outputs"].push_back(
        {{"name", param.name}, {"dtype", v1::DType_Name(param.spec->dtype())}, {"shape", shape}});
  }
  // Every symbol of the binding, so the expression may use any of them.
  for (const auto& [name, value] : symbols) spec["symbols"][name] = value;
  return spec;
}

}  // namespace

const v1::ProductionBaseline* ProductionFor(const v1::Task& task, const std::string& platform) {
  const v1::ProductionBaseline* generic = nullptr;
  for (const v1::ProductionBaseline& p : task.production()) {
    if (p.platform() == platform) return &p;
    if (p.platform().empty() && generic == nullptr) generic = &p;
  }
  return generic;
}

void ChooseYardstick(v1::Evaluation& ev) {
  ev.clear_speedup_vs_production();
  ev.clear_production_yardstick();
  const v1::ProductionTiming* best = nullptr;
  for (const v1::ProductionTiming& p : ev.production()) {
    if (!p.error().empty() || p.timing().median_s() <= 0 || p.candidate().median_s() <= 0) continue;
    // The fastest form is the one a user would pick: the yardstick to beat.
    if (best == nullptr || p.timing().median_s() < best->timing().median_s()) best = &p;
  }
  if (best == nullptr) return;
  ev.set_speedup_vs_production(best->speedup());
  ev.set_production_yardstick(best->name());
}

ProductionTimer::ProductionTimer(const sandbox::Sandbox* sandbox, ProductionOptions options)
    : sandbox_(sandbox),
      options_(std::move(options)),
      harness_(sandbox,
               PythonRunnerOptions(options_.python, options_.runner_path, options_.work_dir, options_.visible_paths,
                                   options_.timeout, options_.memory_limit_bytes, /*open_files=*/4096, options_.env)) {}

bool ProductionTimer::Available() const {
  return access(options_.python.c_str(), X_OK) == 0 && access(options_.runner_path.c_str(), R_OK) == 0;
}

void ProductionTimer::Time(EvalRun& run, const std::string& candidate_so, const std::string& inputs_file,
                           const std::string& reference_outputs, const std::string& device) const {
  const v1::Task& task = run.task;
  v1::Evaluation& ev = run.ev;
  auto rival_unusable = [&](const std::string& why) {
    if (run.rival != nullptr && ev.rival_error().empty()) ev.set_rival_error(why);
  };
  const v1::ProductionBaseline* p = ProductionFor(task, options_.platform);
  if (p == nullptr || (p->torch().empty() && p->vendor().empty())) {
    return rival_unusable("the task names no production baseline here, so no loop times the two side by side");
  }
  auto note = [&](const std::string& why) {
    (*ev.mutable_notes())["production"] = why;
    if (absl::StartsWith(why, "not timed")) rival_unusable(absl::StrCat("the production stage failed (", why, ")"));
    LogWarning("production baseline of ", task.name(), ": ", why);
  };
  if (!Available()) {
    return note(absl::StrCat("not timed: ", options_.python, " or ", options_.runner_path, " is missing"));
  }
  auto spec = SpecJson(task, *p, options_);
  if (!spec.ok()) return note(absl::StrCat("not timed: ", spec.status().message()));
  auto timed_outputs = ResolveTimedOutputs(task);
  if (!timed_outputs.ok()) return note(absl::StrCat("not timed: ", timed_outputs.status().message()));
  if (static_cast<int64_t>(reference_outputs.size()) != timed_outputs->bytes) {
    return note("not timed: the reference's timed outputs are missing");
  }
  const std::string dir = run.scratch + "/production";
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (absl::Status s = WriteFileBytes(dir + "/spec.json", spec->dump()); !s.ok()) {
    return note(absl::StrCat("not timed: ", s.message()));
  }
  const absl::Time start = absl::Now();
  const int forms =
      (p->torch().empty() ? 0 : 2 + static_cast<int>(options_.threads.size())) + (p->vendor().empty() ? 0 : 1);
  const bool with_rival = !run.rival_so.empty();
  std::vector<std::string> argv = {
      options_.runner_path,
      "--spec=" + dir + "/spec.json",
      "--inputs=" + inputs_file,
      "--kernel=" + candidate_so,
      "--device=" + device,
      "--outputs=" + dir + "/outputs.bin",
      "--result=" + dir + "/result.json",
      "--phase=" + dir + "/phase",
      absl::StrCat("--time_cap_s=", options_.time_cap_s),
      absl::StrCat("--torch_compile_timeout_s=", absl::ToDoubleSeconds(options_.torch_compile_timeout))};
  if (with_rival) argv.push_back("--rival=" + run.rival_so);
  auto process = harness_.Run(argv, dir, options_.timeout + options_.torch_compile_timeout + kStartupAllowance,
                              (forms + 1 + (with_rival ? 1 : 0)) * timed_outputs->bytes);
  if (!process.ok()) return note(absl::StrCat("not timed: ", process.status().message()));
  auto text = ReadFileBytes(dir + "/result.json");
  nlohmann::json result =
      text.ok() ? nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false) : nlohmann::json();
  if (!result.is_object() || result.value("status", "") != "OK") {
    std::string phase;
    if (auto ph = ReadFileBytes(dir + "/phase"); ph.ok()) phase = std::string(absl::StripAsciiWhitespace(*ph));
    std::string why = result.is_object() ? result.value("message", "") : "";
    if (why.empty()) why = process->result.Summary();
    return note(
        absl::StrCat("not timed: kevo-runner-production failed", phase.empty() ? "" : " in phase ", phase, ": ", why));
  }
  auto outputs = ReadFileBytes(dir + "/outputs.bin");
  if (!outputs.ok()) return note("not timed: the production runner wrote no outputs");
  const nlohmann::json cand_json = result.value("candidate", nlohmann::json::object());
  const runner::TimingSeries cand = SeriesFromJson(cand_json);
  // Every series must have run on copies of the timed inputs alone.
  const nlohmann::json same_inputs = nlohmann::json::array({result.value("inputs_digest", std::string())});
  auto ran_on_timed_inputs = [&](const nlohmann::json& series) {
    return series.value("input_digests", nlohmann::json::array()) == same_inputs;
  };
  int64_t offset = 0;
  const int64_t bytes = timed_outputs->bytes;
  try {
    for (const nlohmann::json& f : result.at("forms")) {
      v1::ProductionTiming* t = ev.add_production();
      t->set_name(f.value("name", ""));
      t->set_call(f.value("call", ""));
      t->set_threads(f.value("threads", 0));
      t->set_library(f.value("library", ""));
      t->set_error(f.value("error", ""));
      if (!f.value("timed", false)) continue;
      if (offset + bytes > static_cast<int64_t>(outputs->size())) {
        t->set_error("wrote no outputs");
        continue;
      }
      const std::string both = outputs->substr(offset, bytes) + reference_outputs;
      offset += bytes;
      *t->mutable_timing() = ToTiming(SeriesFromJson(f.at("series")));
      *t->mutable_candidate() = ToTiming(cand);
      if (!ran_on_timed_inputs(f.at("series"))) {
        t->set_error("its timed calls did not all run on the timed inputs (it changed them in place?)");
        continue;
      }
      TimedCheck check = CompareTimedOutputs(task, *timed_outputs, both);
      if (check.status != v1::OK) {
        t->set_error(absl::StrCat("disagrees with the task's reference, so it is no yardstick: ", check.message));
        LogWarning("production baseline of ", task.name(), ": ", t->name(), " (", t->call(), ") ", t->error());
        continue;
      }
      if (t->timing().median_s() > 0 && cand.median_s > 0) t->set_speedup(t->timing().median_s() / cand.median_s);
    }
  } catch (const nlohmann::json::exception& e) {
    ev.clear_production();
    return note(absl::StrCat("not timed: malformed runner result: ", e.what()));
  }
  // The candidate's outputs in this process: a kernel right under the
  // seccomp runner must be right here too, or its production figure is void.
  // Then the rival's, the same way: a wrong rival is no comparison.
  auto kernel_check = [&](const nlohmann::json& series) {
    if (offset + bytes > static_cast<int64_t>(outputs->size())) {
      return TimedCheck{v1::INFRA_ERROR, "the production runner wrote no outputs for it"};
    }
    TimedCheck check = CompareTimedOutputs(task, *timed_outputs, outputs->substr(offset, bytes) + reference_outputs);
    offset += bytes;
    if (check.status == v1::OK && !ran_on_timed_inputs(series)) {
      check.status = v1::INPUT_MODIFIED;
      check.message = "its timed calls did not all run on the timed inputs";
    }
    return check;
  };
  const TimedCheck cand_check = kernel_check(cand_json);
  const bool cand_ok = cand_check.status == v1::OK;
  if (!cand_ok) {
    for (v1::ProductionTiming& t : *ev.mutable_production()) {
      if (t.error().empty()) t.set_error("the candidate's own outputs in this process were wrong");
      t.set_speedup(0);
    }
    note(
        absl::StrCat("the candidate disagreed with the reference when timed against production: ", cand_check.message));
  }
  if (with_rival) {
    if (result.contains("rival_error")) {
      rival_unusable(result.value("rival_error", std::string()));
    } else if (!result.contains("rival")) {
      rival_unusable("the production runner timed no rival");
    } else {
      const nlohmann::json rival_json = result.at("rival");
      const TimedCheck rival_check = kernel_check(rival_json);
      const runner::TimingSeries rival = SeriesFromJson(rival_json);
      if (rival_check.status != v1::OK) {
        rival_unusable(absl::StrCat("the rival disagreed with the reference: ", rival_check.message));
      } else if (!cand_ok) {
        rival_unusable("the candidate's outputs were wrong beside it");
      } else if (rival.median_s > 0 && cand.median_s > 0) {
        *ev.mutable_rival() = ToTiming(rival);
        ev.set_speedup_vs_rival(rival.median_s / cand.median_s);
      }
    }
  }
  ChooseYardstick(ev);
  (*ev.mutable_profile())["production_stage_s"] = absl::ToDoubleSeconds(absl::Now() - start);
  std::string summary;
  for (const v1::ProductionTiming& t : ev.production()) {
    absl::StrAppend(&summary, summary.empty() ? "" : "; ", t.name(), " ",
                    t.error().empty() ? absl::StrFormat("%.4g ms (%.2fx)", t.timing().median_s() * 1e3, t.speedup())
                                      : "unusable: " + t.error());
  }
  if (ev.speedup_vs_rival() > 0) {
    absl::StrAppend(&summary, absl::StrFormat("; beside the job's best (%.4g ms): %.3fx", ev.rival().median_s() * 1e3,
                                              ev.speedup_vs_rival()));
  } else if (!ev.rival_error().empty()) {
    absl::StrAppend(&summary, "; no rival: ", ev.rival_error());
  }
  run.Emit(v1::STAGE_PROFILE, /*ok=*/true, absl::StrCat("production: ", summary));
}

}  // namespace kevo::worker
