#include "coordinator/server/services.h"

#include <algorithm>
#include <deque>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "common/grpc_status.h"
#include "common/log.h"
#include "common/status.h"
#include "common/task/kernelbench.h"

namespace kevo::coordinator {
namespace {

// Serialises writes on a server stream: queue messages, one StartWrite in
// flight at a time; optionally finish once the queue drains.
template <typename Base, typename Msg>
class WriteQueue {
 public:
  explicit WriteQueue(Base* reactor) : reactor_(reactor) {}

  // Returns false when the stream is finishing and the message was dropped.
  bool Push(Msg m) {
    absl::MutexLock l(&mu_);
    if (finishing_) return false;
    pending_.push_back(std::move(m));
    if (!writing_) {
      writing_ = true;
      reactor_->StartWrite(&pending_.front());
    }
    return true;
  }

  // Finishes the call with `status` after the queued messages are written.
  void FinishAfterWrites(grpc::Status status) {
    absl::MutexLock l(&mu_);
    if (finishing_) return;
    finishing_ = true;
    final_status_ = std::move(status);
    if (!writing_) reactor_->Finish(final_status_);
  }

  void OnWriteDone(bool ok) {
    absl::MutexLock l(&mu_);
    pending_.pop_front();
    if (!ok) pending_.clear();
    if (!pending_.empty()) {
      reactor_->StartWrite(&pending_.front());
      return;
    }
    writing_ = false;
    if (finishing_) reactor_->Finish(final_status_);
  }

 private:
  Base* reactor_;
  absl::Mutex mu_;
  std::deque<Msg> pending_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finishing_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status final_status_ ABSL_GUARDED_BY(mu_);
};

class WorkerReactor final : public grpc::ServerBidiReactor<v1::WorkerMessage, v1::CoordinatorMessage> {
 public:
  // `principal` is the caller's, or why it was refused.
  WorkerReactor(grpc::CallbackServerContext* context, scheduler::Scheduler* scheduler, WorkerServiceImpl* service,
                const auth::Authority* authority, absl::StatusOr<auth::Principal> principal)
      : context_(context),
        scheduler_(scheduler),
        service_(service),
        authority_(authority),
        peer_(context->peer()),
        writes_(this) {
    if (principal.ok() && principal->kind != v1::TOKEN_WORKER && !principal->admin()) {
      principal = absl::PermissionDeniedError(
          "a team's token cannot connect as a worker: use a worker token "
          "(kevo admin worker-token create NAME)");
    }
    if (!principal.ok()) {
      LogWarning("worker stream from ", peer_, " refused: ", principal.status().message());
      writes_.FinishAfterWrites(ToGrpcStatus(principal.status()));
      return;
    }
    token_hash_ = principal->token_hash;
    StartRead(&in_);
  }

  // A message (or the stream's end) is handled on the service's executor, not
  // on the gRPC thread: the scheduler may write to RocksDB for it. The next
  // read starts once it is handled, so one worker's messages keep their order.
  void OnReadDone(bool ok) override {
    service_->executor().Post([this, ok] { Handle(ok); });
  }

  void OnWriteDone(bool ok) override { writes_.OnWriteDone(ok); }

  void OnDone() override {
    service_->executor().Post([this] {
      Disconnect(/*lost=*/true);
      delete this;
    });
  }

 private:
  // OnReadDone's work, on the executor; nothing touches the reactor after
  // its last call to the stream (StartRead, or a finish).
  void Handle(bool ok) {
    if (!ok) {
      // The worker closed the stream or vanished: return its leases now.
      Disconnect(/*lost=*/true);
      writes_.FinishAfterWrites(grpc::Status::OK);
      return;
    }
    if (authority_ != nullptr && !authority_->Valid(token_hash_)) {
      // Revoked while connected: nothing more from this stream counts.
      LogWarning("worker ", worker_id_.empty() ? peer_ : worker_id_, ": its token was revoked; ending its stream");
      Disconnect(/*lost=*/false);
      writes_.FinishAfterWrites(grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "this worker's token was revoked"));
      return;
    }
    if (worker_id_.empty()) {
      if (!in_.has_hello()) {
        writes_.FinishAfterWrites(
            grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "the first message on Connect must be Hello"));
        return;
      }
      // A silent worker's stream is cancelled rather than finished: writes
      // to a worker cut off from the network never complete.
      worker_id_ = scheduler_->AddWorker(
          in_.hello(), [this](v1::CoordinatorMessage m) { writes_.Push(std::move(m)); },
          [this] { context_->TryCancel(); });
      if (authority_ != nullptr) service_->SetToken(worker_id_, token_hash_);
      LogInfo("worker stream from ", peer_, " is ", worker_id_);
    } else {
      scheduler_->OnWorkerMessage(worker_id_, in_);
    }
    StartRead(&in_);
  }

