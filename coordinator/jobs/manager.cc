#include "coordinator/jobs/manager.h"

#include <array>
#include <cmath>

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/hash.h"
#include "common/log.h"
#include "common/status.h"
#include "coordinator/store/keys.h"

namespace kevo::jobs {
namespace {

// "1.52x" for a measured best, "static score 0.83" for one a compile-only
// fleet ranked without measuring.
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

constexpr int kDefaultBudget = 60;
constexpr int kMaxEmptyRounds = 40;     // proposals that were all duplicates
constexpr int kMaxOverask = 64;         // at most this many times the free slots
constexpr int kMaxProposerErrors = 20;
constexpr size_t kMaxChildren = 8;       // children of a parent shown to the proposer

std::string NewJobId() {
  static absl::Mutex mu(absl::kConstInit);
  static std::mt19937_64* rng = new std::mt19937_64(std::random_device{}());
  absl::MutexLock l(&mu);
  return absl::StrFormat("j-%x-%04x", absl::ToUnixSeconds(absl::Now()),
                         static_cast<uint32_t>((*rng)() & 0xFFFF));
}

std::string SourceHash(const v1::Candidate& c) { return Sha256Hex(DeterministicBytes(c)); }

// What makes two evaluations' timings comparable: the device and the
// compiler that measured and built them ("" when the evaluation does not say).
std::string ToolchainOf(const v1::Evaluation& e) {
  const v1::Fingerprint& f = e.fingerprint();
  if (f.device().empty() && f.compiler().empty()) return "";
  return absl::StrCat(f.device(), " / ", f.compiler());
}

// How far apart two figures of one kernel may be (the larger over the
// smaller) before its re-timing is said to disagree with its own evaluation:
// ratios measured interleaved in one runner move by a few percent between
// runs on a quiet host; more says the host's timings are not to be trusted
// (docs/search.md, "Re-timing").
constexpr double kRetimingDisagreement = 1.25;

// A node's side-by-side figure against the job's current best, where one was
// measured against that node (> 1: the node is faster); 0, and why not, when
// none was.
struct SideBySide {
  double speedup = 0;
  std::string why_not;
};

SideBySide SideBySideOf(const v1::Job& job, const std::string& rival_node_id, const v1::Evaluation& e) {
  const std::string& best = job.best_node_id();
  if (e.speedup_vs_rival() > 0 && rival_node_id == best) return {e.speedup_vs_rival(), ""};
  return {0, rival_node_id.empty()           ? "no rival was timed beside it"
             : rival_node_id != best         ? absl::StrCat("its rival ", rival_node_id, " is no longer the best")
             : !e.rival_error().empty()      ? absl::StrCat("its rival was not timed: ", e.rival_error())
                                             : "its rival was not timed"};
}

// Whether a measured, correct `node` replaces the job's best, and why
// (recorded in node.best_decision). The two kernels timed side by side in
// the node's own evaluation decide it (the rival was the job's best when the
// node was submitted); otherwise, when there was no production stage, the
// rival failed there or the best has changed since, their fitness does:
// each is a ratio over a yardstick timed beside that kernel alone, so only
// when both were measured with one toolchain (`toolchain`, the node's
// ToolchainOf, and `best_toolchain`, the best's): a ratio over a reference
// another compiler built, on another device, says nothing of which kernel is
// faster, and the best stays.
bool BecomesBest(const v1::Job& job, v1::Node& node, const SideBySide& side_by_side, const std::string& toolchain,
                 const std::string& best_toolchain) {
  if (job.best_speedup() <= 0) {
    node.set_best_decision("the job's first measured kernel");
    return true;
  }
  const std::string& best = job.best_node_id();
  if (side_by_side.speedup > 0) {
    const bool faster = side_by_side.speedup > 1;
    node.set_best_decision(absl::StrFormat("%s than %s side by side (%.3fx)", faster ? "faster" : "slower",
                                           best, side_by_side.speedup));
    return faster;
  }
  const bool higher = node.fitness() > job.best_speedup();
  if (!toolchain.empty() && !best_toolchain.empty() && toolchain != best_toolchain) {
    node.set_best_decision(absl::StrFormat("not compared with %s: measured with %s, %s with %s (%s)", best,
                                           toolchain, best, best_toolchain, side_by_side.why_not));
    return false;
  }
  node.set_best_decision(absl::StrFormat("fitness %.3f %s %s's %.3f (%s)", node.fitness(),
                                         higher ? "above" : "not above", best, job.best_speedup(),
                                         side_by_side.why_not));
  return higher;
}

// Fills `node`'s status and figures from an evaluation of its kernel. Fitness
// is the speedup over what users run today when the job measures it
// (docs/search.md, "Fitness"), else over the naive reference; the job's
// yardstick is fixed by its first measured evaluation.
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

// The measured figures of `from` (SetFigures's, but for the side by side) into `to`.
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

// Makes `node` the job's best.
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

// Failures of a re-timing that are not the kernel's (the worker's, or the
// job's own cancellation): the node's own figure then stands.
bool NotTheKernels(v1::EvalStatus status) { return status == v1::INFRA_ERROR || status == v1::CANCELLED; }

}  // namespace

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
  // family_best's inputs: (team, family, platform, baseline) -> task -> the
  // latest job's best on it.
  std::map<std::array<std::string, 4>, std::map<std::string, double>> family_tasks;
  std::map<v1::JobState, int> state_counts;

  // Sets the family gauge to the geometric mean of its tasks' latest bests.
  void SetFamilyBest(const std::array<std::string, 4>& key, const std::string& task, double best) {
    if (family_best == nullptr || best <= 0) return;
    auto& tasks = family_tasks[key];
    tasks[task] = best;
    double log_sum = 0;
    for (const auto& [t, x] : tasks) log_sum += std::log(x);
    family_best->Add({{"team", key[0]}, {"family", key[1]}, {"platform", key[2]}, {"baseline", key[3]}})
        .Set(std::exp(log_sum / static_cast<double>(tasks.size())));
  }

