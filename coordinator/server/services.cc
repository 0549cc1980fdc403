#include "coordinator/server/services.h"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <deque>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "common/log.h"

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

class WorkerReactor final
    : public grpc::ServerBidiReactor<v1::WorkerMessage, v1::CoordinatorMessage> {
 public:
  WorkerReactor(scheduler::Scheduler* scheduler, std::string peer)
      : scheduler_(scheduler), peer_(std::move(peer)), writes_(this) {
    StartRead(&in_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      // The worker closed the stream or vanished: return its leases now.
      Disconnect();
      writes_.FinishAfterWrites(grpc::Status::OK);
      return;
    }
    if (worker_id_.empty()) {
      if (!in_.has_hello()) {
        writes_.FinishAfterWrites(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                               "the first message on Connect must be Hello"));
        return;
      }
      worker_id_ = scheduler_->AddWorker(
          in_.hello(), [this](v1::CoordinatorMessage m) { writes_.Push(std::move(m)); });
      LogInfo("worker stream from ", peer_, " is ", worker_id_);
    } else {
      scheduler_->OnWorkerMessage(worker_id_, in_);
    }
    StartRead(&in_);
  }

  void OnWriteDone(bool ok) override { writes_.OnWriteDone(ok); }

  void OnDone() override {
    Disconnect();
    delete this;
  }

 private:
  void Disconnect() {
    if (!worker_id_.empty() && !removed_.exchange(true)) scheduler_->RemoveWorker(worker_id_);
  }

  scheduler::Scheduler* scheduler_;
  std::string peer_;
  std::string worker_id_;  // set once, on the reading thread
  std::atomic<bool> removed_{false};
  v1::WorkerMessage in_;
  WriteQueue<WorkerReactor, v1::CoordinatorMessage> writes_;
};

class EvaluateReactor final : public grpc::ServerWriteReactor<v1::EvaluateEvent>,
                              public scheduler::EvalListener {
 public:
  EvaluateReactor(scheduler::Scheduler* scheduler, const v1::EvaluateRequest& request)
      : scheduler_(scheduler), writes_(this) {
    if (request.platform().empty()) {
      writes_.FinishAfterWrites(
          grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "EvaluateRequest.platform is empty"));
      return;
    }
    if (request.candidate().source().empty()) {
      writes_.FinishAfterWrites(
          grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "the candidate's source is empty"));
      return;
    }
    scheduler::Scheduler::SubmitOptions options;
    options.require_timing = request.require_timing();
    auto id = scheduler_->Submit(request.task(), request.candidate(), request.platform(),
                                 std::move(options));
    if (!id.ok()) {
      writes_.FinishAfterWrites(ToGrpcStatus(id.status()));
      return;
    }
    eval_id_ = *id;
    v1::EvaluateEvent accepted;
    accepted.set_accepted_eval_id(eval_id_);
    writes_.Push(std::move(accepted));
    absl::Status s = scheduler_->Subscribe(eval_id_, this);
    if (!s.ok()) writes_.FinishAfterWrites(ToGrpcStatus(s));
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
    writes_.FinishAfterWrites(grpc::Status::OK);
  }

  void OnWriteDone(bool ok) override { writes_.OnWriteDone(ok); }

  void OnCancel() override {
    // The client went away; the evaluation itself goes on and is recorded.
    writes_.FinishAfterWrites(grpc::Status::CANCELLED);
  }

  void OnDone() override {
    if (!eval_id_.empty()) scheduler_->Unsubscribe(eval_id_, this);
    delete this;
  }

 private:
  scheduler::Scheduler* scheduler_;
  std::string eval_id_;
  WriteQueue<EvaluateReactor, v1::EvaluateEvent> writes_;
};