  // `lost`: the stream ended without the coordinator ending it (the worker
  // died, or the network did), so evaluations it held count toward their
  // quarantine (Scheduler::RemoveWorker).
  // Under a lock, not an atomic flag alone: OnDone's task deletes the reactor
  // after its own Disconnect, and the lock orders that after everything an
  // earlier Disconnect on another executor thread did with worker_id_ (the
  // order gRPC makes between the two, through Finish and OnDone, is not one
  // ThreadSanitizer can see).
  void Disconnect(bool lost) {
    absl::MutexLock l(&disconnect_mu_);
    if (!worker_id_.empty() && !removed_) {
      removed_ = true;
      service_->ClearToken(worker_id_);
      scheduler_->RemoveWorker(worker_id_, lost);
    }
  }

  grpc::CallbackServerContext* const context_;
  scheduler::Scheduler* scheduler_;
  WorkerServiceImpl* service_;
  const auth::Authority* authority_;
  std::string token_hash_;
  std::string peer_;
  std::string worker_id_;  // set once, on the reading thread
  absl::Mutex disconnect_mu_;
  bool removed_ ABSL_GUARDED_BY(disconnect_mu_) = false;
  v1::WorkerMessage in_;
  WriteQueue<WorkerReactor, v1::CoordinatorMessage> writes_;
};

class EvaluateReactor final : public grpc::ServerWriteReactor<v1::EvaluateEvent>, public scheduler::EvalListener {
 public:
  // The checks run on the gRPC thread (memory only); the submission, which
  // writes to RocksDB, on `executor`.
  EvaluateReactor(scheduler::Scheduler* scheduler, Executor* executor, const v1::EvaluateRequest& request,
                  absl::StatusOr<auth::Principal> caller, const task::TaskLimits& task_limits)
      : scheduler_(scheduler), writes_(this) {
    if (!caller.ok()) {
      writes_.FinishAfterWrites(ToGrpcStatus(caller.status()));
      return;
    }
    if (request.platform().empty()) {
      writes_.FinishAfterWrites(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "EvaluateRequest.platform is empty"));
      return;
    }
    if (request.candidate().source().empty()) {
      writes_.FinishAfterWrites(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "the candidate's source is empty"));
      return;
    }
    // Checked before anything is stored: a task whose sizes overflow or
    // exceed the limits must never reach a worker.
    if (absl::Status valid = task::ValidateReceivedTask(request.task(), task_limits); !valid.ok()) {
      writes_.FinishAfterWrites(ToGrpcStatus(valid));
      return;
    }
    {
      absl::MutexLock l(&mu_);
      submitting_ = true;
    }
    executor->Post([this, &request, team = caller->team] { Submit(request, team); });
  }

  void OnStage(const v1::StageEvent& event) override {
    v1::EvaluateEvent e;
    *e.mutable_stage() = event;
    writes_.Push(std::move(e));
  }

  void OnFinal(const v1::Evaluation& evaluation) override {
    v1::EvaluateEvent e;
    *e.mutable_final() = evaluation;
    writes_.Push(std::move(e));
    End(grpc::Status::OK);
  }

  void OnWriteDone(bool ok) override { writes_.OnWriteDone(ok); }

  void OnCancel() override {
    // The client went away; the evaluation itself goes on and is recorded.
    End(grpc::Status::CANCELLED);
  }

  void OnDone() override {
    if (!eval_id_.empty()) scheduler_->Unsubscribe(eval_id_, this);
    delete this;
  }

 private:
  // Stores and queues the evaluation and subscribes to it (the executor).
  void Submit(const v1::EvaluateRequest& request, const std::string& team) {
    scheduler::Scheduler::SubmitOptions options;
    options.require_timing = request.require_timing();
    options.team = team;
    auto id = scheduler_->Submit(request.task(), request.candidate(), request.platform(), std::move(options));
    if (!id.ok()) {
      SubmitDone(ToGrpcStatus(id.status()));
      return;
    }
    eval_id_ = *id;
    v1::EvaluateEvent accepted;
    accepted.set_accepted_eval_id(eval_id_);
    writes_.Push(std::move(accepted));
    if (scheduler_->SlotsFor(request.platform()) == 0) {
      // Say so now rather than leave the caller looking at a silent queue.
      v1::EvaluateEvent waiting;
      v1::StageEvent* ev = waiting.mutable_stage();
      ev->set_stage(v1::STAGE_QUEUED);
      ev->set_ok(true);
      const absl::Duration limit = scheduler_->options().queue_timeout;
      ev->set_message(absl::StrCat("no worker of platform '", request.platform(), "' is connected; waiting ",
                                   limit > absl::ZeroDuration() ? absl::StrCat("up to ", absl::FormatDuration(limit))
                                                                : std::string("indefinitely"),
                                   " for one"));
      ev->set_unix_micros(absl::ToUnixMicros(absl::Now()));
      writes_.Push(std::move(waiting));
    }
    absl::Status s = scheduler_->Subscribe(eval_id_, this);
    SubmitDone(s.ok() ? std::optional<grpc::Status>() : ToGrpcStatus(s));
  }

  // Ends the submission: the call finishes with `status` when given, or with
  // what came meanwhile (the final result, the client's cancellation). The
  // reactor may be gone once this returns.
  void SubmitDone(std::optional<grpc::Status> status) {
    {
      absl::MutexLock l(&mu_);
      submitting_ = false;
      if (!status.has_value()) status = std::move(deferred_);
    }
    if (status.has_value()) writes_.FinishAfterWrites(*std::move(status));
  }

  // Finishes the call after the queued writes, or, while the submission is
  // under way, once it ends: the reactor must outlive it.
  void End(grpc::Status status) {
    {
      absl::MutexLock l(&mu_);
      if (submitting_) {
        if (!deferred_.has_value()) deferred_ = std::move(status);
        return;
      }
    }
    writes_.FinishAfterWrites(std::move(status));
  }

  scheduler::Scheduler* scheduler_;
  std::string eval_id_;  // set by Submit before it subscribes
  absl::Mutex mu_;
  bool submitting_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<grpc::Status> deferred_ ABSL_GUARDED_BY(mu_);
  WriteQueue<EvaluateReactor, v1::EvaluateEvent> writes_;
};

