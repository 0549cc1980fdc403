// The gRPC services of the coordinator, on the callback API: reactions never
// block on another RPC or on a worker; they hand work to the scheduler.
#pragma once

#include "coordinator/jobs/manager.h"
#include "coordinator/scheduler/scheduler.h"
#include "kevo/v1/job.grpc.pb.h"
#include "kevo/v1/worker.grpc.pb.h"

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

// The user-facing API.
class JobServiceImpl : public v1::JobService::CallbackService {
 public:
  JobServiceImpl(scheduler::Scheduler* scheduler, jobs::JobManager* jobs)
      : scheduler_(scheduler), jobs_(jobs) {}
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

 private:
  scheduler::Scheduler* scheduler_;
  jobs::JobManager* jobs_;
};

}  // namespace kevo::coordinator
