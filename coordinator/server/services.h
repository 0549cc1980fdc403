// The gRPC services of the coordinator, on the callback API. A reaction never
// waits for RocksDB, a proposer, another RPC or a worker: what writes or scans
// the store (a worker's messages, submissions, the admin's and campaigns'
// calls, reads of stored nodes and records) runs on the service's executor,
// which finishes the call; what a reaction does itself reads memory only
// (GetJob, ListJobs, ListWorkers, CancelJob, GetCampaign, ListCampaigns).
#pragma once

#include <map>
#include <memory>
#include <string>

#include "common/executor.h"
#include "common/task/task_loader.h"
#include "coordinator/auth/authority.h"
#include "coordinator/campaigns/campaigns.h"
#include "coordinator/jobs/manager.h"
#include "coordinator/scheduler/scheduler.h"
#include "coordinator/server/knowledge.h"
#include "kevo/v1/admin.grpc.pb.h"
#include "kevo/v1/campaign.grpc.pb.h"
#include "kevo/v1/job.grpc.pb.h"
#include "kevo/v1/worker.grpc.pb.h"

namespace prometheus {
class Registry;
}

namespace kevo::coordinator {

// The caller of `context`: auth::OpenPrincipal() when `authority` is null
// (no --auth); Unauthenticated without a valid bearer token.
absl::StatusOr<auth::Principal> Caller(const auth::Authority* authority, const grpc::ServerContextBase& context);

// Whether `team` may start another job now: within its max_evaluations_per_day
// and max_running_jobs (ResourceExhausted naming the limit). OK without an
// authority and for the admin (an empty team).
absl::Status TeamAdmission(const auth::Authority* authority, jobs::JobManager* jobs, const std::string& team);

// Campaigns (proto/kevo/v1/campaign.proto). With an authority a team sees and
// cancels only its own campaigns (another team's are NotFound) and submits
// under its own name; the admin sees all and may name the team.
class CampaignServiceImpl final : public v1::CampaignService::CallbackService {
 public:
  // SubmitCampaign and CancelCampaign run on an executor of its own.
  CampaignServiceImpl(campaigns::CampaignManager* campaigns, const auth::Authority* authority)
      : campaigns_(campaigns), authority_(authority), executor_(/*threads=*/1) {}
  grpc::ServerUnaryReactor* SubmitCampaign(grpc::CallbackServerContext* context,
                                           const v1::SubmitCampaignRequest* request,
                                           v1::SubmitCampaignResponse* response) override;
  grpc::ServerUnaryReactor* GetCampaign(grpc::CallbackServerContext* context, const v1::GetCampaignRequest* request,
                                        v1::Campaign* response) override;
  grpc::ServerUnaryReactor* ListCampaigns(grpc::CallbackServerContext* context, const v1::ListCampaignsRequest* request,
                                          v1::ListCampaignsResponse* response) override;
  grpc::ServerUnaryReactor* CancelCampaign(grpc::CallbackServerContext* context,
                                           const v1::CancelCampaignRequest* request, v1::Campaign* response) override;

 private:
  absl::StatusOr<v1::Campaign> Visible(const grpc::ServerContextBase& context, const std::string& campaign_id);

  campaigns::CampaignManager* campaigns_;
  const auth::Authority* authority_;
  Executor executor_;  // last: joined first, while the rest is alive
};

// Workers' bidirectional stream: Hello first, then heartbeats, stage events
// and results; assignments flow back on the same stream. Each message is
// handled on the service's executor (the scheduler writes leases and results
// to RocksDB), one at a time per worker, in order. With an authority,
// a stream needs a worker token (Unauthenticated without one,
// PermissionDenied for a team's), and ends at the worker's next message once
// that token is revoked.
class WorkerServiceImpl final : public v1::WorkerService::CallbackService {
 public:
  // Destroy only after the server has shut down: the destructor runs the
  // streams' queued work (their disconnections) and joins the threads.
  WorkerServiceImpl(scheduler::Scheduler* scheduler, const auth::Authority* authority)
      : scheduler_(scheduler), authority_(authority), executor_(kThreads) {}
  grpc::ServerBidiReactor<v1::WorkerMessage, v1::CoordinatorMessage>* Connect(
      grpc::CallbackServerContext* context) override;