class WatchReactor final : public grpc::ServerWriteReactor<v1::JobEvent>, public jobs::JobWatcher {
 public:
  // `visible` is OK when the caller may watch the job.
  WatchReactor(jobs::JobManager* jobs, const std::string& job_id, absl::Status visible)
      : jobs_(jobs), job_id_(job_id), writes_(this) {
    absl::Status s = visible.ok() ? jobs_->Watch(job_id_, this) : visible;
    watching_ = s.ok();
    if (!s.ok()) writes_.FinishAfterWrites(ToGrpcStatus(s));
  }
  void OnEvent(const v1::JobEvent& event) override { writes_.Push(event); }
  void OnEnd(const v1::Job& job) override { writes_.FinishAfterWrites(grpc::Status::OK); }
  void OnWriteDone(bool ok) override { writes_.OnWriteDone(ok); }
  void OnCancel() override { writes_.FinishAfterWrites(grpc::Status::CANCELLED); }
  void OnDone() override {
    if (watching_) jobs_->Unwatch(job_id_, this);
    delete this;
  }

 private:
  jobs::JobManager* jobs_;
  std::string job_id_;
  bool watching_ = false;
  WriteQueue<WatchReactor, v1::JobEvent> writes_;
};

// Finishes a unary call with `result`'s status, copying its value on success.
template <typename T>
grpc::ServerUnaryReactor* FinishUnary(grpc::CallbackServerContext* context, absl::StatusOr<T> result, T* response) {
  auto* reactor = context->DefaultReactor();
  if (result.ok()) *response = std::move(*result);
  reactor->Finish(ToGrpcStatus(result.status()));
  return reactor;
}

// Runs `compute` on `executor` and finishes the unary call from there with its
// result (its value copied on success); `done`, when set, hears the status
// and the time from the call's arrival.
template <typename T>
grpc::ServerUnaryReactor* FinishOn(Executor& executor, grpc::CallbackServerContext* context,
                                   std::function<absl::StatusOr<T>()> compute, T* response,
                                   std::function<void(const absl::Status&, absl::Duration)> done = nullptr) {
  auto* reactor = context->DefaultReactor();
  const absl::Time start = absl::Now();
  executor.Post([reactor, compute = std::move(compute), response, start, done = std::move(done)] {
    absl::StatusOr<T> result = compute();
    const absl::Status status = result.status();
    if (done) done(status, absl::Now() - start);
    if (result.ok()) *response = *std::move(result);
    reactor->Finish(ToGrpcStatus(status));
  });
  return reactor;
}

}  // namespace

struct JobServiceImpl::RpcMetrics {
  prometheus::Family<prometheus::Counter>* calls = nullptr;
  prometheus::Family<prometheus::Histogram>* seconds = nullptr;

  explicit RpcMetrics(prometheus::Registry* r) {
    if (r == nullptr) return;
    calls = &prometheus::BuildCounter()
                 .Name("kevo_coordinator_rpcs_total")
                 .Help("JobService calls answered off the gRPC threads, by method and status code")
                 .Register(*r);
    seconds = &prometheus::BuildHistogram()
                   .Name("kevo_coordinator_rpc_seconds")
                   .Help("Time to answer a JobService call run off the gRPC threads, queueing included")
                   .Register(*r);
  }