  explicit Metrics(prometheus::Registry* r) {
    if (r == nullptr) return;
    submitted = &prometheus::BuildCounter().Name("kevo_coordinator_jobs_submitted_total")
                     .Help("Search jobs submitted").Register(*r).Add({});
    nodes = &prometheus::BuildCounter().Name("kevo_coordinator_nodes_total")
                 .Help("Tree nodes created (candidates sent for evaluation)").Register(*r).Add({});
    duplicates = &prometheus::BuildCounter().Name("kevo_coordinator_duplicate_proposals_total")
                      .Help("Proposals dropped because the job had evaluated the same source")
                      .Register(*r).Add({});
    running = &prometheus::BuildGauge().Name("kevo_coordinator_jobs_running")
                   .Help("Jobs running").Register(*r).Add({});
    task_best = &prometheus::BuildGauge().Name("kevo_coordinator_task_best_speedup_ratio")
                     .Help("Best speedup of the latest job on each task and platform, over the "
                           "production baseline (baseline=\"production\") and over the naive "
                           "reference (baseline=\"reference\")")
                     .Register(*r);
    family_best = &prometheus::BuildGauge().Name("kevo_coordinator_family_best_speedup_ratio")
                       .Help("Geometric mean, over the tasks of an op family, of the latest job's best "
                             "speedup on each, by team (empty without --auth), family, platform and "
                             "baseline (production or reference)")
                       .Register(*r);
    jobs_by_state = &prometheus::BuildGauge().Name("kevo_coordinator_jobs")
                         .Help("Jobs the coordinator holds, by state (running, done, cancelled, failed)")
                         .Register(*r);
    for (const char* state : {"running", "done", "cancelled", "failed"}) jobs_by_state->Add({{"state", state}});
    retimings = &prometheus::BuildCounter().Name("kevo_coordinator_retimings_total")
                     .Help("Re-timings of would-be best nodes, by platform and outcome: agreed, disagreed "
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
        case v1::JOB_RUNNING: return "running";
        case v1::JOB_DONE: return "done";
        case v1::JOB_CANCELLED: return "cancelled";
        case v1::JOB_FAILED: return "failed";
        default: return "running";
      }
    };
    if (before.has_value()) jobs_by_state->Add({{"state", name(*before)}}).Set(--state_counts[*before]);
    jobs_by_state->Add({{"state", name(after)}}).Set(++state_counts[after]);
  }
};

struct JobManager::Running {
  v1::Job job;
  search::Tree tree;
  std::unique_ptr<search::Policy> policy;
  std::unique_ptr<proposer::Proposer> proposer;
  std::set<std::string> sources;
  std::map<std::string, std::string> node_by_eval;
  std::mt19937_64 rng;
  std::map<std::string, double> priors;  // from skill memory
  int in_flight = 0;
  bool stopping = false;
  bool cancelled = false;
  int empty_rounds = 0;
  // Proposals to ask for beyond the free slots: doubled after a round whose
  // proposals were all duplicates (a deterministic proposer asked for one
  // seed returns the same first seed each time), back to 1 after a new one.
  int overask = 1;
  int proposer_errors = 0;
  absl::Time started = absl::Now();
  std::set<std::string> devices;  // host/GPU pairs that timed this job's candidates
  // The best node's kernel (BestCandidate), read once per best.
  std::string best_candidate_node;
  std::optional<v1::Candidate> best_candidate;
  // The toolchain that measured the best node (BestToolchain), read once per best.
  std::string best_toolchain_node;
  std::string best_toolchain;
  // Results that could not be stored yet (the store refused the write: a
  // full disk), retried every tick; the job proposes nothing meanwhile, so
  // what it reports never runs ahead of what is on disk.
  std::vector<v1::EvalRecord> unstored;
  bool said_unstored = false;  // logged once while results wait, not every retry
  // BaselineTimes() of the tree's nodes, sorted, kept as results are applied
  // (the job's median baseline without a pass over the tree per result).
  std::vector<double> baselines;
};

JobManager::JobManager(store::Store* store, scheduler::Scheduler* scheduler,
                       ProposerFactory proposers, std::shared_ptr<prometheus::Registry> registry)
    : store_(store),
      scheduler_(scheduler),
      proposers_(std::move(proposers)),
      registry_(std::move(registry)),
      metrics_(std::make_unique<Metrics>(registry_.get())) {
  for (int i = 0; i < kJobLoops; ++i) shards_.push_back(std::make_unique<Shard>());
}

JobManager::~JobManager() { Stop(); }

JobManager::Shard& JobManager::ShardOf(const std::string& job_id) {
  return *shards_[std::hash<std::string>()(job_id) % shards_.size()];
}

JobManager::Running* JobManager::FindRunning(const std::string& job_id) {
  Shard& shard = ShardOf(job_id);
  auto it = shard.running.find(job_id);
  return it == shard.running.end() ? nullptr : it->second.get();
}

void JobManager::Post(const std::string& job_id, Work work) { Post(ShardOf(job_id), std::move(work)); }

void JobManager::Post(Shard& shard, Work work) {
  absl::MutexLock l(&mu_);
  shard.work.push_back(std::move(work));
}

void JobManager::Start() {
  for (auto& shard : shards_) {
    Shard* s = shard.get();
    s->thread = std::thread([this, s] { Loop(*s); });
  }
}

