// The job loop's half that takes results in: a node's evaluation applied to
// the job (its figures, the best, the budget), a would-be best's re-timing,
// and the job's end, each written to RocksDB before it is shown.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"

#include "common/log.h"
#include "common/status.h"
#include "coordinator/jobs/best.h"
#include "coordinator/jobs/job_metrics.h"
#include "coordinator/jobs/running.h"
#include "coordinator/jobs/statistics.h"
#include "coordinator/store/keys.h"

namespace kevo::jobs {
namespace {

// `job` less its spec, which a result never changes: what a refused write
// rolls back to (Unstored), without copying the task for every result.
v1::Job WithoutSpec(v1::Job& job) {
  v1::JobSpec spec;
  spec.Swap(job.mutable_spec());
  v1::Job copy = job;
  spec.Swap(job.mutable_spec());
  return copy;
}

// A KernelBench job's task takes the first Model graph a worker captured
// (the coordinator has no torch): the built-in proposer's bridge recipes
// match its operators.
// True when it did (the spec changed: stored again with the result).
bool AdoptModelGraph(v1::Job& job, const v1::Evaluation& e) {
  v1::Task& task = *job.mutable_spec()->mutable_task();
  if (!e.has_model_graph() || task.format() != v1::TASK_FORMAT_KERNELBENCH || task.model_graph().nodes_size() > 0) {
    return false;
  }
  // Stored with the job's next write (spec_unstored), so a restarted
  // coordinator keeps it.
  *task.mutable_model_graph() = e.model_graph();
  LogInfo("job ", job.job_id(), ": the Model's graph, ", e.model_graph().nodes_size(), " nodes, from worker ",
          e.worker_id(), e.model_graph().error().empty() ? "" : absl::StrCat(" (", e.model_graph().error(), ")"));
  return true;
}

}  // namespace

void JobManager::OnEvaluationDone(const v1::EvalRecord& record) {
  Running* running = FindRunning(record.job_id());
  if (running == nullptr) return;
  Running& r = *running;
  if (!Apply(r, record)) {
    r.unstored.push_back(record);
    return;
  }
  Pump(r);
}

bool JobManager::Apply(Running& r, const v1::EvalRecord& record) {
  auto n = r.node_by_eval.find(record.eval_id());
  const v1::Node* node = n == r.node_by_eval.end() ? nullptr : r.tree.Get(n->second);
  if (node == nullptr) return true;
  if (node->state() != v1::NODE_DONE) return ApplyResult(r, *node, record.evaluation());
  if (node->retiming().eval_id() == record.eval_id() && !node->retiming().done()) {
    return ApplyRetiming(r, *node, record.evaluation());
  }
  return true;  // already applied
}

bool JobManager::ApplyResult(Running& r, v1::Node node, const v1::Evaluation& e) {
  const v1::Job job_before = WithoutSpec(r.job);
  const int in_flight_before = r.in_flight;
  const std::vector<double> baselines_before = r.baselines;
  node.set_state(v1::NODE_DONE);
  v1::Job& job = r.job;
  if (AdoptModelGraph(job, e)) r.spec_unstored = true;
  SetFigures(job, node, e);
  job.set_evaluations_done(job.evaluations_done() + 1);
  // Device timing-slot use over the job's duration (GPU workers report the
  // seconds each evaluation held its GPU's slot).
  if (e.has_device_use()) {
    job.set_device_busy_s(job.device_busy_s() + e.device_use().stage_s());
    r.devices.insert(absl::StrCat(e.fingerprint().host(), "/", e.device_use().gpu_index()));
    const double wall_s = static_cast<double>(absl::ToUnixMicros(now_()) - job.created_unix_micros()) * 1e-6;
    if (wall_s > 0) {
      job.set_device_utilisation(std::min(1.0, job.device_busy_s() / (wall_s * static_cast<double>(r.devices.size()))));
    }
  }
  (*job.mutable_by_status())[v1::EvalStatus_Name(e.status())] += 1;
  r.in_flight = std::max(0, r.in_flight - 1);
  // The node was not done before (Apply), so its baseline is new.
  CountBaseline(r, nullptr, node);
  // A would-be best is evaluated once more before it becomes the best
  // (ApplyRetiming); the job's best stays as it is meanwhile. A simulator's
  // time would come out the same.
  const bool new_best =
      !node.static_fitness() && node.fitness() > 0 &&
      BecomesBest(job, node, SideBySideOf(job, node.rival_node_id(), e), ToolchainOf(e), BestToolchain(r));
  bool retiming = false;
  if (new_best && !e.deterministic_timing()) {
    ++r.in_flight;  // the re-timing takes the evaluation's place
    job.set_evaluations_in_flight(r.in_flight);
    const absl::Status started = StartRetiming(r, node);
    retiming = started.ok();
    if (!retiming && started.code() != absl::StatusCode::kFailedPrecondition &&
        started.code() != absl::StatusCode::kResourceExhausted && started.code() != absl::StatusCode::kNotFound) {
      // The store refused the write (a full disk): retried like any result.
      return Unstored(r, job_before, in_flight_before, baselines_before,
                      absl::StrCat("node ", node.node_id(), ": its result and re-timing are"), started);
    }
    if (!retiming) {
      // No worker can time it, the team's quota is spent, or its kernel
      // cannot be read: it becomes the best on its own figure.
      --r.in_flight;
      node.clear_retiming();
      node.set_best_decision(absl::StrCat(node.best_decision(), "; not re-timed: ", started.message()));
      if (metrics_) metrics_->CountRetiming(job.spec().platform(), "not_retimed");
    }
  }
  if (new_best && !retiming) {
    InstallBest(job, node);
  } else if (node.static_fitness() && job.best_speedup() == 0 && node.fitness() > job.best_static_score()) {
    // Ranked statically only while nothing has been measured.
    job.set_best_static_score(node.fitness());
    job.set_best_node_id(node.node_id());
    job.set_last_gain_at(job.evaluations_done());
  }
  job.set_evaluations_in_flight(r.in_flight);
  if (!retiming) {
    if (absl::Status s = WriteResult(r, node); !s.ok()) {
      return Unstored(r, job_before, in_flight_before, baselines_before,
                      absl::StrCat("node ", node.node_id(), ": its result is"), s);
    }
  }
  r.tree.Upsert(node);
  r.proposer->Observe(node, &e);
  LogInfo("job ", job.job_id(), " node ", node.node_id(), " ", v1::EvalStatus_Name(e.status()),
          " fitness=", absl::StrFormat("%.2f", node.fitness()), " [", node.mutation(), "] (", job.evaluations_done(),
          "/", job.spec().budget().max_evaluations(), ", best ", BestLabel(job), ")",
          retiming ? absl::StrCat("; ", node.best_decision(), ": re-timing it (", node.retiming().eval_id(),
                                  ") before it becomes the best")
                   : "");
  Publish(r, &node);
  CheckStop(r);
  return true;
}

absl::Status JobManager::WriteResult(Running& r, const v1::Node& node) {
  store::Batch batch;
  batch.Put(store::Family::kNodes, store::keys::Node(r.job.job_id(), node.node_id()), node.SerializeAsString());
  PutJob(batch, r.job, r.spec_unstored);
  // Durable at the job loop's next Sync(), before anyone is shown it.
  KEVO_RETURN_IF_ERROR(store_->Write(batch, /*sync=*/false));
  r.spec_unstored = false;
  return absl::OkStatus();
}

bool JobManager::Unstored(Running& r, const v1::Job& job_before, int in_flight_before,
                          const std::vector<double>& baselines_before, const std::string& what,
                          const absl::Status& why) {
  if (!r.said_unstored) {
    LogError("job ", r.job.job_id(), " ", what,
             " not stored yet (retried every second; the job waits): ", why.ToString());
    r.said_unstored = true;
  }
  v1::Job restored = job_before;  // WithoutSpec's: the spec stays
  restored.mutable_spec()->Swap(r.job.mutable_spec());
  r.job = std::move(restored);
  r.in_flight = in_flight_before;
  r.baselines = baselines_before;
  return false;
}

void JobManager::CountBaseline(Running& r, const v1::Node* before, const v1::Node& after) {
  if (before != nullptr) {
    for (double t : BaselineTimes({before})) {
      auto it = std::lower_bound(r.baselines.begin(), r.baselines.end(), t);
      if (it != r.baselines.end() && *it == t) r.baselines.erase(it);
    }
  }
  for (double t : BaselineTimes({&after})) {
    r.baselines.insert(std::upper_bound(r.baselines.begin(), r.baselines.end(), t), t);
  }
  r.job.set_baseline_evaluations(static_cast<int32_t>(r.baselines.size()));
  r.job.set_median_baseline_time_s(SortedMedian(r.baselines));
}

void JobManager::CheckStop(Running& r) {
  std::string reason = StopReason(r);
  if (!reason.empty() && !r.stopping) {
    r.stopping = true;
    r.job.set_stop_reason(reason);
  }
}

absl::Status JobManager::StartRetiming(Running& r, v1::Node& node) {
  v1::Job& job = r.job;
  auto record = scheduler_->GetRecord(node.eval_id());
  std::optional<v1::Candidate> kernel = record.ok() ? CandidateOf(*record) : std::nullopt;
  if (!kernel.has_value()) return absl::NotFoundError("its kernel cannot be read back");
  scheduler::Scheduler::SubmitOptions so;
  so.job_id = job.job_id();
  so.eval_id = scheduler::Scheduler::NewEvalId();
  so.require_timing = true;  // it was measured: only a measurement can check it
  so.team = job.spec().team();
  so.priority = job.spec().priority();
  v1::Retiming& retiming = *node.mutable_retiming();
  retiming.Clear();
  retiming.set_eval_id(so.eval_id);
  retiming.set_first_fitness(node.fitness());
  if (std::optional<v1::Candidate> best = BestCandidate(r); best.has_value()) {
    so.rival = *std::move(best);
    so.rival_stored = true;  // BestCandidate read it from the store
    retiming.set_rival_node_id(job.best_node_id());
  }
  job.set_retimings(job.retimings() + 1);
  // The node's result, the job's counters and the re-timing's record in one
  // batch: a coordinator killed now finds the re-timing to wait for.
  so.extra.Put(store::Family::kNodes, store::keys::Node(job.job_id(), node.node_id()), node.SerializeAsString());
  PutJob(so.extra, job, r.spec_unstored);
  // Durable at the job loop's next Sync(), as the node's own evaluation is.
  so.sync = false;
  KEVO_RETURN_IF_ERROR(scheduler_->Submit(job.spec().task(), *kernel, job.spec().platform(), std::move(so)).status());
  r.spec_unstored = false;
  r.node_by_eval[retiming.eval_id()] = node.node_id();
  return absl::OkStatus();
}

bool JobManager::ApplyRetiming(Running& r, v1::Node node, const v1::Evaluation& e) {
  const v1::Job job_before = WithoutSpec(r.job);
  const int in_flight_before = r.in_flight;
  const std::vector<double> baselines_before = r.baselines;
  const v1::Node node_before = node;
  v1::Job& job = r.job;
  const std::string& platform = job.spec().platform();
  r.in_flight = std::max(0, r.in_flight - 1);
  v1::Retiming& retiming = *node.mutable_retiming();
  retiming.set_done(true);
  retiming.set_status(e.status());
  // The side-by-side figures against the job's best now, from either
  // evaluation that timed the kernel beside it: the lower stands.
  v1::Evaluation own;
  own.set_speedup_vs_rival(node.speedup_vs_rival());
  const SideBySide first = SideBySideOf(job, node.rival_node_id(), own);
  SideBySide side_by_side = SideBySideOf(job, retiming.rival_node_id(), e);
  retiming.set_speedup_vs_rival(e.status() == v1::OK ? e.speedup_vs_rival() : 0.0);
  if (first.speedup > 0) {
    side_by_side.speedup = side_by_side.speedup > 0 ? std::min(first.speedup, side_by_side.speedup) : first.speedup;
  }
  std::string verdict;
  const char* outcome;
  v1::Node retimed = node;
  SetFigures(job, retimed, e);
  if (e.status() == v1::OK && retimed.fitness() > 0 && !retimed.static_fitness()) {
    retiming.set_retimed_fitness(retimed.fitness());
    const double hi = std::max(node.fitness(), retimed.fitness()), lo = std::min(node.fitness(), retimed.fitness());
    retiming.set_disagreement(hi / lo);
    retiming.set_disagrees(hi / lo > kRetimingDisagreement);
    outcome = retiming.disagrees() ? "disagreed" : "agreed";
    verdict = absl::StrFormat("re-timed: fitness %.3f then %.3f (%.2fx apart%s)", node.fitness(), retimed.fitness(),
                              hi / lo, retiming.disagrees() ? ", a disagreement: the lower stands" : "");
    // The lower figure stands: the re-timing's figures, all of them, when
    // its fitness is the lower (the side-by-side ones are kept apart).
    if (retimed.fitness() < node.fitness()) CopyFigures(retimed, node);
  } else if (e.status() == v1::OK) {
    // Correct, but nothing on the job's yardstick (that worker timed no
    // production form, say): nothing to compare.
    outcome = "not_retimed";
    verdict = "not re-timed (its re-timing measured no fitness on the job's yardstick): its own figure stands";
  } else if (NotTheKernels(e.status())) {
    outcome = "not_retimed";
    verdict = absl::StrCat("not re-timed (", v1::EvalStatus_Name(e.status()), ": ", e.diagnostics().message(),
                           "): its own figure stands");
  } else {
    // A kernel that fails when evaluated again measured nothing the second
    // time: the lower figure is none, and it is not the best.
    outcome = "failed";
    verdict =
        absl::StrCat("its re-timing failed (", v1::EvalStatus_Name(e.status()), ": ", e.diagnostics().message(), ")");
    node.set_fitness(0);
  }
  const std::string first_decision = node.best_decision();
  if (node.fitness() > 0) {
    const bool best = BecomesBest(job, node, side_by_side, ToolchainOf(e), BestToolchain(r));
    node.set_best_decision(
        node.best_decision() == first_decision
            ? absl::StrCat(first_decision, "; ", verdict)
            : absl::StrCat(first_decision, "; ", verdict, "; decided again: ", node.best_decision()));
    if (best) InstallBest(job, node);
  } else {
    node.set_best_decision(absl::StrCat(first_decision, "; ", verdict));
  }
  if (retiming.disagrees()) job.set_retiming_disagreements(job.retiming_disagreements() + 1);
  CountBaseline(r, &node_before, node);  // the node's baseline may be the re-timing's now
  job.set_evaluations_in_flight(r.in_flight);
  if (absl::Status s = WriteResult(r, node); !s.ok()) {
    return Unstored(r, job_before, in_flight_before, baselines_before,
                    absl::StrCat("node ", node.node_id(), ": its re-timing is"), s);
  }
  if (metrics_) metrics_->CountRetiming(platform, outcome);
  r.tree.Upsert(node);
  const std::string line = absl::StrCat("job ", job.job_id(), " node ", node.node_id(), " ", node.best_decision(),
                                        " (best ", BestLabel(job), ")");
  if (retiming.disagrees()) {
    LogWarning(line);
  } else {
    LogInfo(line);
  }
  Publish(r, &node);
  CheckStop(r);
  return true;
}

std::string JobManager::StopReason(const Running& r) const {
  const v1::Job& job = r.job;
  const v1::Budget& b = job.spec().budget();
  if (r.cancelled) return "cancelled";
  if (b.max_evaluations() > 0 && job.evaluations_done() >= b.max_evaluations()) {
    return "evaluation budget spent";
  }
  if (b.max_wall_seconds() > 0 && absl::ToDoubleSeconds(now_() - r.started) >= b.max_wall_seconds()) {
    return "wall-time budget spent";
  }
  if (b.stall_evaluations() > 0 && (job.best_speedup() > 0 || job.best_static_score() > 0) &&
      job.evaluations_done() - job.last_gain_at() >= b.stall_evaluations()) {
    return absl::StrCat("no gain in ", b.stall_evaluations(), " evaluations");
  }
  if (b.target_speedup() > 0 && job.best_speedup() >= b.target_speedup()) {
    return "target speedup reached";
  }
  if (b.target_roofline() > 0 && job.best_roofline_fraction() >= b.target_roofline()) {
    return "target roofline fraction reached";
  }
  return "";
}

void JobManager::MaybeFinish(Running& r) {
  if (!r.stopping || r.in_flight > 0) {
    Publish(r, nullptr);
    return;
  }
  const v1::Job job_before = r.job;
  v1::Job& job = r.job;
  job.set_state(r.cancelled ? v1::JOB_CANCELLED : v1::JOB_DONE);
  job.set_finished_unix_micros(absl::ToUnixMicros(now_()));
  job.set_evaluations_in_flight(0);
  store::Batch batch;
  PutJob(batch, job, r.spec_unstored);
  if (!job.best_node_id().empty()) {
    batch.Put(store::Family::kJobs, store::keys::Best(job.task_hash(), job.spec().platform(), job.job_id()),
              job.best_node_id());
  }
  // Durable at the job loop's next Sync(), before anyone is shown the end.
  absl::Status s = store_->Write(batch, /*sync=*/false);
  if (!s.ok()) {
    // Not ended until that is on disk: the next tick tries again.
    if (!r.said_unstored) {
      LogError("job ", job.job_id(), ": its end is not stored yet (retried every second): ", s.ToString());
      r.said_unstored = true;
    }
    r.job = job_before;
    Publish(r, nullptr);
    return;
  }
  r.spec_unstored = false;
  LogInfo("job ", job.job_id(), " ", v1::JobState_Name(job.state()), ": ", job.stop_reason(), "; best ", BestLabel(job),
          " (node ", job.best_node_id(), ") after ", job.evaluations_done(), " evaluations");
  if (learning_.on_end) {
    std::vector<v1::Node> nodes;
    for (const auto& [node_id, n] : r.tree.nodes()) nodes.push_back(n);
    learning_.on_end(job, nodes);
  }
  std::string id = job.job_id();
  Publish(r, nullptr);
  ShardOf(id).running.erase(id);
  if (metrics_->running) metrics_->running->Set(static_cast<double>(--running_count_));
}

}  // namespace kevo::jobs