  void Record(const char* method, const absl::Status& status, absl::Duration took) {
    if (calls == nullptr) return;
    calls->Add({{"method", method}, {"code", absl::StatusCodeToString(status.code())}}).Increment();
    seconds->Add({{"method", method}}, prometheus::Histogram::BucketBoundaries{0.001, 0.005, 0.02, 0.1, 0.5, 2, 10})
        .Observe(absl::ToDoubleSeconds(took));
  }
};

absl::StatusOr<auth::Principal> Caller(const auth::Authority* authority, const grpc::ServerContextBase& context) {
  if (authority == nullptr) return auth::OpenPrincipal();
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  const absl::string_view header =
      it == metadata.end() ? absl::string_view() : absl::string_view(it->second.data(), it->second.size());
  KEVO_ASSIGN_OR_RETURN(std::string token, auth::BearerToken(header));
  return authority->Authenticate(token);
}

namespace {

// A JobService caller: a team or the admin, not a worker.
absl::StatusOr<auth::Principal> User(const auth::Authority* authority, const grpc::ServerContextBase& context) {
  KEVO_ASSIGN_OR_RETURN(auth::Principal p, Caller(authority, context));
  if (p.kind == v1::TOKEN_WORKER) {
    return absl::PermissionDeniedError("a worker token cannot call JobService: use a team's token");
  }
  return p;
}

// One page of `items` (in their order): those after the one whose key is
// `token` (all when it is empty), at most `page_size` (0: all, else at most
// 1000); `next` gets the last key when more remain. InvalidArgument for a
// token that names no item.
template <typename T, typename KeyFn, typename AddFn>
absl::Status Page(std::vector<T> items, int page_size, const std::string& token, KeyFn key, AddFn add,
                  std::string* next) {
  if (page_size < 0) return absl::InvalidArgumentError("page_size must not be negative");
  size_t start = 0;
  if (!token.empty()) {
    while (start < items.size() && key(items[start]) != token) ++start;
    if (start == items.size()) {
      return absl::InvalidArgumentError(absl::StrCat("page_token '", token, "' names no item of this list"));
    }
    ++start;
  }
  const size_t limit = page_size == 0 ? items.size() : std::min<size_t>(page_size, 1000);
  size_t i = start;
  std::string last;
  for (; i < items.size() && i - start < limit; ++i) {
    last = key(items[i]);
    add(std::move(items[i]));
  }
  if (i < items.size() && i > start) *next = last;
  return absl::OkStatus();
}

absl::Status NeedAdmin(const auth::Principal& p, const std::string& what) {
  if (p.admin()) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat(what, " needs the admin token"));
}

}  // namespace

absl::StatusOr<v1::Job> JobServiceImpl::VisibleJob(const auth::Principal& caller, const std::string& job_id) {
  KEVO_ASSIGN_OR_RETURN(v1::Job job, jobs_->Get(job_id));
  if (!caller.admin() && job.spec().team() != caller.team) {
    return absl::NotFoundError(absl::StrCat("no job ", job_id));
  }
  return job;
}

absl::Status JobServiceImpl::CheckVisible(const grpc::ServerContextBase& context, const std::string& job_id) {
  KEVO_ASSIGN_OR_RETURN(auth::Principal caller, User(authority_, context));
  return VisibleJob(caller, job_id).status();
}

absl::Status TeamAdmission(const auth::Authority* authority, jobs::JobManager* jobs, const std::string& team_name) {
  if (authority == nullptr || team_name.empty()) return absl::OkStatus();
  KEVO_ASSIGN_OR_RETURN(v1::Team team, authority->GetTeam(team_name));
  KEVO_RETURN_IF_ERROR(authority->CheckEvaluationQuota(team_name));
  if (team.max_running_jobs() <= 0) return absl::OkStatus();
  int running = 0;
  for (const v1::Job& j : jobs->List()) {
    if (j.spec().team() == team_name && j.state() == v1::JOB_RUNNING) ++running;
  }
  if (running < team.max_running_jobs()) return absl::OkStatus();
  return absl::ResourceExhaustedError(
      absl::StrCat("team ", team_name, " has ", running, " running jobs, its limit (max_running_jobs) is ",
                   team.max_running_jobs(), "; the limit frees when one of them ends (kevo jobs, kevo cancel)"));
}

absl::Status JobServiceImpl::CheckQuota(const auth::Principal& caller) {
  return TeamAdmission(authority_, jobs_, caller.team);
}

JobServiceImpl::JobServiceImpl(scheduler::Scheduler* scheduler, jobs::JobManager* jobs, KnowledgeSources knowledge,
                               prometheus::Registry* registry, const auth::Authority* authority,
                               task::TaskLimits task_limits)
    : scheduler_(scheduler),
      jobs_(jobs),
      knowledge_(knowledge),
      authority_(authority),
      task_limits_(task_limits),
      metrics_(std::make_unique<RpcMetrics>(registry)),
      executor_(std::make_unique<Executor>(/*threads=*/4)) {
  knowledge_.jobs = jobs;
}

