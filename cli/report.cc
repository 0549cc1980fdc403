#include "cli/report.h"

#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"

#include "kevo/v1/task.pb.h"

namespace kevo::cli {

double SpeedupVsMedianBaseline(const v1::Job& job) {
  if (job.baseline_evaluations() < 2 || job.median_baseline_time_s() <= 0 || job.best_time_s() <= 0) return 0;
  return job.median_baseline_time_s() / job.best_time_s();
}

std::string FormatSeconds(double s) {
  if (s <= 0) return "-";
  if (s >= 1) return absl::StrFormat("%.3f s", s);
  if (s >= 1e-3) return absl::StrFormat("%.3f ms", s * 1e3);
  if (s >= 1e-6) return absl::StrFormat("%.2f us", s * 1e6);
  return absl::StrFormat("%.0f ns", s * 1e9);
}

std::string JobBestLabel(const v1::Job& job, bool short_form) {
  if (job.best_speedup() == 0 && job.best_static_score() > 0) {
    return short_form ? absl::StrFormat("s%.2f", job.best_static_score())
                      : absl::StrFormat("static score %.3f", job.best_static_score());
  }
  if (job.best_speedup_vs_production() > 0) {
    return short_form ? absl::StrFormat("%.2fx prod", job.best_speedup_vs_production())
                      : absl::StrFormat("%.2fx vs production", job.best_speedup_vs_production());
  }
  return absl::StrFormat("%.2fx", job.best_speedup());
}

namespace {

// What the speedup is over, as the JSON report names it: "cublas",
// "cuda_reference", "pytorch_eager", ... (Evaluation.baseline_kind without
// its prefix, in lower case). Evaluations stored before that field named a
// GPU baseline in the profile map (baseline_kind_<kind> = 1).
std::string BaselineKind(const v1::Evaluation& e) {
  if (e.baseline_kind() != v1::BASELINE_KIND_UNSPECIFIED) {
    return absl::AsciiStrToLower(absl::StripPrefix(v1::BaselineKind_Name(e.baseline_kind()), "BASELINE_"));
  }
  for (const auto& [k, v] : e.profile()) {
    if (absl::StartsWith(k, "baseline_kind_") && v > 0) return k.substr(14);
  }
  return "reference";
}

std::string BaselineLabel(const v1::Evaluation& e) {
  const std::string kind = BaselineKind(e);
  if (kind == "cublas") return "cuBLAS (cublasGemmEx, FP32)";
  if (kind == "cuda_reference") return "the task's CUDA reference";
  if (kind == "hip_reference") return "the task's HIP reference";
  if (kind == "cpu_reference") return "the C++ reference (-O2) on this worker's CPU";
  if (kind == "pytorch_eager") return "PyTorch eager (the KernelBench problem's Model)";
  return "the reference (-O2)";
}

}  // namespace

std::string BaselineDescription(const v1::Evaluation& e) {
  if (auto it = e.notes().find("baseline"); it != e.notes().end() && !it->second.empty()) return it->second;
  return BaselineKind(e) == "reference" ? "the reference compiled -O2" : BaselineLabel(e);
}

std::string YardstickLabel(const std::string& name) {
  if (name == "torch_eager") return "PyTorch eager";
  if (name == "torch_compile") return "torch.compile";
  if (name == "vendor") return "the vendor BLAS";
  if (absl::StartsWith(name, "torch_eager_")) {
    return absl::StrCat("PyTorch eager at ", absl::StripSuffix(name.substr(12), "t"), " threads");
  }
  return name;
}

std::string SpeedupLine(double vs_production, const std::string& yardstick, double vs_reference) {
  if (vs_production <= 0) return absl::StrFormat("%.2fx vs the naive reference", vs_reference);
  return absl::StrFormat("%.2fx vs %s (what users run), %.2fx vs the naive reference", vs_production,
                         YardstickLabel(yardstick), vs_reference);
}

std::string ProductionLines(const v1::Evaluation& e, const std::string& indent) {
  std::string out;
  for (const v1::ProductionTiming& p : e.production()) {
    if (!p.error().empty()) {
      absl::StrAppend(&out, indent, p.name(), " unusable: ", p.error(), "\n");
      continue;
    }
    absl::StrAppend(&out, indent,
                    absl::StrFormat("%-15s %s (the candidate %.2fx over it; %s, %s%s)%s\n", p.name(),
                                    FormatSeconds(p.timing().median_s()), p.speedup(), p.call(), p.library(),
                                    p.threads() > 0 ? absl::StrCat(", ", p.threads(), " threads") : "",
                                    p.name() == e.production_yardstick() ? "  <- yardstick" : ""));
  }
  return out;
}

nlohmann::json EvaluationJson(const v1::Evaluation& e) {
  nlohmann::json j;
  // The production figure first: what users run today.
  j["speedup_vs_production"] =
      e.speedup_vs_production() > 0 ? nlohmann::json(e.speedup_vs_production()) : nlohmann::json(nullptr);
  j["production_yardstick"] = e.production_yardstick();
  nlohmann::json production = nlohmann::json::array();
  for (const v1::ProductionTiming& p : e.production()) {
    production.push_back({{"name", p.name()},
                          {"call", p.call()},
                          {"library", p.library()},
                          {"threads", p.threads()},
                          {"time_s", p.timing().median_s()},
                          {"spread", p.timing().spread()},
                          {"samples", p.timing().samples_s_size()},
                          {"candidate_time_s", p.candidate().median_s()},
                          {"speedup", p.speedup()},
                          {"error", p.error()}});
  }
  j["production"] = std::move(production);
  j["baseline_kind"] = BaselineKind(e);
  j["eval_id"] = e.eval_id();
  j["task"] = e.task_name();
  j["status"] = v1::EvalStatus_Name(e.status());
  if (e.compile_only()) {
    // Nothing ran: no time, no speedup; the static score is labelled as such.
    j["compile_only"] = true;
    j["score_kind"] = "static";
    j["static_score"] = e.static_score();
    j["speedup"] = nullptr;
  } else {
    j["speedup"] = e.speedup();
  }
  j["speedup_vs_reference"] = j["speedup"];
  j["roofline_fraction"] = e.roofline_fraction();
  j["baseline_time_s"] = e.baseline().median_s();
  j["time_s"] = e.timing().median_s();
  j["time_spread"] = e.timing().spread();
  j["baseline_spread"] = e.baseline().spread();
  j["samples"] = e.timing().samples_s_size();
  j["binding_timed"] = e.binding_timed();
  j["attempt"] = e.attempt();
  j["worker"] = e.worker_id();
  j["platform"] = e.platform();
  nlohmann::json validation = nlohmann::json::array();
  for (const auto& c : e.validation()) {
    nlohmann::json v;
    v["binding"] = c.binding();
    v["seed"] = c.seed();
    v["status"] = v1::EvalStatus_Name(c.status());
    v["max_abs_err"] = c.max_abs_err();
    v["max_rel_err"] = c.max_rel_err();
    v["first_bad_index"] = c.first_bad_index();
    if (!c.output().empty()) v["output"] = c.output();
    if (!c.detail().empty()) v["detail"] = c.detail();
    validation.push_back(std::move(v));
  }
  j["validation"] = std::move(validation);
  const auto& d = e.diagnostics();
  j["diagnostics"] = {{"message", d.message()},
                      {"compiler_output", d.compiler_output()},
                      {"signal", d.signal()},
                      {"violation", d.violation()}};
  const auto& f = e.fingerprint();
  j["fingerprint"] = {
      {"host", f.host()}, {"cpu_model", f.cpu_model()}, {"compiler", f.compiler()}, {"flags", f.flags()},
      {"os", f.os()},     {"device", f.device()},       {"sandbox", f.sandbox()}};
  nlohmann::json profile = nlohmann::json::object();
  for (const auto& [k, v] : e.profile()) profile[k] = v;
  j["profile"] = std::move(profile);
  nlohmann::json notes = nlohmann::json::object();
  for (const auto& [k, v] : e.notes()) notes[k] = v;
  j["notes"] = std::move(notes);
  nlohmann::json events = nlohmann::json::array();
  for (const auto& ev : e.events()) {
    events.push_back(
        {{"stage", v1::Stage_Name(ev.stage())}, {"ok", ev.ok()}, {"seconds", ev.seconds()}, {"message", ev.message()}});
  }
  j["events"] = std::move(events);
  return j;
}

std::string HumanReport(const v1::Evaluation& e) {
  std::string out = absl::StrCat("status        ", v1::EvalStatus_Name(e.status()), "\n");
  if (!e.diagnostics().message().empty()) {
    absl::StrAppend(&out, "diagnosis     ", e.diagnostics().message(), "\n");
  }
  if (!e.diagnostics().violation().empty()) {
    absl::StrAppend(&out, "violation     ", e.diagnostics().violation(), "\n");
  }
  if (!e.diagnostics().compiler_output().empty()) {
    absl::StrAppend(&out, "compiler output:\n", e.diagnostics().compiler_output(), "\n");
  }
  int passed = 0;
  for (const auto& c : e.validation()) passed += c.status() == v1::OK;
  if (e.validation_size() > 0) {
    absl::StrAppend(&out, "validation    ", passed, "/", e.validation_size(), " cases passed (seeds x shapes)\n");
    for (const auto& c : e.validation()) {
      if (c.status() == v1::OK) continue;
      absl::StrAppend(&out, absl::StrFormat("  %-10s seed %-3d %s output %s: max abs err %.3g, max rel err "
                                            "%.3g, first bad index %d %s\n",
                                            c.binding(), c.seed(), v1::EvalStatus_Name(c.status()), c.output(),
                                            c.max_abs_err(), c.max_rel_err(), c.first_bad_index(), c.detail()));
    }
  }
  if (e.timing().median_s() > 0) {
    absl::StrAppend(&out, "timed shape   ", e.binding_timed(), "\n");
    if (e.production_size() > 0) {
      absl::StrAppend(&out, "production    what users run today, timed beside the candidate:\n",
                      ProductionLines(e, "  "));
    }
    absl::StrAppend(&out, absl::StrFormat("baseline      %s (spread %.1f%%)\n", FormatSeconds(e.baseline().median_s()),
                                          100 * e.baseline().spread()));
    absl::StrAppend(
        &out, absl::StrFormat("candidate     %s (spread %.1f%%, %d samples)\n", FormatSeconds(e.timing().median_s()),
                              100 * e.timing().spread(), e.timing().samples_s_size()));
    if (e.speedup_vs_production() > 0) {
      absl::StrAppend(&out, absl::StrFormat("speedup       %.2fx vs %s (what users run); %.2fx over %s\n",
                                            e.speedup_vs_production(), YardstickLabel(e.production_yardstick()),
                                            e.speedup(), BaselineLabel(e)));
    } else {
      absl::StrAppend(&out, absl::StrFormat("speedup       %.2fx over %s%s\n", e.speedup(), BaselineLabel(e),
                                            e.production_size() > 0 ? " (no production form was usable)" : ""));
    }
    if (auto it = e.profile().find("torch_compile_median_s"); it != e.profile().end() && it->second > 0) {
      absl::StrAppend(&out, absl::StrFormat("torch.compile %s (the candidate %.2fx over it)\n",
                                            FormatSeconds(it->second), it->second / e.timing().median_s()));
    }
    absl::StrAppend(
        &out, absl::StrFormat("roofline      %.1f%% of this worker's measured limits\n", 100 * e.roofline_fraction()));
  }
  if (e.compile_only() && e.status() == v1::OK) {
    absl::StrAppend(&out, absl::StrFormat("static score  %.3f (static: occupancy, spills and LDS from the "
                                          "compiler; compile-only worker, not validated, not timed)\n",
                                          e.static_score()));
  }
  for (const auto& [key, note] : std::map<std::string, std::string>(e.notes().begin(), e.notes().end())) {
    absl::StrAppend(&out, absl::StrFormat("note          %s: %s\n", key, note));
  }
  if (!e.worker_id().empty()) {
    absl::StrAppend(&out, "worker        ", e.worker_id(), " (", e.fingerprint().cpu_model(), ", ",
                    e.fingerprint().compiler(), ", sandbox ", e.fingerprint().sandbox(), ")\n");
  }
  return out;
}

}  // namespace kevo::cli
