#include "coordinator/scheduler/scheduler.h"

#include <algorithm>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "common/hash.h"
#include "common/log.h"
#include "common/status.h"
#include "coordinator/store/keys.h"

namespace kevo::scheduler {
namespace {

std::string NewId(std::string_view prefix) {
  static absl::Mutex mu(absl::kConstInit);
  static std::mt19937_64* rng = new std::mt19937_64(std::random_device{}());
  absl::MutexLock l(&mu);
  return absl::StrFormat("%s-%x-%08x", std::string(prefix), absl::ToUnixSeconds(absl::Now()),
                         static_cast<uint32_t>((*rng)()));
}

int64_t NowMs() { return absl::ToUnixMillis(absl::Now()); }

}  // namespace

struct Scheduler::Metrics {
  prometheus::Family<prometheus::Counter>* results = nullptr;
  prometheus::Counter* submitted = nullptr;
  prometheus::Counter* leases = nullptr;
  prometheus::Counter* requeued = nullptr;
  prometheus::Counter* duplicates = nullptr;
  prometheus::Counter* refused = nullptr;
  prometheus::Counter* lost = nullptr;
  prometheus::Gauge* workers = nullptr;
  prometheus::Gauge* queued = nullptr;
  prometheus::Family<prometheus::Gauge>* queued_family = nullptr;
  std::map<std::pair<std::string, std::string>, prometheus::Gauge*> queued_by;  // platform, team
  prometheus::Family<prometheus::Histogram>* wait = nullptr;
  prometheus::Histogram* latency = nullptr;