JobServiceImpl::~JobServiceImpl() { executor_.reset(); }

template <typename T>
grpc::ServerUnaryReactor* JobServiceImpl::FinishOffThread(grpc::CallbackServerContext* context, const char* method,
                                                          std::function<absl::StatusOr<T>()> compute, T* response) {
  return FinishOn<T>(
      *executor_, context, std::move(compute), response,
      [this, method](const absl::Status& status, absl::Duration took) {
        metrics_->Record(method, status, took);
        if (status.code() == absl::StatusCode::kInternal || status.code() == absl::StatusCode::kDataLoss) {
          LogError(method, ": ", status.ToString());
        }
      });
}

grpc::ServerUnaryReactor* JobServiceImpl::ListLlmCalls(grpc::CallbackServerContext* context,
                                                       const v1::ListLlmCallsRequest* request,
                                                       v1::ListLlmCallsResponse* response) {
  absl::StatusOr<auth::Principal> caller = User(authority_, *context);
  return FinishOffThread<v1::ListLlmCallsResponse>(
      context, "ListLlmCalls",
      [this, request, caller]() -> absl::StatusOr<v1::ListLlmCallsResponse> {
        KEVO_RETURN_IF_ERROR(caller.status());
        if (request->job_id().empty()) {
          KEVO_RETURN_IF_ERROR(NeedAdmin(*caller, "listing every job's LLM calls"));
        } else {
          KEVO_RETURN_IF_ERROR(VisibleJob(*caller, request->job_id()).status());
        }
        return coordinator::ListLlmCalls(knowledge_, *request);
      },
      response);
}

grpc::ServerUnaryReactor* JobServiceImpl::SearchKnowledge(grpc::CallbackServerContext* context,
                                                          const v1::SearchKnowledgeRequest* request,
                                                          v1::SearchKnowledgeResponse* response) {
  absl::Status caller = User(authority_, *context).status();
  return FinishOffThread<v1::SearchKnowledgeResponse>(
      context, "SearchKnowledge",
      [this, request, caller]() -> absl::StatusOr<v1::SearchKnowledgeResponse> {
        KEVO_RETURN_IF_ERROR(caller);
        return coordinator::SearchKnowledge(knowledge_, *request);
      },
      response);
}

grpc::ServerUnaryReactor* JobServiceImpl::ListSkills(grpc::CallbackServerContext* context,
                                                     const v1::ListSkillsRequest* request,
                                                     v1::ListSkillsResponse* response) {
  absl::Status caller = User(authority_, *context).status();
  return FinishOffThread<v1::ListSkillsResponse>(
      context, "ListSkills",
      [this, request, caller]() -> absl::StatusOr<v1::ListSkillsResponse> {
        KEVO_RETURN_IF_ERROR(caller);
        return coordinator::ListSkills(knowledge_, *request);
      },
      response);
}

grpc::ServerUnaryReactor* JobServiceImpl::SubmitJob(grpc::CallbackServerContext* context,
                                                    const v1::SubmitJobRequest* request,
                                                    v1::SubmitJobResponse* response) {
  absl::StatusOr<auth::Principal> caller = User(authority_, *context);
  // Stored with a synced write: on the executor.
  return FinishOffThread<v1::SubmitJobResponse>(
      context, "SubmitJob",
      [this, request, caller]() -> absl::StatusOr<v1::SubmitJobResponse> {
        KEVO_RETURN_IF_ERROR(caller.status());
        KEVO_RETURN_IF_ERROR(CheckQuota(*caller));
        KEVO_RETURN_IF_ERROR(task::ValidateReceivedTask(request->spec().task(), task_limits_));
        v1::JobSpec spec = request->spec();
        // A team's job is its own whatever the request says; the admin may name one.
        if (!caller->admin()) spec.set_team(caller->team);
        KEVO_ASSIGN_OR_RETURN(std::string id, jobs_->Submit(spec));
        if (!spec.team().empty()) LogInfo("job ", id, " submitted by team ", spec.team());
        v1::SubmitJobResponse r;
        r.set_job_id(id);
        return r;
      },
      response);
}

grpc::ServerUnaryReactor* JobServiceImpl::GetJob(grpc::CallbackServerContext* context, const v1::GetJobRequest* request,
                                                 v1::Job* response) {
  absl::StatusOr<auth::Principal> caller = User(authority_, *context);
  if (!caller.ok()) return FinishUnary<v1::Job>(context, caller.status(), response);
  return FinishUnary(context, VisibleJob(*caller, request->job_id()), response);
}

grpc::ServerWriteReactor<v1::JobEvent>* JobServiceImpl::WatchJob(grpc::CallbackServerContext* context,
                                                                 const v1::WatchJobRequest* request) {
  absl::Status visible = CheckVisible(*context, request->job_id());
  return new WatchReactor(jobs_, request->job_id(), visible);
}