void JobManager::Stop() {
  {
    absl::MutexLock l(&mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  for (auto& shard : shards_) {
    if (shard->thread.joinable()) shard->thread.join();
  }
}

void JobManager::PumpAll(Shard& shard) {
  std::vector<std::string> ids;
  for (const auto& [id, job] : shard.running) ids.push_back(id);
  for (const auto& id : ids) {
    auto it = shard.running.find(id);
    if (it != shard.running.end()) Pump(*it->second);
  }
}

void JobManager::Loop(Shard& shard) {
  absl::Time next_tick = absl::Now();
  while (true) {
    std::deque<Work> batch;
    {
      absl::MutexLock l(&mu_);
      auto ready = [this, &shard]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || !shard.work.empty();
      };
      mu_.AwaitWithTimeout(absl::Condition(&ready), std::max(absl::ZeroDuration(), next_tick - absl::Now()));
      if (stopping_) return;
      batch.swap(shard.work);
    }
    for (auto& w : batch) w();
    if (absl::Now() >= next_tick) {
      // New workers may have connected, wall-time limits may have passed.
      PumpAll(shard);
      next_tick = absl::Now() + absl::Seconds(1);
    }
    // What the batch wrote is synced once, then shown.
    PublishSynced(shard);
  }
}

void JobManager::FailJob(const v1::Job& job, const std::string& why) {
  LogError("job ", job.job_id(), " failed: ", why);
  v1::Job failed = job;
  failed.set_state(v1::JOB_FAILED);
  failed.set_stop_reason(why);
  failed.set_finished_unix_micros(absl::ToUnixMicros(absl::Now()));
  absl::Status s = PersistJob(failed);
  if (!s.ok()) LogError("job ", job.job_id(), ": persisting its failure: ", s.ToString());
  absl::MutexLock l(&mu_);
  SetSnapshotLocked(failed);
}

void JobManager::SetSnapshotLocked(const v1::Job& job) {
  auto it = jobs_.find(job.job_id());
  metrics_->CountState(it == jobs_.end() ? std::nullopt : std::optional<v1::JobState>(it->second.state()),
                       job.state());
  jobs_[job.job_id()] = job;
}

absl::Status JobManager::PersistJob(const v1::Job& job) {
  return store_->Put(store::Family::kJobs, store::keys::Job(job.job_id()), job.SerializeAsString(),
                     /*sync=*/true);
}

void JobManager::Publish(const Running& r, const v1::Node* node) {
  v1::JobEvent event;
  *event.mutable_job() = r.job;
  if (node != nullptr) *event.mutable_node() = *node;
  ShardOf(r.job.job_id()).unpublished.push_back(std::move(event));
}

void JobManager::PublishSynced(Shard& shard) {
  if (shard.unpublished.empty()) return;
  absl::Status s = store_->Sync();
  if (!s.ok()) {
    // Shown once on disk: the loop tries again within a second.
    LogError("job loop: ", shard.unpublished.size(), " job events wait for the database: ", s.ToString());
    return;
  }
  std::vector<v1::JobEvent> events;
  events.swap(shard.unpublished);
  for (const v1::JobEvent& event : events) ObserveBest(event.job());
  absl::MutexLock l(&mu_);
  for (const v1::JobEvent& event : events) {
    const v1::Job& job = event.job();
    SetSnapshotLocked(job);
    auto range = watchers_.equal_range(job.job_id());
    for (auto it = range.first; it != range.second; ++it) it->second->OnEvent(event);
    if (job.state() != v1::JOB_RUNNING) {
      for (auto it = range.first; it != range.second; ++it) it->second->OnEnd(job);
    }
  }
}

void JobManager::ObserveBest(const v1::Job& job) {
  if (metrics_->task_best != nullptr && job.best_speedup_vs_reference() > 0) {
    const std::string& task = job.spec().task().name();
    const std::string& platform = job.spec().platform();
    metrics_->task_best->Add({{"task", task}, {"platform", platform}, {"baseline", "reference"}})
        .Set(job.best_speedup_vs_reference());
    if (job.best_speedup_vs_production() > 0) {
      metrics_->task_best->Add({{"task", task}, {"platform", platform}, {"baseline", "production"}})
          .Set(job.best_speedup_vs_production());
    }
    const std::string& team = job.spec().team();
    const std::string& family = job.spec().task().op_family();
    metrics_->SetFamilyBest({team, family, platform, "reference"}, task, job.best_speedup_vs_reference());
    metrics_->SetFamilyBest({team, family, platform, "production"}, task, job.best_speedup_vs_production());
  }
}

absl::Status JobManager::Validate(v1::JobSpec spec) {
  spec.mutable_task()->set_name(spec.task().name().empty() ? "unnamed" : spec.task().name());
  return Complete(spec);
}

absl::Status JobManager::Complete(v1::JobSpec& spec) {
  if (spec.task().name().empty()) return absl::InvalidArgumentError("the job has no task");
  if (spec.platform().empty()) return absl::InvalidArgumentError("the job names no platform");
  if (spec.budget().max_evaluations() < 0 || spec.budget().max_wall_seconds() < 0 ||
      spec.budget().stall_evaluations() < 0) {
    return absl::InvalidArgumentError("budget limits must not be negative");
  }
  if (spec.budget().max_evaluations() == 0) spec.mutable_budget()->set_max_evaluations(kDefaultBudget);
  if (spec.policy().empty()) spec.set_policy(search::kDefaultPolicy);
  if (spec.proposer().empty()) spec.set_proposer("builtin");
  KEVO_RETURN_IF_ERROR(search::CreatePolicy(spec.policy()).status());
  KEVO_RETURN_IF_ERROR(proposers_(spec).status());
  return absl::OkStatus();
}

absl::StatusOr<std::string> JobManager::Submit(v1::JobSpec spec, const std::string& job_id) {
  KEVO_RETURN_IF_ERROR(Complete(spec));
  if (spec.require_timing()) KEVO_RETURN_IF_ERROR(scheduler_->CheckTimingAvailable(spec.platform()));
  v1::Job job;
  job.set_job_id(job_id.empty() ? NewJobId() : job_id);
  if (!job_id.empty()) {
    absl::MutexLock l(&mu_);
    if (jobs_.count(job_id) > 0) return absl::AlreadyExistsError(absl::StrCat("job ", job_id, " exists"));
  }
  *job.mutable_spec() = spec;
  job.set_state(v1::JOB_RUNNING);
  job.set_created_unix_micros(absl::ToUnixMicros(absl::Now()));
  job.set_task_hash(Sha256Hex(DeterministicBytes(spec.task())));
  KEVO_RETURN_IF_ERROR(PersistJob(job));
  {
    absl::MutexLock l(&mu_);
    SetSnapshotLocked(job);
  }
  if (metrics_->submitted) metrics_->submitted->Increment();
  LogInfo("job ", job.job_id(), " submitted: task=", spec.task().name(), " platform=",
          spec.platform(), " budget=", spec.budget().max_evaluations(), " policy=", spec.policy(),
          " proposer=", spec.proposer());
  Post(job.job_id(), [this, job] {
    auto r = LoadRunning(job);
    if (!r.ok()) {
      FailJob(job, absl::StrCat("cannot start: ", r.status().message()));
      return;
    }
    Running& running = *(ShardOf(job.job_id()).running[job.job_id()] = std::move(*r));
    if (metrics_->running) metrics_->running->Set(static_cast<double>(++running_count_));
    if (running.job.spec().warm_start()) WarmStart(running);
    Pump(running);
  });
  return job.job_id();
}

absl::StatusOr<std::unique_ptr<JobManager::Running>> JobManager::LoadRunning(const v1::Job& job) {
  auto r = std::make_unique<Running>();
  r->job = job;
  KEVO_ASSIGN_OR_RETURN(r->policy, search::CreatePolicy(job.spec().policy()));
  KEVO_ASSIGN_OR_RETURN(r->proposer, proposers_(job.spec()));
  r->rng.seed(job.spec().seed() ^ std::hash<std::string>()(job.job_id()));
  r->started = absl::FromUnixMicros(job.created_unix_micros());
  if (learning_.priors && !job.spec().no_skills()) {
    r->priors = learning_.priors(job.spec());
    if (!r->priors.empty()) {
      LogInfo("job ", job.job_id(), ": ", r->priors.size(), " proposer priors from skill memory");
    }
  }
  KEVO_ASSIGN_OR_RETURN(std::vector<v1::Node> nodes, ReadNodes(*store_, job.job_id()));
  std::vector<const v1::Node*> all;
  for (const v1::Node& n : nodes) all.push_back(&n);
  r->baselines = BaselineTimes(all);
  std::sort(r->baselines.begin(), r->baselines.end());
  for (const v1::Node& n : nodes) {
    r->tree.Upsert(n);
    r->sources.insert(n.source_hash());
    r->node_by_eval[n.eval_id()] = n.node_id();
    if (!n.retiming().eval_id().empty()) r->node_by_eval[n.retiming().eval_id()] = n.node_id();
  }
  return r;
}

absl::Status JobManager::Recover() {
  std::vector<v1::Job> jobs;
  KEVO_RETURN_IF_ERROR(store_->Scan(store::Family::kJobs, store::keys::kJobPrefix,
                                    [&](std::string_view, std::string_view value) {
                                      v1::Job j;
                                      if (j.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
                                        jobs.push_back(std::move(j));
                                      }
                                      return true;
                                    }));
  for (const v1::Job& job : jobs) {
    {
      absl::MutexLock l(&mu_);
      SetSnapshotLocked(job);
    }
    if (job.state() != v1::JOB_RUNNING) continue;
    auto r = LoadRunning(job);
    if (!r.ok()) {
      // One job that cannot resume (an llm job after a restart without
      // --llm-config, say) fails alone; the coordinator and the other jobs go on.
      FailJob(job, absl::StrCat("cannot resume after the coordinator restarted: ", r.status().message()));
      continue;
    }
    Running& running = *(ShardOf(job.job_id()).running[job.job_id()] = std::move(*r));
    ++running_count_;
    // Apply results the scheduler recorded while the job loop was down: the
    // nodes' own evaluations and the re-timings of would-be bests.
    std::vector<std::string> waiting;
    for (const auto& [id, n] : running.tree.nodes()) {
      if (n.state() == v1::NODE_EVALUATING) waiting.push_back(n.eval_id());
      if (n.state() == v1::NODE_DONE && !n.retiming().eval_id().empty() && !n.retiming().done()) {
        waiting.push_back(n.retiming().eval_id());
      }
    }
    running.in_flight = static_cast<int>(waiting.size());
    for (const std::string& eval_id : waiting) {
      auto record = scheduler_->GetRecord(eval_id);
      if (record.ok() && record->state() == v1::EVAL_DONE) {
        if (!Apply(running, *record)) running.unstored.push_back(*record);
      } else if (!record.ok()) {
        LogError("job ", job.job_id(), " evaluation ", eval_id, ": ", record.status().ToString());
      }
    }
    LogInfo("recovered job ", job.job_id(), ": ", running.tree.size(), " nodes, ",
            running.job.evaluations_done(), " evaluated, ", running.in_flight, " in flight");
  }
  if (metrics_->running) metrics_->running->Set(static_cast<double>(running_count_));
  scheduler_->SetCompletionHook([this](const v1::EvalRecord& record) {
    if (record.job_id().empty()) return;
    v1::EvalRecord copy = record;
    Post(record.job_id(), [this, copy] { OnEvaluationDone(copy); });
  });
  // Resume proposing once the loops run.
  for (auto& shard : shards_) {
    Shard* s = shard.get();
    Post(*s, [this, s] { PumpAll(*s); });
  }
  return absl::OkStatus();
}

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
  const v1::Job job_before = r.job;
  const int in_flight_before = r.in_flight;
  const std::vector<double> baselines_before = r.baselines;
  node.set_state(v1::NODE_DONE);
  v1::Job& job = r.job;
  SetFigures(job, node, e);
  job.set_evaluations_done(job.evaluations_done() + 1);
  // Device timing-slot use over the job's duration (GPU workers report the
  // seconds each evaluation held its GPU's slot).
  if (auto busy = e.profile().find("gpu_stage_s"); busy != e.profile().end()) {
    job.set_device_busy_s(job.device_busy_s() + busy->second);
    auto gpu = e.profile().find("gpu_index");
    r.devices.insert(absl::StrCat(e.fingerprint().host(), "/", gpu == e.profile().end() ? 0 : gpu->second));
    const double wall_s = static_cast<double>(absl::ToUnixMicros(absl::Now()) - job.created_unix_micros()) * 1e-6;
    if (wall_s > 0) {
      job.set_device_utilisation(
          std::min(1.0, job.device_busy_s() / (wall_s * static_cast<double>(r.devices.size()))));
    }
  }
  (*job.mutable_by_status())[v1::EvalStatus_Name(e.status())] += 1;
  r.in_flight = std::max(0, r.in_flight - 1);
  // The node was not done before (Apply), so its baseline is new.
  CountBaseline(r, nullptr, node);
  // A would-be best is evaluated once more before it becomes the best
  // (ApplyRetiming); the job's best stays as it is meanwhile. A simulator's
  // time would come out the same.
  const bool new_best = !node.static_fitness() && node.fitness() > 0 &&
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
      return Unstored(r, job_before, in_flight_before, baselines_before, absl::StrCat("node ", node.node_id(), ": its result and re-timing are"),
                      started);
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
      return Unstored(r, job_before, in_flight_before, baselines_before, absl::StrCat("node ", node.node_id(), ": its result is"), s);
    }
  }
  r.tree.Upsert(node);
  r.proposer->Observe(node, &e);
  LogInfo("job ", job.job_id(), " node ", node.node_id(), " ", v1::EvalStatus_Name(e.status()),
          " fitness=", absl::StrFormat("%.2f", node.fitness()), " [", node.mutation(), "] (",
          job.evaluations_done(), "/", job.spec().budget().max_evaluations(), ", best ", BestLabel(job), ")",
          retiming ? absl::StrCat("; ", node.best_decision(), ": re-timing it (", node.retiming().eval_id(),
                                  ") before it becomes the best")
                   : "");
  Publish(r, &node);
  CheckStop(r);
  return true;
}