  // The hash of the token the connected worker `worker_id` proved itself
  // with; NotFound when no such worker is connected.
  absl::StatusOr<std::string> TokenOf(const std::string& worker_id);
  void SetToken(const std::string& worker_id, const std::string& token_hash);
  void ClearToken(const std::string& worker_id);
  Executor& executor() { return executor_; }

 private:
  // Threads handling workers' messages: one is busy while the scheduler
  // writes a result (a synced write), the others go on.
  static constexpr int kThreads = 4;

  scheduler::Scheduler* scheduler_;
  const auth::Authority* authority_;  // null: no --auth
  absl::Mutex mu_;
  std::map<std::string, std::string> tokens_ ABSL_GUARDED_BY(mu_);  // worker id -> token hash
  Executor executor_;                                               // last: joined first, while the rest is alive
};

// Teams, tokens and workers (proto/kevo/v1/admin.proto); every call needs
// the admin token, and runs on an executor of its own (the authority writes
// to RocksDB). Served only with --auth.
class AdminServiceImpl final : public v1::AdminService::CallbackService {
 public:
  AdminServiceImpl(auth::Authority* authority, scheduler::Scheduler* scheduler, WorkerServiceImpl* workers)
      : authority_(authority), scheduler_(scheduler), workers_(workers), executor_(/*threads=*/1) {}
  grpc::ServerUnaryReactor* CreateTeam(grpc::CallbackServerContext* context, const v1::CreateTeamRequest* request,
                                       v1::TeamToken* response) override;
  grpc::ServerUnaryReactor* ListTeams(grpc::CallbackServerContext* context, const v1::ListTeamsRequest* request,
                                      v1::ListTeamsResponse* response) override;
  grpc::ServerUnaryReactor* RotateTeamToken(grpc::CallbackServerContext* context,
                                            const v1::RotateTeamTokenRequest* request,
                                            v1::TeamToken* response) override;
  grpc::ServerUnaryReactor* RevokeTeamTokens(grpc::CallbackServerContext* context,
                                             const v1::RevokeTeamTokensRequest* request,
                                             v1::RevokeTeamTokensResponse* response) override;
  grpc::ServerUnaryReactor* CreateWorkerToken(grpc::CallbackServerContext* context,
                                              const v1::CreateWorkerTokenRequest* request,
                                              v1::WorkerToken* response) override;
  grpc::ServerUnaryReactor* RevokeWorker(grpc::CallbackServerContext* context, const v1::RevokeWorkerRequest* request,
                                         v1::RevokeWorkerResponse* response) override;

 private:
  // OK for the admin token; Unauthenticated / PermissionDenied otherwise.
  absl::Status CheckAdmin(grpc::CallbackServerContext* context) const;

  auth::Authority* authority_;
  scheduler::Scheduler* scheduler_;
  WorkerServiceImpl* workers_;
  Executor executor_;  // last: joined first, while the rest is alive
};

// The user-facing API. SubmitJob, EvaluateCandidate's submission,
// GetEvaluation, GetBest, ListNodes and the knowledge RPCs (ListLlmCalls,
// SearchKnowledge, ListSkills: RocksDB and the Xapian index) run on an
// executor of its own and finish from there; GetJob, ListJobs, ListWorkers
// and CancelJob answer from memory at once.
//
// With an authority every call needs a team's or the admin's token: a team
// sees and changes only its own jobs and evaluations (another team's are
// NotFound, as if they did not exist), its jobs are submitted under its name
// and within its max_running_jobs (ResourceExhausted beyond it); listing
// workers and every team's LLM calls needs the admin token.
class JobServiceImpl : public v1::JobService::CallbackService {
 public:
  // `knowledge.jobs` is set to `jobs`. Registers kevo_coordinator_rpcs_total
  // and kevo_coordinator_rpc_seconds in `registry` when it is not null.
  // EvaluateCandidate and SubmitJob refuse a task that fails
  // task::ValidateReceivedTask under `task_limits` with INVALID_ARGUMENT,
  // before anything is stored or queued.
  JobServiceImpl(scheduler::Scheduler* scheduler, jobs::JobManager* jobs, KnowledgeSources knowledge,
                 prometheus::Registry* registry, const auth::Authority* authority = nullptr,
                 task::TaskLimits task_limits = {});
  // Runs the knowledge calls still queued (the server must be shut down).
  ~JobServiceImpl() override;
  grpc::ServerWriteReactor<v1::EvaluateEvent>* EvaluateCandidate(grpc::CallbackServerContext* context,
                                                                 const v1::EvaluateRequest* request) override;
  grpc::ServerUnaryReactor* GetEvaluation(grpc::CallbackServerContext* context, const v1::GetEvaluationRequest* request,
                                          v1::Evaluation* response) override;
  grpc::ServerUnaryReactor* ListWorkers(grpc::CallbackServerContext* context, const v1::ListWorkersRequest* request,
                                        v1::ListWorkersResponse* response) override;