grpc::ServerUnaryReactor* JobServiceImpl::ListJobs(grpc::CallbackServerContext* context,
                                                   const v1::ListJobsRequest* request, v1::ListJobsResponse* response) {
  absl::StatusOr<auth::Principal> caller = User(authority_, *context);
  if (!caller.ok()) return FinishUnary<v1::ListJobsResponse>(context, caller.status(), response);
  std::vector<v1::Job> visible;
  for (auto& j : jobs_->List()) {
    if (!caller->admin() && j.spec().team() != caller->team) continue;
    if (!request->team().empty() && j.spec().team() != request->team()) continue;
    if (!request->campaign_id().empty() && j.spec().campaign_id() != request->campaign_id()) continue;
    visible.push_back(std::move(j));
  }
  std::sort(visible.begin(), visible.end(), [](const v1::Job& a, const v1::Job& b) { return a.job_id() < b.job_id(); });
  v1::ListJobsResponse r;
  absl::Status paged = Page(
      visible, request->page_size(), request->page_token(), [](const v1::Job& j) { return j.job_id(); },
      [&r](v1::Job j) { *r.add_jobs() = std::move(j); }, r.mutable_next_page_token());
  if (!paged.ok()) return FinishUnary<v1::ListJobsResponse>(context, paged, response);
  return FinishUnary(context, absl::StatusOr<v1::ListJobsResponse>(std::move(r)), response);
}

grpc::ServerUnaryReactor* JobServiceImpl::CancelJob(grpc::CallbackServerContext* context,
                                                    const v1::CancelJobRequest* request, v1::Job* response) {
  absl::Status visible = CheckVisible(*context, request->job_id());
  if (!visible.ok()) return FinishUnary<v1::Job>(context, visible, response);
  return FinishUnary(context, jobs_->Cancel(request->job_id()), response);
}

grpc::ServerUnaryReactor* JobServiceImpl::GetBest(grpc::CallbackServerContext* context,
                                                  const v1::GetBestRequest* request, v1::GetBestResponse* response) {
  absl::Status visible = CheckVisible(*context, request->job_id());
  if (!visible.ok()) return FinishUnary<v1::GetBestResponse>(context, visible, response);
  // Reads the node, its evaluations and its kernel from RocksDB.
  return FinishOffThread<v1::GetBestResponse>(
      context, "GetBest", [this, request] { return jobs_->GetBest(request->job_id()); }, response);
}

grpc::ServerUnaryReactor* JobServiceImpl::ListNodes(grpc::CallbackServerContext* context,
                                                    const v1::ListNodesRequest* request,
                                                    v1::ListNodesResponse* response) {
  absl::Status visible = CheckVisible(*context, request->job_id());
  if (!visible.ok()) return FinishUnary<v1::ListNodesResponse>(context, visible, response);
  // Scans the job's nodes in RocksDB.
  return FinishOffThread<v1::ListNodesResponse>(
      context, "ListNodes",
      [this, request]() -> absl::StatusOr<v1::ListNodesResponse> {
        KEVO_ASSIGN_OR_RETURN(std::vector<v1::Node> nodes, jobs_->Nodes(request->job_id()));
        v1::ListNodesResponse r;
        KEVO_RETURN_IF_ERROR(Page(
            std::move(nodes), request->page_size(), request->page_token(),
            [](const v1::Node& n) { return n.node_id(); }, [&r](v1::Node n) { *r.add_nodes() = std::move(n); },
            r.mutable_next_page_token()));
        return r;
      },
      response);
}

grpc::ServerBidiReactor<v1::WorkerMessage, v1::CoordinatorMessage>* WorkerServiceImpl::Connect(
    grpc::CallbackServerContext* context) {
  return new WorkerReactor(context, scheduler_, this, authority_, Caller(authority_, *context));
}

grpc::ServerWriteReactor<v1::EvaluateEvent>* JobServiceImpl::EvaluateCandidate(grpc::CallbackServerContext* context,
                                                                               const v1::EvaluateRequest* request) {
  return new EvaluateReactor(scheduler_, executor_.get(), *request, User(authority_, *context), task_limits_);
}

grpc::ServerUnaryReactor* JobServiceImpl::GetEvaluation(grpc::CallbackServerContext* context,
                                                        const v1::GetEvaluationRequest* request,
                                                        v1::Evaluation* response) {
  absl::StatusOr<auth::Principal> caller = User(authority_, *context);
  // The record may have to be read from RocksDB.
  return FinishOffThread<v1::Evaluation>(
      context, "GetEvaluation",
      [this, request, caller]() -> absl::StatusOr<v1::Evaluation> {
        KEVO_RETURN_IF_ERROR(caller.status());
        KEVO_ASSIGN_OR_RETURN(v1::EvalRecord record, scheduler_->GetRecord(request->eval_id()));
        if (!caller->admin() && record.team() != caller->team) {
          return absl::NotFoundError(absl::StrCat("no evaluation ", request->eval_id()));
        }
        if (record.state() != v1::EVAL_DONE) {
          return absl::UnavailableError(
              absl::StrCat("evaluation ", request->eval_id(), " is still ", v1::EvalState_Name(record.state())));
        }
        return record.evaluation();
      },
      response);
}