absl::Status JobManager::WriteResult(const Running& r, const v1::Node& node) {
  store::Batch batch;
  batch.Put(store::Family::kNodes, store::keys::Node(r.job.job_id(), node.node_id()), node.SerializeAsString());
  batch.Put(store::Family::kJobs, store::keys::Job(r.job.job_id()), r.job.SerializeAsString());
  // Durable at the job loop's next Sync(), before anyone is shown it.
  return store_->Write(batch, /*sync=*/false);
}

bool JobManager::Unstored(Running& r, const v1::Job& job_before, int in_flight_before,
                          const std::vector<double>& baselines_before, const std::string& what,
                          const absl::Status& why) {
  if (!r.said_unstored) {
    LogError("job ", r.job.job_id(), " ", what, " not stored yet (retried every second; the job waits): ",
             why.ToString());
    r.said_unstored = true;
  }
  r.job = job_before;
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
  so.extra.Put(store::Family::kJobs, store::keys::Job(job.job_id()), job.SerializeAsString());
  // Durable at the job loop's next Sync(), as the node's own evaluation is.
  so.sync = false;
  KEVO_RETURN_IF_ERROR(scheduler_->Submit(job.spec().task(), *kernel, job.spec().platform(), std::move(so)).status());
  r.node_by_eval[retiming.eval_id()] = node.node_id();
  return absl::OkStatus();
}