class WatchReactor final : public grpc::ServerWriteReactor<v1::JobEvent>, public jobs::JobWatcher {
 public:
  WatchReactor(jobs::JobManager* jobs, const std::string& job_id)
      : jobs_(jobs), job_id_(job_id), writes_(this) {
    absl::Status s = jobs_->Watch(job_id_, this);
    if (!s.ok()) writes_.FinishAfterWrites(ToGrpcStatus(s));
  }
  void OnEvent(const v1::JobEvent& event) override { writes_.Push(event); }
  void OnEnd(const v1::Job& job) override { writes_.FinishAfterWrites(grpc::Status::OK); }
  void OnWriteDone(bool ok) override { writes_.OnWriteDone(ok); }
  void OnCancel() override { writes_.FinishAfterWrites(grpc::Status::CANCELLED); }
  void OnDone() override {
    jobs_->Unwatch(job_id_, this);
    delete this;
  }

 private:
  jobs::JobManager* jobs_;
  std::string job_id_;
  WriteQueue<WatchReactor, v1::JobEvent> writes_;
};

// Finishes a unary call with `result`'s status, copying its value on success.
template <typename T>
grpc::ServerUnaryReactor* FinishUnary(grpc::CallbackServerContext* context,
                                      absl::StatusOr<T> result, T* response) {
  auto* reactor = context->DefaultReactor();
  if (result.ok()) *response = std::move(*result);
  reactor->Finish(ToGrpcStatus(result.status()));
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
    seconds
        ->Add({{"method", method}},
              prometheus::Histogram::BucketBoundaries{0.001, 0.005, 0.02, 0.1, 0.5, 2, 10})
        .Observe(absl::ToDoubleSeconds(took));
  }
};

JobServiceImpl::JobServiceImpl(scheduler::Scheduler* scheduler, jobs::JobManager* jobs,
                               KnowledgeSources knowledge, prometheus::Registry* registry)
    : scheduler_(scheduler),
      jobs_(jobs),
      knowledge_(knowledge),
      metrics_(std::make_unique<RpcMetrics>(registry)),
      executor_(std::make_unique<Executor>(/*threads=*/2)) {
  knowledge_.jobs = jobs;
}

JobServiceImpl::~JobServiceImpl() { executor_.reset(); }

template <typename T>
grpc::ServerUnaryReactor* JobServiceImpl::FinishOffThread(
    grpc::CallbackServerContext* context, const char* method,
    std::function<absl::StatusOr<T>()> compute, T* response) {
  auto* reactor = context->DefaultReactor();
  const absl::Time start = absl::Now();
  executor_->Post([this, reactor, method, compute = std::move(compute), response, start] {
    absl::StatusOr<T> result = compute();
    metrics_->Record(method, result.status(), absl::Now() - start);
    if (result.ok()) {
      *response = *std::move(result);
    } else if (result.status().code() == absl::StatusCode::kInternal ||
               result.status().code() == absl::StatusCode::kDataLoss) {
      LogError(method, ": ", result.status().ToString());
    }
    reactor->Finish(ToGrpcStatus(result.status()));
  });
  return reactor;
}

grpc::ServerUnaryReactor* JobServiceImpl::ListLlmCalls(grpc::CallbackServerContext* context,
                                                       const v1::ListLlmCallsRequest* request,
                                                       v1::ListLlmCallsResponse* response) {
  return FinishOffThread<v1::ListLlmCallsResponse>(
      context, "ListLlmCalls", [this, request] { return coordinator::ListLlmCalls(knowledge_, *request); },
      response);
}

grpc::ServerUnaryReactor* JobServiceImpl::SearchKnowledge(grpc::CallbackServerContext* context,
                                                          const v1::SearchKnowledgeRequest* request,
                                                          v1::SearchKnowledgeResponse* response) {
  return FinishOffThread<v1::SearchKnowledgeResponse>(
      context, "SearchKnowledge",
      [this, request] { return coordinator::SearchKnowledge(knowledge_, *request); }, response);
}

grpc::ServerUnaryReactor* JobServiceImpl::ListSkills(grpc::CallbackServerContext* context,
                                                     const v1::ListSkillsRequest* request,
                                                     v1::ListSkillsResponse* response) {
  return FinishOffThread<v1::ListSkillsResponse>(
      context, "ListSkills", [this, request] { return coordinator::ListSkills(knowledge_, *request); },
      response);
}