grpc::ServerUnaryReactor* JobServiceImpl::ListWorkers(grpc::CallbackServerContext* context,
                                                      const v1::ListWorkersRequest* request,
                                                      v1::ListWorkersResponse* response) {
  absl::StatusOr<auth::Principal> caller = User(authority_, *context);
  absl::Status allowed = caller.ok() ? NeedAdmin(*caller, "listing workers") : caller.status();
  if (allowed.ok()) {
    for (auto& w : scheduler_->ListWorkers()) *response->add_workers() = std::move(w);
  }
  auto* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(allowed));
  return reactor;
}

absl::StatusOr<std::string> WorkerServiceImpl::TokenOf(const std::string& worker_id) {
  absl::MutexLock l(&mu_);
  auto it = tokens_.find(worker_id);
  if (it == tokens_.end()) return absl::NotFoundError(absl::StrCat("no worker ", worker_id, " is connected"));
  return it->second;
}

void WorkerServiceImpl::SetToken(const std::string& worker_id, const std::string& token_hash) {
  absl::MutexLock l(&mu_);
  tokens_[worker_id] = token_hash;
}

void WorkerServiceImpl::ClearToken(const std::string& worker_id) {
  absl::MutexLock l(&mu_);
  tokens_.erase(worker_id);
}

absl::Status AdminServiceImpl::CheckAdmin(grpc::CallbackServerContext* context) const {
  KEVO_ASSIGN_OR_RETURN(auth::Principal p, Caller(authority_, *context));
  return NeedAdmin(p, "AdminService");
}

grpc::ServerUnaryReactor* AdminServiceImpl::CreateTeam(grpc::CallbackServerContext* context,
                                                       const v1::CreateTeamRequest* request, v1::TeamToken* response) {
  absl::Status admin = CheckAdmin(context);
  return FinishOn<v1::TeamToken>(
      executor_, context,
      [this, admin, request]() -> absl::StatusOr<v1::TeamToken> {
        KEVO_RETURN_IF_ERROR(admin);
        return authority_->CreateTeam(*request);
      },
      response);
}

grpc::ServerUnaryReactor* AdminServiceImpl::ListTeams(grpc::CallbackServerContext* context,
                                                      const v1::ListTeamsRequest* request,
                                                      v1::ListTeamsResponse* response) {
  absl::Status admin = CheckAdmin(context);
  return FinishOn<v1::ListTeamsResponse>(
      executor_, context,
      [this, admin]() -> absl::StatusOr<v1::ListTeamsResponse> {
        KEVO_RETURN_IF_ERROR(admin);
        v1::ListTeamsResponse r;
        for (auto& t : authority_->ListTeams()) *r.add_teams() = std::move(t);
        return r;
      },
      response);
}

grpc::ServerUnaryReactor* AdminServiceImpl::RotateTeamToken(grpc::CallbackServerContext* context,
                                                            const v1::RotateTeamTokenRequest* request,
                                                            v1::TeamToken* response) {
  absl::Status admin = CheckAdmin(context);
  return FinishOn<v1::TeamToken>(
      executor_, context,
      [this, admin, request]() -> absl::StatusOr<v1::TeamToken> {
        KEVO_RETURN_IF_ERROR(admin);
        return authority_->RotateTeamToken(request->name());
      },
      response);
}

grpc::ServerUnaryReactor* AdminServiceImpl::RevokeTeamTokens(grpc::CallbackServerContext* context,
                                                             const v1::RevokeTeamTokensRequest* request,
                                                             v1::RevokeTeamTokensResponse* response) {
  absl::Status admin = CheckAdmin(context);
  return FinishOn<v1::RevokeTeamTokensResponse>(
      executor_, context,
      [this, admin, request]() -> absl::StatusOr<v1::RevokeTeamTokensResponse> {
        KEVO_RETURN_IF_ERROR(admin);
        KEVO_ASSIGN_OR_RETURN(int n, authority_->RevokeTeamTokens(request->name()));
        v1::RevokeTeamTokensResponse r;
        r.set_revoked(n);
        return r;
      },
      response);
}

grpc::ServerUnaryReactor* AdminServiceImpl::CreateWorkerToken(grpc::CallbackServerContext* context,
                                                              const v1::CreateWorkerTokenRequest* request,
                                                              v1::WorkerToken* response) {
  absl::Status admin = CheckAdmin(context);
  return FinishOn<v1::WorkerToken>(
      executor_, context,
      [this, admin, request]() -> absl::StatusOr<v1::WorkerToken> {
        KEVO_RETURN_IF_ERROR(admin);
        return authority_->CreateWorkerToken(request->name());
      },
      response);
}