bool JobManager::ApplyRetiming(Running& r, v1::Node node, const v1::Evaluation& e) {
  const v1::Job job_before = r.job;
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
    side_by_side.speedup =
        side_by_side.speedup > 0 ? std::min(first.speedup, side_by_side.speedup) : first.speedup;
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
    verdict = absl::StrCat("not re-timed (", v1::EvalStatus_Name(e.status()), ": ",
                           e.diagnostics().message(), "): its own figure stands");
  } else {
    // A kernel that fails when evaluated again measured nothing the second
    // time: the lower figure is none, and it is not the best.
    outcome = "failed";
    verdict = absl::StrCat("its re-timing failed (", v1::EvalStatus_Name(e.status()), ": ",
                           e.diagnostics().message(), ")");
    node.set_fitness(0);
  }
  const std::string first_decision = node.best_decision();
  if (node.fitness() > 0) {
    const bool best = BecomesBest(job, node, side_by_side, ToolchainOf(e), BestToolchain(r));
    node.set_best_decision(node.best_decision() == first_decision
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
    return Unstored(r, job_before, in_flight_before, baselines_before, absl::StrCat("node ", node.node_id(), ": its re-timing is"), s);
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
  if (b.max_wall_seconds() > 0 &&
      absl::ToDoubleSeconds(absl::Now() - r.started) >= b.max_wall_seconds()) {
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

std::vector<proposer::ParentInfo> JobManager::ParentsFor(const Running& r,
                                                         const std::vector<std::string>& ids) {
  std::vector<proposer::ParentInfo> parents;
  for (const std::string& id : ids) {
    const v1::Node* n = r.tree.Get(id);
    if (n == nullptr) continue;
    proposer::ParentInfo p;
    p.node_id = id;
    p.fitness = n->fitness();
    if (!n->genome().empty()) {
      auto g = proposer::Genome::FromString(n->genome());
      if (g.ok()) p.genome = *g;
    }
    auto record = scheduler_->GetRecord(n->eval_id());
    if (record.ok()) {
      p.evaluation = record->evaluation();
      if (std::optional<v1::Candidate> c = CandidateOf(*record); c.has_value()) p.candidate = *std::move(c);
    }
    // What was already tried from this parent (the next proposals' siblings).
    const std::vector<std::string>& kids = r.tree.Children(id);
    for (size_t i = kids.size() > kMaxChildren ? kids.size() - kMaxChildren : 0; i < kids.size(); ++i) {
      const v1::Node* child = r.tree.Get(kids[i]);
      if (child == nullptr) continue;
      proposer::ChildInfo c;
      c.node_id = child->node_id();
      c.proposer = child->proposer();
      c.mutation = child->mutation();
      c.status = child->status();
      c.fitness = child->fitness();
      if (child->state() == v1::NODE_DONE) {
        auto child_record = scheduler_->GetRecord(child->eval_id());
        if (child_record.ok()) c.message = child_record->evaluation().diagnostics().message();
      }
      p.children.push_back(std::move(c));
    }
    parents.push_back(std::move(p));
  }
  return parents;
}

void JobManager::Pump(Running& r) {
  if (!r.unstored.empty()) {
    std::vector<v1::EvalRecord> retry;
    retry.swap(r.unstored);
    for (const v1::EvalRecord& record : retry) {
      if (!Apply(r, record)) r.unstored.push_back(record);
    }
    if (!r.unstored.empty()) return;  // still not stored: propose nothing, finish nothing
    LogInfo("job ", r.job.job_id(), ": the results that waited for the disk are stored");
    r.said_unstored = false;
  }
  if (!r.stopping) {
    std::string reason = StopReason(r);
    if (!reason.empty()) {
      r.stopping = true;
      r.job.set_stop_reason(reason);
    }
  }
  const v1::JobSpec& spec = r.job.spec();
  int target = spec.max_in_flight() > 0 ? spec.max_in_flight()
                                        : std::max(1, scheduler_->SlotsFor(spec.platform(),
                                                                           spec.require_timing()));
  for (int round = 0; !r.stopping && round < 16 && r.in_flight < target; ++round) {
    int budget_left = spec.budget().max_evaluations() - r.job.evaluations_done() - r.in_flight;
    if (budget_left <= 0) break;
    search::Selection sel = r.policy->Select(r.tree, r.rng);
    if (r.tree.Exhausted(sel.parents)) {
      // The policy has nothing left that could bring a new source.
      r.stopping = true;
      r.job.set_stop_reason("search space exhausted (every proposal was already evaluated)");
      break;
    }
    proposer::ProposeRequest req;
    req.task = &spec.task();
    req.platform = spec.platform();
    req.parents = ParentsFor(r, sel.parents);
    req.count = std::min(budget_left, target - r.in_flight) * r.overask;
    req.seed = r.rng();
    req.priors = r.priors;
    req.use_skills = !spec.no_skills();
    req.job_id = r.job.job_id();
    auto proposals = r.proposer->Propose(req);
    if (!proposals.ok()) {
      LogWarning("job ", r.job.job_id(), ": proposer ", r.proposer->name(), ": ",
                 proposals.status().ToString());
      if (++r.proposer_errors >= kMaxProposerErrors) {
        r.stopping = true;
        r.job.set_stop_reason(absl::StrCat("proposer failed: ", proposals.status().message()));
      }
      continue;
    }
    // A proposer working in the background has nothing yet: ask again on
    // the next tick.
    if (proposals->empty() && r.proposer->Pending()) break;
    bool any = false;
    for (proposer::Proposal& p : *proposals) {
      if (r.in_flight >= target || budget_left <= 0) break;
      std::string hash = SourceHash(p.candidate);
      if (r.sources.contains(hash)) {
        if (metrics_->duplicates) metrics_->duplicates->Increment();
        continue;
      }
      v1::Node node;
      for (const auto& pid : p.parent_ids) node.add_parent_ids(pid);
      node.set_proposer(p.proposer.empty() ? r.proposer->name() : p.proposer);
      node.set_mutation(p.mutation);
      node.set_genome(p.genome.recipe.empty() ? "" : p.genome.ToString());
      int depth = 0;
      if (!p.parent_ids.empty()) {
        const v1::Node* parent = r.tree.Get(p.parent_ids.front());
        if (parent != nullptr) depth = parent->depth() + 1;
      }
      node.set_depth(depth);
      absl::Status submitted = SubmitNode(r, node, p.candidate, hash);
      if (!submitted.ok()) {
        LogError("job ", r.job.job_id(), ": submit: ", submitted.ToString());
        if (submitted.code() == absl::StatusCode::kFailedPrecondition ||
            submitted.code() == absl::StatusCode::kResourceExhausted) {
          // Timing required but only compile-only workers remain, or the
          // team's evaluation quota is spent: the job ends with its best so far.
          r.stopping = true;
          r.job.set_stop_reason(std::string(submitted.message()));
        }
        break;
      }
      --budget_left;
      any = true;
      r.proposer->Observe(node, nullptr);
    }
    if (any) {
      r.empty_rounds = 0;
      r.overask = 1;
    } else if (r.overask >= kMaxOverask) {
      // Asked for the most and still nothing new: the policies pass this
      // selection over from now on.
      r.tree.MarkExhausted(sel.parents);
      r.overask = 1;
      r.empty_rounds = 0;
      LogInfo("job ", r.job.job_id(), ": ",
              sel.parents.empty() ? std::string("seed generation")
                                  : absl::StrCat("expanding ", absl::StrJoin(sel.parents, " x ")),
              " exhausted (", kMaxOverask, "x over-asked, all proposals already evaluated)");
    } else {
      r.overask = std::min(2 * r.overask, kMaxOverask);
      if (++r.empty_rounds >= kMaxEmptyRounds) {
        r.stopping = true;
        r.job.set_stop_reason("search space exhausted (every proposal was already evaluated)");
      }
    }
  }
  MaybeFinish(r);
}

absl::Status JobManager::SubmitNode(Running& r, v1::Node& node, const v1::Candidate& candidate,
                                    const std::string& source_hash) {
  const int seq = static_cast<int>(r.tree.size());
  node.set_node_id(absl::StrFormat("n%05d", seq));
  node.set_job_id(r.job.job_id());
  node.set_source_hash(source_hash);
  node.set_state(v1::NODE_EVALUATING);
  node.set_created_unix_micros(absl::ToUnixMicros(absl::Now()));
  node.set_sequence(seq);
  scheduler::Scheduler::SubmitOptions so;
  so.job_id = r.job.job_id();
  so.eval_id = scheduler::Scheduler::NewEvalId();
  so.require_timing = r.job.spec().require_timing();
  so.team = r.job.spec().team();
  so.priority = r.job.spec().priority();
  node.set_eval_id(so.eval_id);
  // The job's best so far is timed beside the candidate, so that which of the
  // two the job keeps is decided by one side-by-side loop.
  if (std::optional<v1::Candidate> best = BestCandidate(r); best.has_value()) {
    so.rival = *std::move(best);
    so.rival_stored = true;  // BestCandidate read it from the store
    node.set_rival_node_id(r.job.best_node_id());
  }
  // Durable at the job loop's next Sync(), before anyone is shown the node
  // (Publish waits for it).
  so.sync = false;
  so.extra.Put(store::Family::kNodes, store::keys::Node(r.job.job_id(), node.node_id()), node.SerializeAsString());
  KEVO_RETURN_IF_ERROR(
      scheduler_->Submit(r.job.spec().task(), candidate, r.job.spec().platform(), std::move(so)).status());
  r.tree.Upsert(node);
  r.sources.insert(source_hash);
  r.node_by_eval[node.eval_id()] = node.node_id();
  ++r.in_flight;
  r.job.set_nodes(static_cast<int32_t>(r.tree.size()));
  r.job.set_evaluations_in_flight(r.in_flight);
  if (metrics_->nodes) metrics_->nodes->Increment();
  Publish(r, &node);
  return absl::OkStatus();
}

std::optional<v1::Candidate> JobManager::CandidateOf(const v1::EvalRecord& record) {
  auto blob = store_->Get(store::Family::kBlobs, record.candidate_hash());
  v1::Candidate c;
  if (!blob.ok() || !blob->has_value() || !c.ParseFromString(**blob)) return std::nullopt;
  return c;
}

std::optional<v1::Candidate> JobManager::BestCandidate(Running& r) {
  const v1::Job& job = r.job;
  if (job.best_node_id().empty() || job.best_speedup() <= 0) return std::nullopt;  // nothing measured
  if (r.best_candidate_node == job.best_node_id()) return r.best_candidate;
  r.best_candidate_node = job.best_node_id();
  r.best_candidate.reset();
  if (const v1::Node* best = r.tree.Get(job.best_node_id()); best != nullptr) {
    if (auto record = scheduler_->GetRecord(best->eval_id()); record.ok()) r.best_candidate = CandidateOf(*record);
  }
  if (!r.best_candidate.has_value()) {
    LogWarning("job ", job.job_id(), ": the best node ", job.best_node_id(),
               "'s kernel cannot be read; candidates are timed without a rival");
  }
  return r.best_candidate;
}

std::string JobManager::BestToolchain(Running& r) {
  const v1::Job& job = r.job;
  if (job.best_node_id().empty()) return "";
  if (r.best_toolchain_node == job.best_node_id()) return r.best_toolchain;
  r.best_toolchain_node = job.best_node_id();
  r.best_toolchain.clear();
  if (const v1::Node* best = r.tree.Get(job.best_node_id()); best != nullptr) {
    if (auto record = scheduler_->GetRecord(best->eval_id()); record.ok()) r.best_toolchain = ToolchainOf(record->evaluation());
  }
  return r.best_toolchain;
}

void JobManager::WarmStart(Running& r) {
  std::vector<std::pair<std::string, std::string>> earlier;  // job id, node id
  absl::Status s = store_->Scan(
      store::Family::kJobs,
      store::keys::BestPrefix(r.job.task_hash(), r.job.spec().platform()),
      [&](std::string_view key, std::string_view value) {
        std::string k(key);
        earlier.emplace_back(k.substr(k.rfind('/') + 1), std::string(value));
        return true;
      });
  if (!s.ok()) return;
  // The most recent three jobs' best nodes.
  std::reverse(earlier.begin(), earlier.end());
  if (earlier.size() > 3) earlier.resize(3);
  for (const auto& [job_id, node_id] : earlier) {
    auto value = store_->Get(store::Family::kNodes, store::keys::Node(job_id, node_id));
    if (!value.ok() || !value->has_value()) continue;
    v1::Node old;
    if (!old.ParseFromString(**value)) continue;
    auto record = scheduler_->GetRecord(old.eval_id());
    if (!record.ok()) continue;
    std::optional<v1::Candidate> c = CandidateOf(*record);
    if (!c.has_value()) continue;
    std::string hash = SourceHash(*c);
    if (r.sources.contains(hash)) continue;
    v1::Node node;
    node.set_proposer("warm-start");
    node.set_mutation(absl::StrCat("best of job ", job_id, " (", node_id, ")"));
    node.set_genome(old.genome());
    if (!SubmitNode(r, node, *c, hash).ok()) continue;
    LogInfo("job ", r.job.job_id(), " warm-starts from job ", job_id, " node ", node_id);
  }
}

void JobManager::MaybeFinish(Running& r) {
  if (!r.stopping || r.in_flight > 0) {
    Publish(r, nullptr);
    return;
  }
  const v1::Job job_before = r.job;
  v1::Job& job = r.job;
  job.set_state(r.cancelled ? v1::JOB_CANCELLED : v1::JOB_DONE);
  job.set_finished_unix_micros(absl::ToUnixMicros(absl::Now()));
  job.set_evaluations_in_flight(0);
  store::Batch batch;
  batch.Put(store::Family::kJobs, store::keys::Job(job.job_id()), job.SerializeAsString());
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
  LogInfo("job ", job.job_id(), " ", v1::JobState_Name(job.state()), ": ", job.stop_reason(),
          "; best ", BestLabel(job), " (node ", job.best_node_id(),
          ") after ", job.evaluations_done(), " evaluations");
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

absl::StatusOr<v1::Job> JobManager::Get(const std::string& job_id) {
  absl::MutexLock l(&mu_);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("no job ", job_id));
  return it->second;
}

std::vector<v1::Job> JobManager::List() {
  absl::MutexLock l(&mu_);
  std::vector<v1::Job> out;
  for (const auto& [id, j] : jobs_) out.push_back(j);
  return out;
}

absl::StatusOr<v1::Job> JobManager::Cancel(const std::string& job_id) {
  KEVO_ASSIGN_OR_RETURN(v1::Job job, Get(job_id));
  if (job.state() != v1::JOB_RUNNING) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job_id, " is already ", v1::JobState_Name(job.state())));
  }
  Post(job_id, [this, job_id] {
    auto it = ShardOf(job_id).running.find(job_id);
    if (it == ShardOf(job_id).running.end()) return;
    it->second->cancelled = true;
    it->second->stopping = true;
    it->second->job.set_stop_reason("cancelled");
    // Evaluations no worker has taken end now (CANCELLED, through the
    // completion hook like any result); leased ones finish and are recorded.
    const int withdrawn = scheduler_->WithdrawQueued(job_id);
    LogInfo("job ", job_id, " cancelled; ", withdrawn, " queued evaluations withdrawn, ",
            it->second->in_flight - withdrawn, " still finishing");
    MaybeFinish(*it->second);
  });
  return job;
}

