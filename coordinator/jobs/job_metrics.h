// The job manager's Prometheus metrics (docs/metrics.md), internal to
// coordinator/jobs: jobs by state, nodes, duplicates, the best speedups by
// task and by op family, re-timings.
#pragma once

#include <array>
#include <cmath>
#include <map>
#include <optional>
#include <string>

#include "absl/synchronization/mutex.h"
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include "coordinator/jobs/manager.h"

namespace kevo::jobs {

struct JobManager::Metrics {
  prometheus::Counter* submitted = nullptr;
  prometheus::Counter* nodes = nullptr;
  prometheus::Counter* duplicates = nullptr;
  prometheus::Gauge* running = nullptr;
  prometheus::Gauge* best_speedup = nullptr;
  prometheus::Family<prometheus::Gauge>* task_best = nullptr;
  prometheus::Family<prometheus::Gauge>* family_best = nullptr;
  prometheus::Family<prometheus::Gauge>* jobs_by_state = nullptr;
  prometheus::Family<prometheus::Counter>* retimings = nullptr;
  // The job loops' shards update these from their own threads.
  absl::Mutex mu;
  // family_best's inputs: (team, family, platform, baseline) -> task -> the
  // latest job's best on it.
  std::map<std::array<std::string, 4>, std::map<std::string, double>> family_tasks ABSL_GUARDED_BY(mu);
  std::map<v1::JobState, int> state_counts ABSL_GUARDED_BY(mu);

  // Sets the family gauge to the geometric mean of its tasks' latest bests.
  void SetFamilyBest(const std::array<std::string, 4>& key, const std::string& task, double best) {
    if (family_best == nullptr || best <= 0) return;
    absl::MutexLock l(&mu);
    auto& tasks = family_tasks[key];
    tasks[task] = best;
    double log_sum = 0;
    for (const auto& [t, x] : tasks) log_sum += std::log(x);
    family_best->Add({{"team", key[0]}, {"family", key[1]}, {"platform", key[2]}, {"baseline", key[3]}})
        .Set(std::exp(log_sum / static_cast<double>(tasks.size())));
  }

  explicit Metrics(prometheus::Registry* r) {
    if (r == nullptr) return;
    submitted = &prometheus::BuildCounter()
                     .Name("kevo_coordinator_jobs_submitted_total")
                     .Help("Search jobs submitted")
                     .Register(*r)
                     .Add({});
    nodes = &prometheus::BuildCounter()
                 .Name("kevo_coordinator_nodes_total")
                 .Help("Tree nodes created (candidates sent for evaluation)")
                 .Register(*r)
                 .Add({});
    duplicates = &prometheus::BuildCounter()
                      .Name("kevo_coordinator_duplicate_proposals_total")
                      .Help("Proposals dropped because the job had evaluated the same source")
                      .Register(*r)
                      .Add({});
    running = &prometheus::BuildGauge().Name("kevo_coordinator_jobs_running").Help("Jobs running").Register(*r).Add({});
    task_best = &prometheus::BuildGauge()
                     .Name("kevo_coordinator_task_best_speedup_ratio")
                     .Help(
                         "Best speedup of the latest job on each task and platform, over the "
                         "production baseline (baseline=\"production\") and over the naive "
                         "reference (baseline=\"reference\")")
                     .Register(*r);
    family_best = &prometheus::BuildGauge()
                       .Name("kevo_coordinator_family_best_speedup_ratio")
                       .Help(
                           "Geometric mean, over the tasks of an op family, of the latest job's best "
                           "speedup on each, by team (empty without --auth), family, platform and "
                           "baseline (production or reference)")
                       .Register(*r);
    jobs_by_state = &prometheus::BuildGauge()
                         .Name("kevo_coordinator_jobs")
                         .Help("Jobs the coordinator holds, by state (running, done, cancelled, failed)")
                         .Register(*r);
    for (const char* state : {"running", "done", "cancelled", "failed"}) jobs_by_state->Add({{"state", state}});
    retimings = &prometheus::BuildCounter()
                     .Name("kevo_coordinator_retimings_total")
                     .Help(
                         "Re-timings of would-be best nodes, by platform and outcome: agreed, disagreed "
                         "(the two figures more than 1.25x apart; the lower stands), failed (the kernel "
                         "failed its re-timing and is not the best), not_retimed (the worker's failure or "
                         "the job's cancellation: the node's own figure stands)")
                     .Register(*r);
  }

  void CountRetiming(const std::string& platform, const char* outcome) {
    if (retimings != nullptr) retimings->Add({{"platform", platform}, {"outcome", outcome}}).Increment();
  }

  void CountState(std::optional<v1::JobState> before, v1::JobState after) {
    if (jobs_by_state == nullptr || before == after) return;
    auto name = [](v1::JobState st) {
      switch (st) {
        case v1::JOB_RUNNING:
          return "running";
        case v1::JOB_DONE:
          return "done";
        case v1::JOB_CANCELLED:
          return "cancelled";
        case v1::JOB_FAILED:
          return "failed";
        default:
          return "running";
      }
    };
    absl::MutexLock l(&mu);
    if (before.has_value()) jobs_by_state->Add({{"state", name(*before)}}).Set(--state_counts[*before]);
    jobs_by_state->Add({{"state", name(after)}}).Set(++state_counts[after]);
  }
};

}  // namespace kevo::jobs
