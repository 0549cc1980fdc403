// The gRPC services of the coordinator, on the callback API: reactions never
// block on another RPC or on a worker; they hand work to the scheduler.
#pragma once

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
  explicit JobServiceImpl(scheduler::Scheduler* scheduler) : scheduler_(scheduler) {}
  grpc::ServerWriteReactor<v1::EvaluateEvent>* EvaluateCandidate(
      grpc::CallbackServerContext* context, const v1::EvaluateRequest* request) override;
  grpc::ServerUnaryReactor* GetEvaluation(grpc::CallbackServerContext* context,
                                          const v1::GetEvaluationRequest* request,
                                          v1::Evaluation* response) override;
  grpc::ServerUnaryReactor* ListWorkers(grpc::CallbackServerContext* context,
                                        const v1::ListWorkersRequest* request,
                                        v1::ListWorkersResponse* response) override;

 protected:
  scheduler::Scheduler* scheduler_;
};

}  // namespace kevo::coordinator