absl::StatusOr<std::vector<v1::Node>> JobManager::Nodes(const std::string& job_id) {
  KEVO_RETURN_IF_ERROR(Get(job_id).status());
  return ReadNodes(*store_, job_id);
}

absl::StatusOr<std::vector<v1::Node>> ReadNodes(store::Store& store, const std::string& job_id) {
  std::vector<v1::Node> nodes;
  KEVO_RETURN_IF_ERROR(store.Scan(store::Family::kNodes, store::keys::NodePrefix(job_id),
                                  [&](std::string_view, std::string_view value) {
                                    v1::Node n;
                                    if (n.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
                                      nodes.push_back(std::move(n));
                                    }
                                    return true;
                                  }));
  return nodes;
}

absl::StatusOr<v1::Job> ReadJob(store::Store& store, const std::string& job_id) {
  KEVO_ASSIGN_OR_RETURN(std::optional<std::string> value, store.Get(store::Family::kJobs, store::keys::Job(job_id)));
  v1::Job job;
  if (!value.has_value()) return absl::NotFoundError(absl::StrCat("no job ", job_id));
  if (!job.ParseFromString(*value)) return absl::DataLossError(absl::StrCat("job ", job_id, ": garbled record"));
  return job;
}

std::vector<double> BaselineTimes(const std::vector<const v1::Node*>& nodes) {
  std::vector<double> out;
  for (const v1::Node* n : nodes) {
    if (n->state() == v1::NODE_DONE && !n->static_fitness() && n->baseline_time_s() > 0) {
      out.push_back(n->baseline_time_s());
    }
  }
  return out;
}