  explicit Metrics(prometheus::Registry* r) {
    if (r == nullptr) return;
    results = &prometheus::BuildCounter()
                   .Name("kevo_coordinator_evaluations_total")
                   .Help("Evaluations recorded, by final status, platform and team (empty without --auth)")
                   .Register(*r);
    submitted = &prometheus::BuildCounter()
                     .Name("kevo_coordinator_evaluations_submitted_total")
                     .Help("Evaluations submitted")
                     .Register(*r)
                     .Add({});
    leases = &prometheus::BuildCounter()
                  .Name("kevo_coordinator_leases_total")
                  .Help("Evaluations leased to workers (attempts)")
                  .Register(*r)
                  .Add({});
    requeued = &prometheus::BuildCounter()
                    .Name("kevo_coordinator_requeued_total")
                    .Help("Leases that lapsed or whose worker vanished")
                    .Register(*r)
                    .Add({});
    duplicates = &prometheus::BuildCounter()
                      .Name("kevo_coordinator_duplicate_results_total")
                      .Help("Results dropped because the evaluation was already recorded")
                      .Register(*r)
                      .Add({});
    refused = &prometheus::BuildCounter()
                   .Name("kevo_coordinator_refused_results_total")
                   .Help("Results refused because the sending worker did not hold the evaluation's lease")
                   .Register(*r)
                   .Add({});
    lost = &prometheus::BuildCounter()
                .Name("kevo_coordinator_workers_lost_total")
                .Help(
                    "Leases whose worker was lost mid-evaluation (its stream ended, or it never came back "
                    "after a coordinator restart); at the limit the evaluation is quarantined")
                .Register(*r)
                .Add({});
    workers = &prometheus::BuildGauge()
                   .Name("kevo_coordinator_workers_connected")
                   .Help("Connected workers")
                   .Register(*r)
                   .Add({});
    queued = &prometheus::BuildGauge()
                  .Name("kevo_coordinator_queue_depth")
                  .Help("Evaluations waiting for a worker")
                  .Register(*r)
                  .Add({});
    queued_family = &prometheus::BuildGauge()
                         .Name("kevo_coordinator_queued_evaluations")
                         .Help("Evaluations waiting for a worker, by platform and team")
                         .Register(*r);
    wait = &prometheus::BuildHistogram()
                .Name("kevo_coordinator_queue_wait_seconds")
                .Help("Time from entering the queue to a lease, by platform and team")
                .Register(*r);
    latency = &prometheus::BuildHistogram()
                   .Name("kevo_coordinator_evaluation_seconds")
                   .Help("Submit-to-result latency of evaluations")
                   .Register(*r)
                   .Add({}, prometheus::Histogram::BucketBoundaries{0.5, 1, 2, 5, 10, 30, 60, 120, 300});
  }
};

Scheduler::Scheduler(store::Store* store, SchedulerOptions options, std::shared_ptr<prometheus::Registry> registry)
    : store_(store),
      options_(options),
      registry_(std::move(registry)),
      metrics_(std::make_unique<Metrics>(registry_.get())) {}

Scheduler::~Scheduler() { Stop(); }

absl::Status Scheduler::Recover() {
  std::vector<v1::EvalRecord> pending;
  int64_t max_sequence = 0;
  absl::Status s =
      store_->Scan(store::Family::kEvals, store::keys::kEvalPrefix, [&](std::string_view, std::string_view value) {
        v1::EvalRecord r;
        if (!r.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
          return true;
        }
        max_sequence = std::max(max_sequence, r.sequence());
        if (r.state() == v1::EVAL_QUEUED || r.state() == v1::EVAL_LEASED) {
          pending.push_back(std::move(r));
        }
        return true;
      });
  if (!s.ok()) return s;
  absl::MutexLock l(&mu_);
  next_sequence_ = max_sequence + 1;
  for (auto& r : pending) {
    Active a;
    auto task = store_->Get(store::Family::kTasks, r.task_hash());
    auto cand = store_->Get(store::Family::kBlobs, r.candidate_hash());
    if (!task.ok()) return task.status();
    if (!cand.ok()) return cand.status();
    v1::Task parsed;
    if (!task->has_value() || !parsed.ParseFromString(**task) || !cand->has_value() ||
        !a.candidate.ParseFromString(**cand)) {
      LogError("evaluation ", r.eval_id(), " lost its task or candidate blob; skipping");
      continue;
    }
    a.task = InternTaskLocked(r.task_hash(), parsed);
    if (!r.rival_hash().empty()) {
      // The rival only decides which kernel the job keeps; without it the
      // evaluation still runs and the job falls back to fitness.
      auto rival = store_->Get(store::Family::kBlobs, r.rival_hash());
      if (!rival.ok() || !rival->has_value() || !a.rival.emplace().ParseFromString(**rival)) {
        a.rival.reset();
        LogWarning("evaluation ", r.eval_id(), " lost its rival's blob; it runs without one");
      }
    }
    bool was_leased = r.state() == v1::EVAL_LEASED;
    if (was_leased) {
      // The worker may still be running it and will reconnect: give it one
      // lease period to report (or to renew through heartbeats) before the
      // evaluation returns to the queue. This avoids evaluating it twice.
      r.set_lease_deadline_unix_ms(NowMs() + absl::ToInt64Milliseconds(options_.lease));
    } else {
      queue_[r.platform()][r.sequence()] = r.eval_id();
    }
    a.queued_ms = NowMs();
    a.record = r;
    std::string id = r.eval_id();
    active_[id] = std::move(a);
    LogInfo("recovered evaluation ", id,
            was_leased ? absl::StrCat(" (leased to ", r.lease_worker(), "; awaiting it)") : std::string(" (queued)"));
  }
  if (metrics_->queued) metrics_->queued->Set(static_cast<double>(active_.size()));
  return absl::OkStatus();
}

void Scheduler::Start() {
  expiry_thread_ = std::thread([this] { ExpiryLoop(); });
}

void Scheduler::Stop() {
  {
    absl::MutexLock l(&mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  if (expiry_thread_.joinable()) expiry_thread_.join();
}

void Scheduler::PersistLocked(const v1::EvalRecord& record, bool sync) {
  pending_writes_.push_back({record, sync, std::nullopt, std::nullopt});
}

void Scheduler::FlushWrites() {
  while (true) {
    // One caller writes at a time; the others go on at once: the writer
    // looks for what they queued before it lets go.
    if (!writer_mu_.TryLock()) return;
    while (true) {
      std::vector<PendingWrite> writes;
      {
        absl::MutexLock l(&mu_);
        writes.swap(pending_writes_);
      }
      if (writes.empty()) break;
      store::Batch batch;
      bool sync = false;
      for (const PendingWrite& p : writes) {
        batch.Put(store::Family::kEvals, store::keys::Eval(p.record.eval_id()), p.record.SerializeAsString());
        sync = sync || p.sync;
      }
      absl::Status s = store_->Write(batch, sync);
      if (!s.ok()) {
        LogError("persist ", writes.size(), " evaluation record(s), the first ", writes.front().record.eval_id(), ": ",
                 s.ToString());
      }
      absl::MutexLock l(&mu_);
      for (const PendingWrite& p : writes) {
        auto range = listeners_.equal_range(p.record.eval_id());
        for (auto it = range.first; it != range.second; ++it) {
          if (p.stage.has_value()) it->second->OnStage(*p.stage);
          if (p.final.has_value()) it->second->OnFinal(*p.final);
        }
      }
    }
    writer_mu_.Unlock();
    // Queued between the last look and the unlock, by a caller whose TryLock
    // failed: write it now.
    absl::MutexLock l(&mu_);
    if (pending_writes_.empty()) return;
  }
}

std::string Scheduler::AddWorker(const v1::Hello& hello, SendFn send, std::function<void()> drop) {
  FlushOnExit flush{this};  // after the lock is released
  absl::MutexLock l(&mu_);
  std::string id = hello.worker_id();
  if (id.empty() || workers_.contains(id)) id = NewId("w");
  Worker w;
  w.hello = hello;
  w.hello.set_worker_id(id);
  w.send = std::move(send);
  w.drop = std::move(drop);
  w.connected_unix_micros = absl::ToUnixMicros(absl::Now());
  w.last_heard_ms = NowMs();
  // A worker reconnecting under its old id (e.g. after a coordinator
  // restart) still holds the leases it had.
  for (const auto& [eval_id, a] : active_) {
    if (a.record.state() == v1::EVAL_LEASED && a.record.lease_worker() == id) w.busy.insert(eval_id);
  }
  workers_[id] = std::move(w);
  SyncFreeLocked(id);
  if (metrics_->workers) metrics_->workers->Set(static_cast<double>(workers_.size()));
  LogInfo("worker connected id=", id, " platform=", hello.platform(), " device=\"", hello.device(),
          "\" slots=", hello.slots(), hello.compile_only() ? " compile-only" : "");
  v1::CoordinatorMessage welcome;
  welcome.mutable_welcome()->set_worker_id(id);
  welcome.mutable_welcome()->set_lease_seconds(static_cast<int32_t>(absl::ToInt64Seconds(options_.lease)));
  welcome.mutable_welcome()->set_heartbeat_seconds(
      std::max<int32_t>(1, static_cast<int32_t>(absl::ToInt64Seconds(options_.heartbeat))));
  workers_[id].send(welcome);
  DispatchLocked();
  return id;
}

void Scheduler::RemoveWorker(const std::string& worker_id, bool lost) {
  FlushOnExit flush{this};  // after the lock is released
  absl::MutexLock l(&mu_);
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) return;
  std::set<std::string> busy = std::move(it->second.busy);
  workers_.erase(it);
  SyncFreeLocked(worker_id);
  if (metrics_->workers) metrics_->workers->Set(static_cast<double>(workers_.size()));
  // A stream the coordinator itself is closing says nothing about the worker.
  lost = lost && !shutting_down_;
  LogInfo("worker disconnected id=", worker_id, " leases_returned=", busy.size(), lost ? "" : " (not lost)");
  for (const std::string& eval_id : busy) {
    auto a = active_.find(eval_id);
    if (a != active_.end() && a->second.record.state() == v1::EVAL_LEASED &&
        a->second.record.lease_worker() == worker_id) {
      if (lost) {
        LostLocked(a, absl::StrCat("worker ", worker_id, " disconnected mid-evaluation"));
      } else {
        RequeueLocked(a->second, absl::StrCat("worker ", worker_id, " disconnected"));
      }
    }
  }
  DispatchLocked();
}

void Scheduler::PrepareShutdown() {
  absl::MutexLock l(&mu_);
  shutting_down_ = true;
}

void Scheduler::LostLocked(std::map<std::string, Active>::iterator a, const std::string& why) {
  v1::EvalRecord& r = a->second.record;
  r.set_workers_lost(r.workers_lost() + 1);
  if (metrics_->lost) metrics_->lost->Increment();
  const int limit = options_.max_worker_losses;
  if (limit <= 0 || r.workers_lost() < limit) {
    // Persisted with the requeue, so a coordinator restart keeps the count.
    RequeueLocked(a->second, absl::StrCat(why, " (", r.workers_lost(), " worker", r.workers_lost() == 1 ? "" : "s",
                                          " lost while running it",
                                          limit > 0 ? absl::StrCat("; quarantined at ", limit) : "", ")"));
    return;
  }
  v1::Evaluation ev;
  ev.set_status(v1::QUARANTINED);
  ev.set_task_name(a->second.task->name());
  ev.set_platform(r.platform());
  ev.mutable_diagnostics()->set_message(
      absl::StrCat("quarantined: ", r.workers_lost(), " workers were lost while running it (the last: ", why,
                   "); it is not requeued, so that it cannot take down more workers. Look at what the task "
                   "asks for and what the candidate does, in the logs of the workers it was leased to"));
  LogWarning("evaluation ", r.eval_id(), " attempt=", r.attempt(), ": ", ev.diagnostics().message());
  const int attempt = r.attempt();
  RecordLocked(a, std::move(ev), attempt, "");
}

void Scheduler::SilenceLocked(const std::string& worker_id, Worker& w, int64_t now_ms) {
  w.silent = true;
  const std::string quiet = absl::FormatDuration(absl::Milliseconds(now_ms - w.last_heard_ms));
  LogWarning("worker ", worker_id, " sent nothing for ", quiet, " (heartbeats are due every ",
             absl::FormatDuration(options_.heartbeat), "): cut off or stopped; its leases return to the queue, ",
             "it is leased nothing more, and its stream is ended so that it reconnects when it can");
  for (const std::string& eval_id : w.busy) {
    auto a = active_.find(eval_id);
    if (a != active_.end() && a->second.record.state() == v1::EVAL_LEASED &&
        a->second.record.lease_worker() == worker_id) {
      RequeueLocked(a->second, absl::StrCat("worker ", worker_id, " held the lease and sent nothing for ", quiet,
                                            " (cut off from the network, or stopped)"));
    }
  }
  w.busy.clear();
  SyncFreeLocked(worker_id);
  if (w.drop) w.drop();
}

void Scheduler::RequeueLocked(Active& active, const std::string& why) {
  v1::EvalRecord& r = active.record;
  LogWarning("requeue evaluation ", r.eval_id(), " attempt=", r.attempt(), ": ", why);
  r.set_state(v1::EVAL_QUEUED);
  r.clear_lease_worker();
  r.set_lease_deadline_unix_ms(0);
  queue_[r.platform()][r.sequence()] = r.eval_id();
  active.queued_ms = NowMs();
  if (metrics_->requeued) metrics_->requeued->Increment();
  PersistLocked(r, /*sync=*/true);
  v1::StageEvent ev;
  ev.set_stage(v1::STAGE_QUEUED);
  ev.set_ok(true);
  ev.set_message(absl::StrCat("requeued: ", why));
  ev.set_unix_micros(absl::ToUnixMicros(absl::Now()));
  pending_writes_.back().stage = std::move(ev);  // told once written
}

const std::map<std::string, int>& Scheduler::LeaseCounts::ByTeam() {
  if (!counted_) {
    for (const auto& [id, a] : scheduler_.active_) {
      if (a.record.state() == v1::EVAL_LEASED && a.record.platform() == platform_) ++by_team_[a.record.team()];
    }
    counted_ = true;
  }
  return by_team_;
}

void Scheduler::SyncFreeLocked(const std::string& id) {
  auto w = workers_.find(id);
  if (w != workers_.end() && !w->second.silent &&
      static_cast<int>(w->second.busy.size()) < std::max(1, w->second.hello.slots())) {
    free_[w->second.hello.platform()].insert(id);
    return;
  }
  // Gone, silent or full: out of whichever platform's set holds it.
  for (auto& [platform, ids] : free_) ids.erase(id);
}

std::map<int64_t, std::string>::iterator Scheduler::PickLocked(std::map<int64_t, std::string>& queue, const Worker& w,
                                                               LeaseCounts& leased) {
  // Weighted max-min fair share by progressive filling: the next slot goes to
  // the team with the fewest leases per unit of weight on this platform; in a
  // team, the highest priority (a campaign's) first, then the oldest.
  struct Head {
    std::map<int64_t, std::string>::iterator it;
    int32_t priority;
  };
  std::map<std::string, Head> heads;  // each team's next evaluation
  for (auto it = queue.begin(); it != queue.end(); ++it) {
    auto a = active_.find(it->second);
    if (a == active_.end() || a->second.record.state() != v1::EVAL_QUEUED) return it;  // stale: drop it
    const v1::EvalRecord& r = a->second.record;
    if (r.require_timing() && w.hello.compile_only()) continue;  // this worker cannot answer it
    auto [head, fresh] = heads.try_emplace(r.team(), Head{it, r.priority()});
    if (!fresh && r.priority() > head->second.priority) head->second = Head{it, r.priority()};
  }
  // One team: its head, with no shares to compare.
  if (heads.size() == 1) return heads.begin()->second.it;
  auto best = queue.end();
  double best_share = 0;
  const std::map<std::string, int>& leased_by_team = leased.ByTeam();
  for (const auto& [team, head] : heads) {
    auto n = leased_by_team.find(team);
    const double share = (n == leased_by_team.end() ? 0 : n->second) / TeamWeightLocked(team);
    // Between teams of equal share, the older evaluation.
    if (best == queue.end() || share < best_share || (share == best_share && head.it->first < best->first)) {
      best = head.it;
      best_share = share;
    }
  }
  return best;
}

double Scheduler::TeamWeightLocked(const std::string& team) {
  if (!team_weight_) return 1.0;
  const double w = team_weight_(team);
  return w > 0 ? w : 1.0;
}

void Scheduler::SetAdmission(std::function<absl::Status(const std::string&)> admission) {
  absl::MutexLock l(&mu_);
  admission_ = std::move(admission);
}

void Scheduler::SetTeamWeights(std::function<double(const std::string&)> weight) {
  absl::MutexLock l(&mu_);
  team_weight_ = std::move(weight);
}

void Scheduler::DispatchToLocked(const std::string& worker_id, Worker& w, std::map<int64_t, std::string>& q,
                                 LeaseCounts& leased) {
  while (!q.empty() && static_cast<int>(w.busy.size()) < std::max(1, w.hello.slots())) {
    auto next = PickLocked(q, w, leased);
    if (next == q.end()) break;  // nothing this worker can answer
    std::string eval_id = next->second;
    q.erase(next);
    auto a = active_.find(eval_id);
    if (a == active_.end() || a->second.record.state() != v1::EVAL_QUEUED) continue;
    leased.Add(a->second.record.team());
    v1::EvalRecord& r = a->second.record;
    r.set_state(v1::EVAL_LEASED);
    r.set_attempt(r.attempt() + 1);
    r.set_lease_worker(worker_id);
    r.set_lease_deadline_unix_ms(NowMs() + absl::ToInt64Milliseconds(options_.lease));
    a->second.last_progress_ms = NowMs();
    // Not synced: a lease lost with the host's power is recovered as a
    // queued evaluation, as every lease is after a restart, and a result
    // for it from the attempt the coordinator no longer knows is refused.
    // One synced write fewer per evaluation (docs/benchmarks.md, "Control
    // plane").
    PersistLocked(r, /*sync=*/false);
    w.busy.insert(eval_id);
    if (metrics_->leases) metrics_->leases->Increment();
    if (metrics_->wait != nullptr) {
      metrics_->wait
          ->Add({{"platform", r.platform()}, {"team", r.team()}},
                prometheus::Histogram::BucketBoundaries{0.1, 1, 5, 30, 120, 600, 1800})
          .Observe(static_cast<double>(NowMs() - a->second.queued_ms) / 1000.0);
    }
    v1::CoordinatorMessage m;
    v1::Assignment* as = m.mutable_assignment();
    as->set_eval_id(eval_id);
    as->set_attempt(r.attempt());
    if (w.hello.holds_tasks() && !r.task_hash().empty()) {
      // Whole the first time this stream is sent it (or once it fell out of
      // the last kTasksNamed sent whole), then by its hash alone.
      as->set_task_hash(r.task_hash());
      if (std::find(w.tasks_sent.begin(), w.tasks_sent.end(), r.task_hash()) == w.tasks_sent.end()) {
        *as->mutable_task() = *a->second.task;
        w.tasks_sent.push_back(r.task_hash());
        if (w.tasks_sent.size() > kTasksNamed) w.tasks_sent.pop_front();
      }
    } else {
      *as->mutable_task() = *a->second.task;
    }
    *as->mutable_candidate() = a->second.candidate;
    if (a->second.rival.has_value()) *as->mutable_rival() = *a->second.rival;
    as->set_lease_deadline_unix_ms(r.lease_deadline_unix_ms());
    LogInfo("lease evaluation ", eval_id, " attempt=", r.attempt(), " to worker ", worker_id);
    w.send(std::move(m));
    v1::StageEvent ev;
    ev.set_stage(v1::STAGE_ASSIGNED);
    ev.set_ok(true);
    ev.set_worker_id(worker_id);
    ev.set_attempt(r.attempt());
    ev.set_message(absl::StrCat("leased to ", worker_id, " (attempt ", r.attempt(), ")"));
    ev.set_unix_micros(absl::ToUnixMicros(absl::Now()));
    auto range = listeners_.equal_range(eval_id);
    for (auto it = range.first; it != range.second; ++it) it->second->OnStage(ev);
  }
}

void Scheduler::DispatchLocked() {
  if (stopping_) return;
  // Nothing queued (a fleet that answers faster than its jobs propose): no
  // walk over the evaluations and workers below.
  if (std::all_of(queue_.begin(), queue_.end(), [](const auto& q) { return q.second.empty(); })) return;
  for (auto& [platform, q] : queue_) {
    if (q.empty()) continue;
    auto free = free_.find(platform);
    if (free == free_.end()) continue;
    LeaseCounts leased(*this, platform);
    for (auto id = free->second.begin(); id != free->second.end() && !q.empty();) {
      auto worker = workers_.find(*id);
      if (worker == workers_.end() || worker->second.silent) {  // SyncFreeLocked keeps none such: never
        id = free->second.erase(id);
        continue;
      }
      Worker& w = worker->second;
      DispatchToLocked(worker->first, w, q, leased);
      id = static_cast<int>(w.busy.size()) < std::max(1, w.hello.slots()) ? std::next(id) : free->second.erase(id);
    }
  }
  if (metrics_->queued) {
    size_t n = 0;
    std::map<std::pair<std::string, std::string>, int> by;  // platform, team
    for (const auto& [p, q] : queue_) {
      n += q.size();
      for (const auto& [seq, id] : q) {
        auto a = active_.find(id);
        if (a != active_.end() && a->second.record.state() == v1::EVAL_QUEUED) ++by[{p, a->second.record.team()}];
      }
    }
    metrics_->queued->Set(static_cast<double>(n));
    // Series that emptied go to 0 rather than keep their last value.
    for (auto& [key, gauge] : metrics_->queued_by) gauge->Set(0);
    for (const auto& [key, count] : by) {
      auto& g = metrics_->queued_by[key];
      if (g == nullptr) g = &metrics_->queued_family->Add({{"platform", key.first}, {"team", key.second}});
      g->Set(count);
    }
  }
}

void Scheduler::OnWorkerMessage(const std::string& worker_id, const v1::WorkerMessage& message) {
  FlushOnExit flush{this};  // after the lock is released
  absl::MutexLock l(&mu_);
  auto w = workers_.find(worker_id);
  if (w == workers_.end()) return;
  w->second.last_heard_ms = NowMs();
  switch (message.msg_case()) {
    case v1::WorkerMessage::kHeartbeat: {
      int64_t deadline = NowMs() + absl::ToInt64Milliseconds(options_.lease);
      auto extend = [&](const std::string& eval_id) {
        auto a = active_.find(eval_id);
        if (a != active_.end() && a->second.record.state() == v1::EVAL_LEASED &&
            a->second.record.lease_worker() == worker_id) {
          a->second.record.set_lease_deadline_unix_ms(deadline);
        }
      };
      for (const v1::RunningEvaluation& running : message.heartbeat().running_evaluations()) {
        extend(running.eval_id());
      }
      // Workers older than running_evaluations: "eval_id/attempt" text.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
      for (const std::string& running : message.heartbeat().running()) extend(running.substr(0, running.find('/')));
#pragma GCC diagnostic pop
      break;
    }
    case v1::WorkerMessage::kEvent: {
      const v1::EvalEvent& e = message.event();
      auto a = active_.find(e.eval_id());
      if (a == active_.end() || a->second.record.attempt() != e.attempt() ||
          a->second.record.lease_worker() != worker_id) {
        break;  // only the lease holder reports on an evaluation
      }
      a->second.last_progress_ms = NowMs();
      v1::StageEvent ev = e.event();
      ev.set_worker_id(worker_id);
      ev.set_attempt(e.attempt());
      *a->second.record.add_events() = ev;
      auto range = listeners_.equal_range(e.eval_id());
      for (auto it = range.first; it != range.second; ++it) it->second->OnStage(ev);
      break;
    }
    case v1::WorkerMessage::kResult:
      OnResultLocked(worker_id, message.result());
      break;
    default:
      break;
  }
}

void Scheduler::OnResultLocked(const std::string& worker_id, const v1::EvalResult& result) {
  auto w = workers_.find(worker_id);
  if (w != workers_.end()) {
    w->second.busy.erase(result.eval_id());
    SyncFreeLocked(worker_id);
  }
  auto a = active_.find(result.eval_id());
  if (a == active_.end()) {
    // Already recorded, or never issued: idempotent drop.
    if (metrics_->duplicates) metrics_->duplicates->Increment();
    LogInfo("drop result for ", result.eval_id(), " attempt=", result.attempt(), " from ", worker_id,
            " (already recorded or unknown)");
    DispatchLocked();
    return;
  }
  v1::EvalRecord& r = a->second.record;
  // Only the worker that holds the evaluation's current lease may answer it:
  // a worker whose lease lapsed (the evaluation is queued again or leased to
  // another), or one that was never leased it, is refused and the record
  // stays as it was.
  if (r.state() != v1::EVAL_LEASED || r.lease_worker() != worker_id || result.attempt() != r.attempt()) {
    if (metrics_->refused) metrics_->refused->Increment();
    LogWarning("refused result for ", result.eval_id(), " attempt=", result.attempt(), " from ", worker_id,
               ": not its lease holder (state ", v1::EvalState_Name(r.state()), ", attempt ", r.attempt(),
               r.lease_worker().empty() ? "" : absl::StrCat(", leased to ", r.lease_worker()), ")");
    DispatchLocked();
    return;
  }
  RecordLocked(a, result.evaluation(), result.attempt(), worker_id);
  DispatchLocked();
}

void Scheduler::RecordLocked(std::map<std::string, Active>::iterator a, v1::Evaluation ev, int attempt,
                             const std::string& worker_id) {
  v1::EvalRecord& r = a->second.record;
  for (auto& [platform, q] : queue_) q.erase(r.sequence());
  // What the coordinator knows it stamps, whatever the worker said.
  ev.set_eval_id(r.eval_id());
  ev.set_candidate_hash(r.candidate_hash());
  ev.set_attempt(attempt);
  ev.set_worker_id(worker_id);
  ev.set_created_unix_micros(r.created_unix_micros());
  ev.set_finished_unix_micros(absl::ToUnixMicros(absl::Now()));
  r.set_state(v1::EVAL_DONE);
  r.clear_lease_worker();
  *r.mutable_evaluation() = ev;
  // A job's result becomes durable with its job loop's next Store::Sync(),
  // before the job shows it to anyone (until then a result lost with the
  // host's power is evaluated again after the restart, and nobody was told
  // it). A result a client asked for directly is synced before its
  // listeners hear it (FlushWrites).
  PersistLocked(r, /*sync=*/r.job_id().empty());
  pending_writes_.back().final = ev;
  LogInfo("recorded evaluation ", r.eval_id(), " attempt=", attempt, " status=", v1::EvalStatus_Name(ev.status()),
          " speedup=", ev.speedup(), " worker=", worker_id);
  if (metrics_->results) {
    metrics_->results
        ->Add({{"status", v1::EvalStatus_Name(ev.status())}, {"platform", r.platform()}, {"team", r.team()}})
        .Increment();
    metrics_->latency->Observe(static_cast<double>(ev.finished_unix_micros() - r.created_unix_micros()) / 1e6);
  }
  if (completion_hook_) completion_hook_(r);
  active_.erase(a);
}

int Scheduler::WithdrawQueued(const std::string& job_id) {
  FlushOnExit flush{this};  // after the lock is released
  absl::MutexLock l(&mu_);
  std::vector<std::string> queued;
  for (const auto& [id, a] : active_) {
    if (a.record.job_id() == job_id && a.record.state() == v1::EVAL_QUEUED) queued.push_back(id);
  }
  for (const std::string& id : queued) {
    auto a = active_.find(id);
    v1::Evaluation ev;
    ev.set_status(v1::CANCELLED);
    ev.set_task_name(a->second.task->name());
    ev.mutable_diagnostics()->set_message("cancelled with its job before a worker took it");
    RecordLocked(a, std::move(ev), a->second.record.attempt(), "");
  }
  if (!queued.empty()) LogInfo("withdrew ", queued.size(), " queued evaluations of cancelled job ", job_id);
  return static_cast<int>(queued.size());
}

std::string Scheduler::NewEvalId() { return NewId("e"); }

bool Scheduler::ServedLocked(const std::string& platform) {
  for (const auto& [id, w] : workers_) {
    if (w.hello.platform() == platform && !w.silent) return true;
  }
  return false;
}

int Scheduler::SlotsFor(const std::string& platform, bool timing_only) {
  absl::MutexLock l(&mu_);
  int slots = 0;
  for (const auto& [id, w] : workers_) {
    if (w.hello.platform() != platform || w.silent || (timing_only && w.hello.compile_only())) continue;
    slots += std::max(1, w.hello.slots());
  }
  return slots;
}

absl::Status Scheduler::CheckTimingAvailable(const std::string& platform) {
  absl::MutexLock l(&mu_);
  return CheckTimingAvailableLocked(platform);
}

absl::Status Scheduler::CheckTimingAvailableLocked(const std::string& platform) {
  int compile_only = 0;
  for (const auto& [id, w] : workers_) {
    if (w.hello.platform() != platform || w.silent) continue;
    if (!w.hello.compile_only()) return absl::OkStatus();
    ++compile_only;
  }
  if (compile_only == 0) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("measured timing was required, but the ", compile_only, " connected ", platform,
                   " worker(s) are compile-only (no device to run on): they can only compile and rank "
                   "candidates statically; drop the timing requirement or connect a worker with a device"));
}

std::shared_ptr<const v1::Task> Scheduler::InternTaskLocked(const std::string& hash, const v1::Task& task) {
  std::weak_ptr<const v1::Task>& slot = tasks_[hash];
  if (auto shared = slot.lock()) return shared;
  // Drop the entries of tasks no evaluation holds any more (amortised: a
  // pass per new copy).
  std::erase_if(tasks_, [](const auto& entry) { return entry.second.expired(); });
  auto shared = std::make_shared<const v1::Task>(task);
  tasks_[hash] = shared;
  return shared;
}

absl::StatusOr<std::string> Scheduler::Submit(const v1::Task& task, const v1::Candidate& candidate,
                                              const std::string& platform, SubmitOptions options) {
  const std::string& job_id = options.job_id;
  // The task's bytes only where its hash is not given, or it is new to the store.
  std::string task_bytes = options.task_hash.empty() ? DeterministicBytes(task) : std::string();
  std::string cand_bytes = DeterministicBytes(candidate);
  v1::EvalRecord r;
  r.set_eval_id(options.eval_id.empty() ? NewId("e") : options.eval_id);
  r.set_task_hash(options.task_hash.empty() ? Sha256Hex(task_bytes) : std::move(options.task_hash));
  // CandidateHash(candidate), from the bytes stored unless the caller has it.
  r.set_candidate_hash(options.candidate_hash.empty() ? Sha256Hex(cand_bytes) : std::move(options.candidate_hash));
  r.set_platform(platform);
  r.set_state(v1::EVAL_QUEUED);
  r.set_job_id(job_id);
  r.set_created_unix_micros(absl::ToUnixMicros(absl::Now()));
  r.set_require_timing(options.require_timing);
  r.set_team(options.team);
  r.set_priority(options.priority);
  bool new_task = false;
  {
    absl::MutexLock l(&mu_);
    if (options.require_timing) KEVO_RETURN_IF_ERROR(CheckTimingAvailableLocked(platform));
    if (admission_) KEVO_RETURN_IF_ERROR(admission_(options.team));
    r.set_sequence(next_sequence_++);
    // A job's evaluations share their task: its bytes are written once per
    // coordinator process (rewriting the same value only cost disk).
    new_task = !tasks_stored_.contains(r.task_hash());
  }
  store::Batch batch = std::move(options.extra);
  if (new_task) {
    if (task_bytes.empty()) task_bytes = DeterministicBytes(task);
    batch.Put(store::Family::kTasks, r.task_hash(), task_bytes);
  }
  batch.Put(store::Family::kBlobs, r.candidate_hash(), cand_bytes);
  if (options.rival.has_value() && options.rival_stored && !options.rival_hash.empty()) {
    r.set_rival_hash(std::move(options.rival_hash));
  } else if (options.rival.has_value()) {
    std::string rival_bytes = DeterministicBytes(*options.rival);
    r.set_rival_hash(Sha256Hex(rival_bytes));
    if (!options.rival_stored) batch.Put(store::Family::kBlobs, r.rival_hash(), std::move(rival_bytes));
  }
  batch.Put(store::Family::kEvals, store::keys::Eval(r.eval_id()), r.SerializeAsString());
  // Written without the lock, so that nothing else waits for the disk and
  // synced submissions from several threads share one fsync (RocksDB's group
  // commit). Nobody knows the id until this returns. The
  // admission check above can let as many evaluations past a quota as there
  // are concurrent submitters.
  KEVO_RETURN_IF_ERROR(store_->Write(batch, options.sync));
  FlushOnExit flush{this};  // after the lock is released
  absl::MutexLock l(&mu_);
  if (new_task) tasks_stored_.insert(r.task_hash());
  Active a;
  a.record = r;
  a.task = InternTaskLocked(r.task_hash(), task);
  a.candidate = candidate;
  a.rival = std::move(options.rival);
  a.queued_ms = NowMs();
  active_[r.eval_id()] = std::move(a);
  queue_[platform][r.sequence()] = r.eval_id();
  if (metrics_->submitted) metrics_->submitted->Increment();
  LogInfo("queued evaluation ", r.eval_id(), " task=", task.name(), " platform=", platform,
          job_id.empty() ? "" : absl::StrCat(" job=", job_id));
  DispatchLocked();
  return r.eval_id();
}

absl::Status Scheduler::Subscribe(const std::string& eval_id, EvalListener* listener) {
  absl::MutexLock w(&writer_mu_);  // no record is being written meanwhile
  absl::MutexLock l(&mu_);
  // A final result not written yet reaches its listeners once it is.
  if (active_.contains(eval_id) || PendingRecordLocked(eval_id) != nullptr) {
    listeners_.emplace(eval_id, listener);
    return absl::OkStatus();
  }
  auto value = store_->Get(store::Family::kEvals, store::keys::Eval(eval_id));
  if (!value.ok()) return value.status();
  if (!value->has_value()) return absl::NotFoundError(absl::StrCat("no evaluation ", eval_id));
  v1::EvalRecord r;
  if (!r.ParseFromString(**value)) return absl::DataLossError("corrupt evaluation record");
  listener->OnFinal(r.evaluation());
  return absl::OkStatus();
}

void Scheduler::Unsubscribe(const std::string& eval_id, EvalListener* listener) {
  absl::MutexLock l(&mu_);
  auto range = listeners_.equal_range(eval_id);
  for (auto it = range.first; it != range.second;) {
    it = it->second == listener ? listeners_.erase(it) : std::next(it);
  }
}

const v1::EvalRecord* Scheduler::PendingRecordLocked(const std::string& eval_id) const {
  for (auto it = pending_writes_.rbegin(); it != pending_writes_.rend(); ++it) {
    if (it->record.eval_id() == eval_id) return &it->record;
  }
  return nullptr;
}

absl::StatusOr<v1::EvalRecord> Scheduler::GetRecord(const std::string& eval_id) {
  absl::MutexLock w(&writer_mu_);  // no record is being written meanwhile
  absl::MutexLock l(&mu_);
  auto a = active_.find(eval_id);
  if (a != active_.end()) return a->second.record;
  if (const v1::EvalRecord* pending = PendingRecordLocked(eval_id)) return *pending;
  auto value = store_->Get(store::Family::kEvals, store::keys::Eval(eval_id));
  if (!value.ok()) return value.status();
  if (!value->has_value()) return absl::NotFoundError(absl::StrCat("no evaluation ", eval_id));
  v1::EvalRecord r;
  if (!r.ParseFromString(**value)) return absl::DataLossError("corrupt evaluation record");
  return r;
}

std::vector<v1::WorkerInfo> Scheduler::ListWorkers() {
  absl::MutexLock l(&mu_);
  std::vector<v1::WorkerInfo> out;
  for (const auto& [id, w] : workers_) {
    v1::WorkerInfo info;
    info.set_worker_id(id);
    info.set_platform(w.hello.platform());
    info.set_device(w.hello.device());
    info.set_slots(w.hello.slots());
    info.set_busy(static_cast<int32_t>(w.busy.size()));
    info.set_compile_only(w.hello.compile_only());
    info.set_mem_bandwidth_gbs(w.hello.mem_bandwidth_gbs());
    info.set_fp32_peak_gflops(w.hello.fp32_peak_gflops());
    for (const auto& lang : w.hello.languages()) info.add_languages(lang);
    info.set_connected_unix_micros(w.connected_unix_micros);
    for (const auto& [k, v] : w.hello.capabilities()) (*info.mutable_capabilities())[k] = v;
    for (const std::string& t : w.hello.targets()) info.add_targets(t);
    out.push_back(std::move(info));
  }
  return out;
}

void Scheduler::SetCompletionHook(CompletionHook hook) {
  absl::MutexLock l(&mu_);
  completion_hook_ = std::move(hook);
}

void Scheduler::ExpiryLoop() {
  while (true) {
    FlushOnExit flush{this};  // after the lock is released
    absl::MutexLock l(&mu_);
    auto stop = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
    mu_.AwaitWithTimeout(absl::Condition(&stop), options_.tick);
    if (stopping_) return;
    int64_t now = NowMs();
    bool changed = false;
    const int64_t silence_ms = absl::ToInt64Milliseconds(options_.max_silence);
    const int64_t queue_ms = absl::ToInt64Milliseconds(options_.queue_timeout);
    const int64_t lease_ms = absl::ToInt64Milliseconds(options_.lease);
    // A worker that said nothing for a whole lease, not even a heartbeat, is
    // cut off or stopped; one whose lease lapsed, sooner: after one and a
    // half heartbeats without a word (else its evaluation could go straight
    // back to it).
    const int64_t quiet_holder_ms = std::min(lease_ms, absl::ToInt64Milliseconds(options_.heartbeat) * 3 / 2);
    for (auto& [id, w] : workers_) {
      if (!w.silent && now - w.last_heard_ms > lease_ms) {
        SilenceLocked(id, w, now);
        changed = true;
      }
    }
    std::vector<std::string> unserved;  // queued too long with no worker for their platform
    // Leased before a restart to a worker that never came back: lost.
    std::vector<std::pair<std::string, std::string>> vanished;  // eval id, why
    for (auto& [id, a] : active_) {
      if (a.record.state() == v1::EVAL_QUEUED && queue_ms > 0 &&
          now - a.record.created_unix_micros() / 1000 > queue_ms && !ServedLocked(a.record.platform())) {
        unserved.push_back(id);
      }
      if (a.record.state() != v1::EVAL_LEASED) continue;
      std::string why;
      auto w = workers_.find(a.record.lease_worker());
      if (a.record.lease_deadline_unix_ms() < now) {
        if (w != workers_.end() && now - w->second.last_heard_ms > quiet_holder_ms) {
          SilenceLocked(w->first, w->second, now);  // requeues this evaluation with the others
          changed = true;
          continue;
        }
        why = absl::StrCat("lease held by ", a.record.lease_worker(), " lapsed");
      } else if (silence_ms > 0 && a.last_progress_ms > 0 && now - a.last_progress_ms > silence_ms) {
        why = absl::StrCat("lease held by ", a.record.lease_worker(), " lapsed: no stage event for ",
                           absl::FormatDuration(options_.max_silence), " (heartbeats alone do not keep a lease)");
      } else {
        continue;
      }
      if (w == workers_.end()) {
        // Only a lease recovered after a restart has a holder that is not
        // connected (RemoveWorker settles the others at once): the worker was
        // given a lease period to come back and did not.
        vanished.emplace_back(id, absl::StrCat("worker ", a.record.lease_worker(),
                                               " held the lease and did not come back after the coordinator "
                                               "restarted"));
        changed = true;
        continue;
      }
      w->second.busy.erase(id);
      SyncFreeLocked(w->first);
      v1::CoordinatorMessage m;  // tell it to stop; a late result is refused anyway
      m.mutable_cancel()->set_eval_id(id);
      m.mutable_cancel()->set_attempt(a.record.attempt());
      w->second.send(m);
      RequeueLocked(a, why);
      changed = true;
    }
    for (const auto& [id, why] : vanished) {
      auto a = active_.find(id);
      if (a != active_.end()) LostLocked(a, why);
    }
    for (const std::string& id : unserved) {
      auto a = active_.find(id);
      v1::Evaluation ev;
      ev.set_status(v1::INFRA_ERROR);
      ev.set_task_name(a->second.task->name());
      ev.mutable_diagnostics()->set_message(absl::StrCat(
          "no worker of platform '", a->second.record.platform(), "' connected within ",
          absl::FormatDuration(options_.queue_timeout), " of the submission (kevo workers lists those connected)"));
      LogWarning("evaluation ", id, ": ", ev.diagnostics().message());
      RecordLocked(a, std::move(ev), a->second.record.attempt(), "");
    }
    if (changed) DispatchLocked();
  }
}

}  // namespace kevo::scheduler