grpc::ServerUnaryReactor* AdminServiceImpl::RevokeWorker(grpc::CallbackServerContext* context,
                                                         const v1::RevokeWorkerRequest* request,
                                                         v1::RevokeWorkerResponse* response) {
  absl::Status admin = CheckAdmin(context);
  return FinishOn<v1::RevokeWorkerResponse>(
      executor_, context,
      [this, admin, request]() -> absl::StatusOr<v1::RevokeWorkerResponse> {
        KEVO_RETURN_IF_ERROR(admin);
        KEVO_ASSIGN_OR_RETURN(std::string hash, workers_->TokenOf(request->worker_id()));
        absl::StatusOr<v1::TokenRecord> token = authority_->Token(hash);
        KEVO_RETURN_IF_ERROR(authority_->RevokeToken(hash, absl::StrCat("worker ", request->worker_id(), " revoked")));
        // Its leases go back to the queue now (revoked, not lost: no quarantine
        // count); its stream ends at its next message.
        scheduler_->RemoveWorker(request->worker_id(), /*lost=*/false);
        LogInfo("worker ", request->worker_id(), " revoked by the admin");
        v1::RevokeWorkerResponse r;
        if (token.ok()) r.set_token_name(token->name());
        return r;
      },
      response);
}

}  // namespace kevo::coordinator

namespace kevo::coordinator {

absl::StatusOr<v1::Campaign> CampaignServiceImpl::Visible(const grpc::ServerContextBase& context,
                                                          const std::string& campaign_id) {
  KEVO_ASSIGN_OR_RETURN(auth::Principal caller, User(authority_, context));
  KEVO_ASSIGN_OR_RETURN(v1::Campaign c, campaigns_->Get(campaign_id));
  if (!caller.admin() && c.spec().team() != caller.team) {
    return absl::NotFoundError(absl::StrCat("no campaign ", campaign_id));
  }
  return c;
}

grpc::ServerUnaryReactor* CampaignServiceImpl::SubmitCampaign(grpc::CallbackServerContext* context,
                                                              const v1::SubmitCampaignRequest* request,
                                                              v1::SubmitCampaignResponse* response) {
  absl::StatusOr<auth::Principal> caller = User(authority_, *context);
  // Validates every task and writes the campaign: on the executor.
  return FinishOn<v1::SubmitCampaignResponse>(
      executor_, context,
      [this, caller, request]() -> absl::StatusOr<v1::SubmitCampaignResponse> {
        KEVO_RETURN_IF_ERROR(caller.status());
        std::vector<v1::CampaignTask> tasks(request->tasks().begin(), request->tasks().end());
        // A team's campaign is its own whatever the request says; the admin may name one.
        KEVO_ASSIGN_OR_RETURN(std::string id,
                              campaigns_->Submit(request->spec(), tasks, caller->admin() ? "" : caller->team));
        v1::SubmitCampaignResponse r;
        r.set_campaign_id(id);
        return r;
      },
      response);
}

grpc::ServerUnaryReactor* CampaignServiceImpl::GetCampaign(grpc::CallbackServerContext* context,
                                                           const v1::GetCampaignRequest* request,
                                                           v1::Campaign* response) {
  return FinishUnary(context, Visible(*context, request->campaign_id()), response);
}

grpc::ServerUnaryReactor* CampaignServiceImpl::ListCampaigns(grpc::CallbackServerContext* context,
                                                             const v1::ListCampaignsRequest* request,
                                                             v1::ListCampaignsResponse* response) {
  absl::StatusOr<auth::Principal> caller = User(authority_, *context);
  if (!caller.ok()) return FinishUnary<v1::ListCampaignsResponse>(context, caller.status(), response);
  v1::ListCampaignsResponse r;
  for (v1::Campaign& c : campaigns_->List()) {
    if (caller->admin() || c.spec().team() == caller->team) *r.add_campaigns() = std::move(c);
  }
  return FinishUnary<v1::ListCampaignsResponse>(context, std::move(r), response);
}

grpc::ServerUnaryReactor* CampaignServiceImpl::CancelCampaign(grpc::CallbackServerContext* context,
                                                              const v1::CancelCampaignRequest* request,
                                                              v1::Campaign* response) {
  absl::StatusOr<v1::Campaign> visible = Visible(*context, request->campaign_id());
  if (!visible.ok()) return FinishUnary(context, std::move(visible), response);
  return FinishOn<v1::Campaign>(
      executor_, context, [this, request] { return campaigns_->Cancel(request->campaign_id()); }, response);
}

}  // namespace kevo::coordinator
