#include "coordinator/jobs/best.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace kevo::jobs {

std::string BestLabel(const v1::Job& job) {
  if (job.best_speedup() == 0 && job.best_static_score() > 0) {
    return absl::StrFormat("static score %.2f", job.best_static_score());
  }
  if (job.best_speedup_vs_production() > 0) {
    return absl::StrFormat("%.2fx vs %s, %.2fx vs the naive reference", job.best_speedup_vs_production(),
                           job.best_production_yardstick(), job.best_speedup_vs_reference());
  }
  return absl::StrFormat("%.2fx", job.best_speedup());
}

std::string ToolchainOf(const v1::Evaluation& e) {
  const v1::Fingerprint& f = e.fingerprint();
  if (f.device().empty() && f.compiler().empty()) return "";
  return absl::StrCat(f.device(), " / ", f.compiler());
}

SideBySide SideBySideOf(const v1::Job& job, const std::string& rival_node_id, const v1::Evaluation& e) {
  const std::string& best = job.best_node_id();
  if (e.speedup_vs_rival() > 0 && rival_node_id == best) return {e.speedup_vs_rival(), ""};
  return {0, rival_node_id.empty()      ? "no rival was timed beside it"
             : rival_node_id != best    ? absl::StrCat("its rival ", rival_node_id, " is no longer the best")
             : !e.rival_error().empty() ? absl::StrCat("its rival was not timed: ", e.rival_error())
                                        : "its rival was not timed"};
}

bool BecomesBest(const v1::Job& job, v1::Node& node, const SideBySide& side_by_side, const std::string& toolchain,
                 const std::string& best_toolchain) {
  if (job.best_speedup() <= 0) {
    node.set_best_decision("the job's first measured kernel");
    return true;
  }
  const std::string& best = job.best_node_id();
  if (side_by_side.speedup > 0) {
    const bool faster = side_by_side.speedup > 1;
    node.set_best_decision(
        absl::StrFormat("%s than %s side by side (%.3fx)", faster ? "faster" : "slower", best, side_by_side.speedup));
    return faster;
  }
  const bool higher = node.fitness() > job.best_speedup();
  if (!toolchain.empty() && !best_toolchain.empty() && toolchain != best_toolchain) {
    node.set_best_decision(absl::StrFormat("not compared with %s: measured with %s, %s with %s (%s)", best, toolchain,
                                           best, best_toolchain, side_by_side.why_not));
    return false;
  }
  node.set_best_decision(absl::StrFormat("fitness %.3f %s %s's %.3f (%s)", node.fitness(),
                                         higher ? "above" : "not above", best, job.best_speedup(),
                                         side_by_side.why_not));
  return higher;
}

void SetFigures(v1::Job& job, v1::Node& node, const v1::Evaluation& e) {
  node.set_status(e.status());
  // A compile-only worker measured nothing: its static score ranks the node,
  // flagged so that nobody reads it as a speedup.
  node.set_static_fitness(e.compile_only());
  const bool ok = e.status() == v1::OK;
  node.set_speedup_vs_reference(ok && !e.compile_only() ? e.speedup() : 0.0);
  node.set_speedup_vs_production(ok ? e.speedup_vs_production() : 0.0);
  node.set_production_yardstick(ok ? e.production_yardstick() : "");
  node.set_production_time_s(0);
  for (const v1::ProductionTiming& p : e.production()) {
    if (ok && p.name() == e.production_yardstick()) node.set_production_time_s(p.timing().median_s());
  }
  const bool vs_production = !job.spec().fitness_vs_reference() && node.speedup_vs_production() > 0;
  if (ok && !e.compile_only() && job.fitness_baseline().empty()) {
    job.set_fitness_baseline(vs_production ? "production" : "reference");
  }
  const bool fitness_on_production = job.fitness_baseline() == "production";
  node.set_fitness(!ok                     ? 0.0
                   : e.compile_only()      ? e.static_score()
                   : fitness_on_production ? node.speedup_vs_production()
                                           : e.speedup());
  node.set_time_s(e.timing().median_s());
  node.set_baseline_time_s(e.baseline().median_s());
  node.set_roofline_fraction(e.roofline_fraction());
  node.set_speedup_vs_rival(ok ? e.speedup_vs_rival() : 0.0);
}

void CopyFigures(const v1::Node& from, v1::Node& to) {
  to.set_fitness(from.fitness());
  to.set_speedup_vs_reference(from.speedup_vs_reference());
  to.set_speedup_vs_production(from.speedup_vs_production());
  to.set_production_yardstick(from.production_yardstick());
  to.set_production_time_s(from.production_time_s());
  to.set_time_s(from.time_s());
  to.set_baseline_time_s(from.baseline_time_s());
  to.set_roofline_fraction(from.roofline_fraction());
}

void InstallBest(v1::Job& job, const v1::Node& node) {
  job.set_best_speedup(node.fitness());
  job.set_best_static_score(0);
  job.set_best_node_id(node.node_id());
  job.set_best_time_s(node.time_s());
  job.set_baseline_time_s(node.baseline_time_s());
  job.set_best_roofline_fraction(node.roofline_fraction());
  job.set_best_speedup_vs_reference(node.speedup_vs_reference());
  job.set_best_speedup_vs_production(node.speedup_vs_production());
  job.set_best_production_time_s(node.production_time_s());
  job.set_best_production_yardstick(node.production_yardstick());
  job.set_last_gain_at(job.evaluations_done());
}

bool NotTheKernels(v1::EvalStatus status) { return status == v1::INFRA_ERROR || status == v1::CANCELLED; }

}  // namespace kevo::jobs