grpc::ServerUnaryReactor* JobServiceImpl::SubmitJob(grpc::CallbackServerContext* context,
                                                    const v1::SubmitJobRequest* request,
                                                    v1::SubmitJobResponse* response) {
  auto id = jobs_->Submit(request->spec());
  if (!id.ok()) return FinishUnary<v1::SubmitJobResponse>(context, id.status(), response);
  v1::SubmitJobResponse r;
  r.set_job_id(*id);
  return FinishUnary<v1::SubmitJobResponse>(context, std::move(r), response);
}

grpc::ServerUnaryReactor* JobServiceImpl::GetJob(grpc::CallbackServerContext* context,
                                                 const v1::GetJobRequest* request,
                                                 v1::Job* response) {
  return FinishUnary(context, jobs_->Get(request->job_id()), response);
}

grpc::ServerWriteReactor<v1::JobEvent>* JobServiceImpl::WatchJob(
    grpc::CallbackServerContext* context, const v1::WatchJobRequest* request) {
  return new WatchReactor(jobs_, request->job_id());
}

grpc::ServerUnaryReactor* JobServiceImpl::ListJobs(grpc::CallbackServerContext* context,
                                                   const v1::ListJobsRequest* request,
                                                   v1::ListJobsResponse* response) {
  v1::ListJobsResponse r;
  for (auto& j : jobs_->List()) *r.add_jobs() = std::move(j);
  return FinishUnary(context, absl::StatusOr<v1::ListJobsResponse>(std::move(r)), response);
}

grpc::ServerUnaryReactor* JobServiceImpl::CancelJob(grpc::CallbackServerContext* context,
                                                    const v1::CancelJobRequest* request,
                                                    v1::Job* response) {
  return FinishUnary(context, jobs_->Cancel(request->job_id()), response);
}

grpc::ServerUnaryReactor* JobServiceImpl::GetBest(grpc::CallbackServerContext* context,
                                                  const v1::GetBestRequest* request,
                                                  v1::GetBestResponse* response) {
  return FinishUnary(context, jobs_->GetBest(request->job_id()), response);
}

grpc::ServerUnaryReactor* JobServiceImpl::ListNodes(grpc::CallbackServerContext* context,
                                                    const v1::ListNodesRequest* request,
                                                    v1::ListNodesResponse* response) {
  auto nodes = jobs_->Nodes(request->job_id());
  if (!nodes.ok()) return FinishUnary<v1::ListNodesResponse>(context, nodes.status(), response);
  v1::ListNodesResponse r;
  for (auto& n : *nodes) *r.add_nodes() = std::move(n);
  return FinishUnary<v1::ListNodesResponse>(context, std::move(r), response);
}

grpc::ServerBidiReactor<v1::WorkerMessage, v1::CoordinatorMessage>* WorkerServiceImpl::Connect(
    grpc::CallbackServerContext* context) {
  return new WorkerReactor(scheduler_, context->peer());
}

grpc::ServerWriteReactor<v1::EvaluateEvent>* JobServiceImpl::EvaluateCandidate(
    grpc::CallbackServerContext* context, const v1::EvaluateRequest* request) {
  return new EvaluateReactor(scheduler_, *request);
}

grpc::ServerUnaryReactor* JobServiceImpl::GetEvaluation(grpc::CallbackServerContext* context,
                                                        const v1::GetEvaluationRequest* request,
                                                        v1::Evaluation* response) {
  auto* reactor = context->DefaultReactor();
  auto record = scheduler_->GetRecord(request->eval_id());
  if (!record.ok()) {
    reactor->Finish(ToGrpcStatus(record.status()));
  } else if (record->state() != v1::EVAL_DONE) {
    reactor->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                 absl::StrCat("evaluation ", request->eval_id(), " is still ",
                                              v1::EvalState_Name(record->state()))));
  } else {
    *response = record->evaluation();
    reactor->Finish(grpc::Status::OK);
  }
  return reactor;
}

grpc::ServerUnaryReactor* JobServiceImpl::ListWorkers(grpc::CallbackServerContext* context,
                                                      const v1::ListWorkersRequest* request,
                                                      v1::ListWorkersResponse* response) {
  for (auto& w : scheduler_->ListWorkers()) *response->add_workers() = std::move(w);
  auto* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace kevo::coordinator
