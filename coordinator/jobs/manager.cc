// The job manager: jobs submitted, recovered after a restart, cancelled and
// read; the job loops (one thread per shard) that run them, and what they
// show once it is on disk. What a loop does with a job is in propose.cc
// (sending work out), results.cc (taking results in) and warm_start.cc.
#include "coordinator/jobs/manager.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"

#include "common/hash.h"
#include "common/log.h"
#include "common/status.h"
#include "coordinator/jobs/best.h"
#include "coordinator/jobs/job_metrics.h"
#include "coordinator/jobs/running.h"
#include "coordinator/jobs/statistics.h"
#include "coordinator/store/keys.h"

namespace kevo::jobs {
namespace {

constexpr int kDefaultBudget = 60;

std::string NewJobId() {
  static absl::Mutex mu(absl::kConstInit);
  static std::mt19937_64* rng = new std::mt19937_64(std::random_device{}());
  absl::MutexLock l(&mu);
  return absl::StrFormat("j-%x-%04x", absl::ToUnixSeconds(absl::Now()), static_cast<uint32_t>((*rng)() & 0xFFFF));
}

}  // namespace

JobManager::JobManager(store::Store* store, scheduler::Scheduler* scheduler, ProposerFactory proposers,
                       std::shared_ptr<prometheus::Registry> registry)
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
      auto ready = [this, &shard]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || !shard.work.empty(); };
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
  failed.set_finished_unix_micros(absl::ToUnixMicros(now_()));
  absl::Status s = PersistJob(failed);
  if (!s.ok()) LogError("job ", job.job_id(), ": persisting its failure: ", s.ToString());
  absl::MutexLock l(&mu_);
  SetSnapshotLocked(failed);
}

void JobManager::SetSnapshotLocked(const v1::Job& job) {
  auto it = jobs_.find(job.job_id());
  metrics_->CountState(it == jobs_.end() ? std::nullopt : std::optional<v1::JobState>(it->second.state()), job.state());
  jobs_[job.job_id()] = job;
}

absl::Status JobManager::PersistJob(v1::Job job) {
  store::Batch batch;
  PutJob(batch, job, /*with_spec=*/true);
  return store_->Write(batch, /*sync=*/true);
}

void JobManager::Publish(const Running& r, const v1::Node* node) {
  Unpublished event;
  event.job_id = r.job.job_id();
  if (node != nullptr) event.node = *node;
  // A running job is read from its loop's copy when shown; one that ended
  // leaves the loop's jobs, so its final state is kept here.
  if (r.job.state() != v1::JOB_RUNNING) event.final = r.job;
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
  std::vector<Unpublished> events;
  events.swap(shard.unpublished);
  // Each job is shown as it is now, once per pass however many events it
  // had: copying the job (its task included) for each event was a tenth of
  // the coordinator's CPU at a thousand evaluations a second.
  std::map<std::string, const v1::Job*> latest;
  for (const Unpublished& event : events) {
    auto running = shard.running.find(event.job_id);
    latest[event.job_id] = running != shard.running.end() ? &running->second->job
                           : event.final.has_value()      ? &*event.final
                                                          : latest[event.job_id];
  }
  for (const auto& [id, job] : latest) {
    if (job != nullptr) ObserveBest(*job);
  }
  absl::MutexLock l(&mu_);
  for (const auto& [id, job] : latest) {
    if (job != nullptr) SetSnapshotLocked(*job);
  }
  for (const Unpublished& event : events) {
    const v1::Job* job = latest[event.job_id];
    auto range = watchers_.equal_range(event.job_id);
    if (job == nullptr || range.first == range.second) continue;
    v1::JobEvent shown;
    *shown.mutable_job() = *job;
    if (event.node.has_value()) *shown.mutable_node() = *event.node;
    for (auto it = range.first; it != range.second; ++it) it->second->OnEvent(shown);
  }
  for (const auto& [id, job] : latest) {
    if (job == nullptr || job->state() == v1::JOB_RUNNING) continue;
    auto range = watchers_.equal_range(id);
    for (auto it = range.first; it != range.second; ++it) it->second->OnEnd(*job);
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
  job.set_created_unix_micros(absl::ToUnixMicros(now_()));
  job.set_task_hash(Sha256Hex(DeterministicBytes(spec.task())));
  KEVO_RETURN_IF_ERROR(PersistJob(job));
  {
    absl::MutexLock l(&mu_);
    SetSnapshotLocked(job);
  }
  if (metrics_->submitted) metrics_->submitted->Increment();
  LogInfo("job ", job.job_id(), " submitted: task=", spec.task().name(), " platform=", spec.platform(),
          " budget=", spec.budget().max_evaluations(), " policy=", spec.policy(), " proposer=", spec.proposer());
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
    if (!n.genome().empty()) r->genomes.insert(n.genome());
    if (!n.code_hash().empty()) r->sources.insert(n.code_hash());
    r->node_by_eval[n.eval_id()] = n.node_id();
    if (!n.retiming().eval_id().empty()) r->node_by_eval[n.retiming().eval_id()] = n.node_id();
  }
  return r;
}

absl::Status JobManager::Recover() {
  std::vector<v1::Job> jobs;
  KEVO_RETURN_IF_ERROR(
      store_->Scan(store::Family::kJobs, store::keys::kJobPrefix, [&](std::string_view, std::string_view value) {
        v1::Job j;
        if (j.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
          jobs.push_back(std::move(j));
        }
        return true;
      }));
  for (v1::Job& job : jobs) {
    if (absl::Status s = JoinSpec(*store_, job); !s.ok()) {
      // Without its spec the job cannot resume or be shown whole: it ends
      // FAILED with the reason, and the others start.
      LogError("job ", job.job_id(), ": ", s.ToString());
      if (job.state() == v1::JOB_RUNNING) {
        job.set_state(v1::JOB_FAILED);
        job.set_stop_reason(absl::StrCat("cannot resume after the coordinator restarted: ", s.message()));
      }
    }
  }
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
    // Its first write stores the spec apart again: a record an older
    // coordinator wrote holds it inline only, and the writes after leave it out.
    running.spec_unstored = true;
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
    LogInfo("recovered job ", job.job_id(), ": ", running.tree.size(), " nodes, ", running.job.evaluations_done(),
            " evaluated, ", running.in_flight, " in flight");
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
    return absl::FailedPreconditionError(absl::StrCat("job ", job_id, " is already ", v1::JobState_Name(job.state())));
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

absl::StatusOr<v1::GetBestResponse> JobManager::GetBest(const std::string& job_id) {
  KEVO_ASSIGN_OR_RETURN(v1::Job job, Get(job_id));
  if (job.best_node_id().empty()) {
    return absl::NotFoundError(absl::StrCat("job ", job_id, " has no correct kernel yet"));
  }
  v1::GetBestResponse resp;
  KEVO_ASSIGN_OR_RETURN(auto value, store_->Get(store::Family::kNodes, store::keys::Node(job_id, job.best_node_id())));
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