double SortedMedian(const std::vector<double>& sorted) {
  if (sorted.empty()) return 0;
  const size_t half = sorted.size() / 2;
  return sorted.size() % 2 == 1 ? sorted[half] : (sorted[half - 1] + sorted[half]) / 2;
}

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  const size_t half = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + half, values.end());
  if (values.size() % 2 == 1) return values[half];
  return (*std::max_element(values.begin(), values.begin() + half) + values[half]) / 2;
}

absl::StatusOr<v1::GetBestResponse> JobManager::GetBest(const std::string& job_id) {
  KEVO_ASSIGN_OR_RETURN(v1::Job job, Get(job_id));
  if (job.best_node_id().empty()) {
    return absl::NotFoundError(absl::StrCat("job ", job_id, " has no correct kernel yet"));
  }
  v1::GetBestResponse resp;
  KEVO_ASSIGN_OR_RETURN(auto value,
                        store_->Get(store::Family::kNodes, store::keys::Node(job_id, job.best_node_id())));
  if (!value.has_value() || !resp.mutable_node()->ParseFromString(*value)) {
    return absl::DataLossError(absl::StrCat("job ", job_id, ": best node record missing"));
  }
  KEVO_ASSIGN_OR_RETURN(v1::EvalRecord record, scheduler_->GetRecord(resp.node().eval_id()));
  *resp.mutable_evaluation() = record.evaluation();
  // The evaluation whose figures stand: the re-timing's when it measured
  // the lower (the node's own one has the same kernel).
  const v1::Retiming& retiming = resp.node().retiming();
  if (retiming.done() && retiming.retimed_fitness() > 0 && retiming.retimed_fitness() < retiming.first_fitness()) {
    if (auto retimed = scheduler_->GetRecord(retiming.eval_id()); retimed.ok()) {
      *resp.mutable_evaluation() = retimed->evaluation();
    }
  }

  KEVO_ASSIGN_OR_RETURN(auto blob, store_->Get(store::Family::kBlobs, record.candidate_hash()));
  if (!blob.has_value() || !resp.mutable_candidate()->ParseFromString(*blob)) {
    return absl::DataLossError(absl::StrCat("job ", job_id, ": best kernel source missing"));
  }
  return resp;
}

absl::Status JobManager::Watch(const std::string& job_id, JobWatcher* watcher) {
  absl::MutexLock l(&mu_);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("no job ", job_id));
  v1::JobEvent event;
  *event.mutable_job() = it->second;
  watcher->OnEvent(event);
  if (it->second.state() != v1::JOB_RUNNING) {
    watcher->OnEnd(it->second);
    return absl::OkStatus();
  }
  watchers_.emplace(job_id, watcher);
  return absl::OkStatus();
}

void JobManager::Unwatch(const std::string& job_id, JobWatcher* watcher) {
  absl::MutexLock l(&mu_);
  auto range = watchers_.equal_range(job_id);
  for (auto it = range.first; it != range.second;) {
    it = it->second == watcher ? watchers_.erase(it) : std::next(it);
  }
}

}  // namespace kevo::jobs