  grpc::ServerUnaryReactor* SubmitJob(grpc::CallbackServerContext* context, const v1::SubmitJobRequest* request,
                                      v1::SubmitJobResponse* response) override;
  grpc::ServerUnaryReactor* GetJob(grpc::CallbackServerContext* context, const v1::GetJobRequest* request,
                                   v1::Job* response) override;
  grpc::ServerWriteReactor<v1::JobEvent>* WatchJob(grpc::CallbackServerContext* context,
                                                   const v1::WatchJobRequest* request) override;
  grpc::ServerUnaryReactor* ListJobs(grpc::CallbackServerContext* context, const v1::ListJobsRequest* request,
                                     v1::ListJobsResponse* response) override;
  grpc::ServerUnaryReactor* CancelJob(grpc::CallbackServerContext* context, const v1::CancelJobRequest* request,
                                      v1::Job* response) override;
  grpc::ServerUnaryReactor* GetBest(grpc::CallbackServerContext* context, const v1::GetBestRequest* request,
                                    v1::GetBestResponse* response) override;
  grpc::ServerUnaryReactor* ListNodes(grpc::CallbackServerContext* context, const v1::ListNodesRequest* request,
                                      v1::ListNodesResponse* response) override;

  grpc::ServerUnaryReactor* ListLlmCalls(grpc::CallbackServerContext* context, const v1::ListLlmCallsRequest* request,
                                         v1::ListLlmCallsResponse* response) override;
  grpc::ServerUnaryReactor* SearchKnowledge(grpc::CallbackServerContext* context,
                                            const v1::SearchKnowledgeRequest* request,
                                            v1::SearchKnowledgeResponse* response) override;
  grpc::ServerUnaryReactor* ListSkills(grpc::CallbackServerContext* context, const v1::ListSkillsRequest* request,
                                       v1::ListSkillsResponse* response) override;

 private:
  struct RpcMetrics;

  // Runs `compute` on the executor and finishes the call with its result,
  // recording the RPC's metrics under `method`.
  template <typename T>
  grpc::ServerUnaryReactor* FinishOffThread(grpc::CallbackServerContext* context, const char* method,
                                            std::function<absl::StatusOr<T>()> compute, T* response);

  // The job `job_id` when `caller` may see it; NotFound otherwise, worded
  // as for a job that does not exist.
  absl::StatusOr<v1::Job> VisibleJob(const auth::Principal& caller, const std::string& job_id);
  // OK when the caller of `context` may see job `job_id` (VisibleJob's errors
  // otherwise, or the caller's own: Unauthenticated, PermissionDenied).
  absl::Status CheckVisible(const grpc::ServerContextBase& context, const std::string& job_id);
  // OK, or ResourceExhausted when the caller's team is at its
  // max_running_jobs.
  absl::Status CheckQuota(const auth::Principal& caller);

  scheduler::Scheduler* scheduler_;
  jobs::JobManager* jobs_;
  KnowledgeSources knowledge_;
  const auth::Authority* authority_;  // null: no --auth
  const task::TaskLimits task_limits_;
  std::unique_ptr<RpcMetrics> metrics_;
  // Last: destroyed first, so that queued calls run while the rest is alive.
  std::unique_ptr<Executor> executor_;
};

}  // namespace kevo::coordinator
