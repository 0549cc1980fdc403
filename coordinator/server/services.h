// The gRPC services of the coordinator, on the callback API: reactions never
// block on another RPC or on a worker; they hand work to the scheduler.
#pragma once

#include <memory>

#include "common/executor.h"
#include "coordinator/jobs/manager.h"
#include "coordinator/scheduler/scheduler.h"
#include "coordinator/server/knowledge.h"
#include "kevo/v1/job.grpc.pb.h"
#include "kevo/v1/worker.grpc.pb.h"

namespace prometheus {
class Registry;
}

namespace kevo::coordinator {

// Workers' bidirectional stream: Hello first, then heartbeats, stage events
// and results; assignments flow back on the same stream.
class WorkerServiceImpl final : public v1::WorkerService::CallbackService {
 public:
  explicit WorkerServiceImpl(scheduler::Scheduler* scheduler) : scheduler_(scheduler) {}
  grpc::ServerBidiReactor<v1::WorkerMessage, v1::CoordinatorMessage>* Connect(
      grpc::CallbackServerContext* context) override;

 private:
  scheduler::Scheduler* scheduler_;
};

// The user-facing API. The knowledge RPCs (ListLlmCalls, SearchKnowledge,
// ListSkills) read RocksDB and the Xapian index on an executor of its own
// and finish from there; the others answer from memory at once.
class JobServiceImpl : public v1::JobService::CallbackService {
 public:
  // `knowledge.jobs` is set to `jobs`. Registers kevo_coordinator_rpcs_total
  // and kevo_coordinator_rpc_seconds in `registry` when it is not null.
  JobServiceImpl(scheduler::Scheduler* scheduler, jobs::JobManager* jobs,
                 KnowledgeSources knowledge, prometheus::Registry* registry);
  // Runs the knowledge calls still queued (the server must be shut down).
  ~JobServiceImpl() override;
  grpc::ServerWriteReactor<v1::EvaluateEvent>* EvaluateCandidate(
      grpc::CallbackServerContext* context, const v1::EvaluateRequest* request) override;
  grpc::ServerUnaryReactor* GetEvaluation(grpc::CallbackServerContext* context,
                                          const v1::GetEvaluationRequest* request,
                                          v1::Evaluation* response) override;
  grpc::ServerUnaryReactor* ListWorkers(grpc::CallbackServerContext* context,
                                        const v1::ListWorkersRequest* request,
                                        v1::ListWorkersResponse* response) override;

  grpc::ServerUnaryReactor* SubmitJob(grpc::CallbackServerContext* context,
                                      const v1::SubmitJobRequest* request,
                                      v1::SubmitJobResponse* response) override;
  grpc::ServerUnaryReactor* GetJob(grpc::CallbackServerContext* context,
                                   const v1::GetJobRequest* request, v1::Job* response) override;
  grpc::ServerWriteReactor<v1::JobEvent>* WatchJob(grpc::CallbackServerContext* context,
                                                   const v1::WatchJobRequest* request) override;
  grpc::ServerUnaryReactor* ListJobs(grpc::CallbackServerContext* context,
                                     const v1::ListJobsRequest* request,
                                     v1::ListJobsResponse* response) override;
  grpc::ServerUnaryReactor* CancelJob(grpc::CallbackServerContext* context,
                                      const v1::CancelJobRequest* request,
                                      v1::Job* response) override;
  grpc::ServerUnaryReactor* GetBest(grpc::CallbackServerContext* context,
                                    const v1::GetBestRequest* request,
                                    v1::GetBestResponse* response) override;
  grpc::ServerUnaryReactor* ListNodes(grpc::CallbackServerContext* context,
                                      const v1::ListNodesRequest* request,
                                      v1::ListNodesResponse* response) override;

  grpc::ServerUnaryReactor* ListLlmCalls(grpc::CallbackServerContext* context,
                                         const v1::ListLlmCallsRequest* request,
                                         v1::ListLlmCallsResponse* response) override;
  grpc::ServerUnaryReactor* SearchKnowledge(grpc::CallbackServerContext* context,
                                            const v1::SearchKnowledgeRequest* request,
                                            v1::SearchKnowledgeResponse* response) override;
  grpc::ServerUnaryReactor* ListSkills(grpc::CallbackServerContext* context,
                                       const v1::ListSkillsRequest* request,
                                       v1::ListSkillsResponse* response) override;

 private:
  struct RpcMetrics;

  // Runs `compute` on the executor and finishes the call with its result,
  // recording the RPC's metrics under `method`.
  template <typename T>
  grpc::ServerUnaryReactor* FinishOffThread(grpc::CallbackServerContext* context,
                                            const char* method,
                                            std::function<absl::StatusOr<T>()> compute,
                                            T* response);

  scheduler::Scheduler* scheduler_;
  jobs::JobManager* jobs_;
  KnowledgeSources knowledge_;
  std::unique_ptr<RpcMetrics> metrics_;
  // Last: destroyed first, so that queued calls run while the rest is alive.
  std::unique_ptr<Executor> executor_;
};

}  // namespace kevo::coordinator
