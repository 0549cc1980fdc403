// Teams, tokens and workers on a coordinator run with --auth, the way an
// operator runs it: a real kevo-coordinator on loopback, the kevo CLI and
// kevo-worker as processes, and synthetic workers that speak WorkerService
// over real gRPC where a test needs a worker to misbehave.
#include <sys/wait.h>

#include <algorithm>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "common/rpc/client_channel.h"
#include "common/task/task_loader.h"
#include "kevo/v1/admin.grpc.pb.h"
#include "kevo/v1/campaign.grpc.pb.h"
#include "kevo/v1/job.grpc.pb.h"
#include "kevo/v1/worker.grpc.pb.h"
#include "tests/integration/cluster.h"

namespace kevo::testing {
namespace {

std::string Kevo() { return BinDir() + "/kevo"; }

std::shared_ptr<grpc::Channel> ChannelWith(const std::string& address, const std::string& token) {
  rpc::ClientCredentials c;
  c.token = token;
  return rpc::ClientChannel(address, c);
}

std::unique_ptr<v1::JobService::Stub> Jobs(const std::string& address, const std::string& token) {
  return v1::JobService::NewStub(ChannelWith(address, token));
}

void Deadline(grpc::ClientContext* ctx, int seconds = 20) {
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
}

class AuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ = std::make_unique<Cluster>(MakeTempDir("kevo-auth"));
    ASSERT_TRUE(cluster_->StartCoordinator({"--auth"}).ok());
    admin_token_ = std::string(absl::StripAsciiWhitespace(ReadTextFile(cluster_->dir() + "/db/admin.token")));
    ASSERT_FALSE(admin_token_.empty()) << "the coordinator wrote no admin token";
    EXPECT_EQ(std::filesystem::status(cluster_->dir() + "/db/admin.token").permissions() & std::filesystem::perms::all,
              std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
    cluster_->UseCredentials(admin_token_);
    auto task = task::LoadTaskDir(SourceDir() + "/tasks/vector_add");
    ASSERT_TRUE(task.ok()) << task.status();
    task_ = *task;
  }

  const std::string& address() const { return cluster_->address(); }

  std::unique_ptr<v1::AdminService::Stub> Admin(const std::string& token) {
    return v1::AdminService::NewStub(ChannelWith(address(), token));
  }
  std::unique_ptr<v1::JobService::Stub> Jobs(const std::string& token) {
    return v1::JobService::NewStub(ChannelWith(address(), token));
  }

  std::string CreateTeam(const std::string& name, int max_running_jobs = 0) {
    v1::CreateTeamRequest req;
    req.set_name(name);
    req.set_max_running_jobs(max_running_jobs);
    v1::TeamToken resp;
    grpc::ClientContext ctx;
    Deadline(&ctx);
    grpc::Status st = Admin(admin_token_)->CreateTeam(&ctx, req, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    EXPECT_EQ(resp.team().name(), name);
    return resp.token();
  }

  std::string CreateWorkerToken(const std::string& name) {
    v1::CreateWorkerTokenRequest req;
    req.set_name(name);
    v1::WorkerToken resp;
    grpc::ClientContext ctx;
    Deadline(&ctx);
    grpc::Status st = Admin(admin_token_)->CreateWorkerToken(&ctx, req, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return resp.token();
  }

  // A job on a platform no worker here serves, whose recipes the built-in
  // proposer has (amd): its evaluations wait in the queue and it stays
  // running, so every call on it has something to see. (On a platform with
  // no recipe at all the proposer fails and the job could end before the
  // calls, as it should.)
  absl::StatusOr<std::string> Submit(const std::string& token, const std::string& claimed_team = "") {
    v1::SubmitJobRequest req;
    *req.mutable_spec()->mutable_task() = task_;
    req.mutable_spec()->set_platform("amd");
    req.mutable_spec()->mutable_budget()->set_max_evaluations(2);
    req.mutable_spec()->set_team(claimed_team);
    v1::SubmitJobResponse resp;
    grpc::ClientContext ctx;
    Deadline(&ctx);
    grpc::Status st = Jobs(token)->SubmitJob(&ctx, req, &resp);
    if (!st.ok()) return absl::Status(static_cast<absl::StatusCode>(st.error_code()), st.error_message());
    return resp.job_id();
  }

  grpc::StatusCode GetJobCode(const std::string& token, const std::string& job_id, v1::Job* job = nullptr) {
    v1::GetJobRequest req;
    req.set_job_id(job_id);
    v1::Job resp;
    grpc::ClientContext ctx;
    Deadline(&ctx);
    grpc::StatusCode code = Jobs(token)->GetJob(&ctx, req, &resp).error_code();
    if (job != nullptr) *job = resp;
    return code;
  }

  std::vector<std::string> ListJobIds(const std::string& token) {
    v1::ListJobsResponse resp;
    grpc::ClientContext ctx;
    Deadline(&ctx);
    EXPECT_TRUE(Jobs(token)->ListJobs(&ctx, v1::ListJobsRequest(), &resp).ok());
    std::vector<std::string> ids;
    for (const auto& j : resp.jobs()) ids.push_back(j.job_id());
    return ids;
  }

  std::unique_ptr<Cluster> cluster_;
  std::string admin_token_;
  v1::Task task_;
};

TEST_F(AuthTest, CallsWithoutAValidTokenAreUnauthenticated) {
  grpc::ClientContext none;
  Deadline(&none);
  v1::ListJobsResponse resp;
  grpc::Status st = Jobs("")->ListJobs(&none, v1::ListJobsRequest(), &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(absl::StrContains(st.error_message(), "KEVO_TOKEN")) << st.error_message();

  grpc::ClientContext forged;
  Deadline(&forged);
  st = Jobs("kevo_not-a-token-this-coordinator-issued")->ListJobs(&forged, v1::ListJobsRequest(), &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED);

  // Admin calls need the admin token, not a team's.
  const std::string team = CreateTeam("alpha");
  grpc::ClientContext as_team;
  Deadline(&as_team);
  v1::ListTeamsResponse teams;
  EXPECT_EQ(Admin(team)->ListTeams(&as_team, v1::ListTeamsRequest(), &teams).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  grpc::ClientContext workers;
  Deadline(&workers);
  v1::ListWorkersResponse listed;
  EXPECT_EQ(Jobs(team)->ListWorkers(&workers, v1::ListWorkersRequest(), &listed).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);

  // The CLI without a token says what to do; with KEVO_TOKEN it works.
  auto bare = RunCommand({"/usr/bin/env", "-u", "KEVO_TOKEN", "-u", "KEVO_TOKEN_FILE", "HOME=/nonexistent", Kevo(),
                          "jobs", "--coordinator", address()},
                         absl::Seconds(30));
  EXPECT_NE(bare.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(bare.err, "KEVO_TOKEN")) << bare.err;
  auto with =
      RunCommand({"/usr/bin/env", "KEVO_TOKEN=" + team, Kevo(), "jobs", "--coordinator", address()}, absl::Seconds(30));
  EXPECT_EQ(with.exit_code, 0) << with.err;
}

TEST_F(AuthTest, ATeamCannotSeeOrTouchAnotherTeamsJobs) {
  const std::string a = CreateTeam("team-a");
  const std::string b = CreateTeam("team-b");
  // A team's job is its own, whatever team the request claims.
  auto job = Submit(a, /*claimed_team=*/"team-b");
  ASSERT_TRUE(job.ok()) << job.status();
  v1::Job seen;
  ASSERT_EQ(GetJobCode(a, *job, &seen), grpc::StatusCode::OK);
  EXPECT_EQ(seen.spec().team(), "team-a");

  EXPECT_EQ(GetJobCode(b, *job), grpc::StatusCode::NOT_FOUND);
  // The same answer as for a job that does not exist: no existence leak.
  EXPECT_EQ(GetJobCode(b, "j-does-not-exist"), grpc::StatusCode::NOT_FOUND);
  auto stub_b = Jobs(b);
  {
    grpc::ClientContext ctx;
    Deadline(&ctx);
    v1::WatchJobRequest req;
    req.set_job_id(*job);
    auto reader = stub_b->WatchJob(&ctx, req);
    v1::JobEvent event;
    EXPECT_FALSE(reader->Read(&event));
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::NOT_FOUND);
  }
  {
    grpc::ClientContext ctx;
    Deadline(&ctx);
    v1::GetBestRequest req;
    req.set_job_id(*job);
    v1::GetBestResponse resp;
    EXPECT_EQ(stub_b->GetBest(&ctx, req, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
  }
  {
    grpc::ClientContext ctx;
    Deadline(&ctx);
    v1::ListNodesRequest req;
    req.set_job_id(*job);
    v1::ListNodesResponse resp;
    EXPECT_EQ(stub_b->ListNodes(&ctx, req, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
  }
  {
    grpc::ClientContext ctx;
    Deadline(&ctx);
    v1::CancelJobRequest req;
    req.set_job_id(*job);
    v1::Job resp;
    EXPECT_EQ(stub_b->CancelJob(&ctx, req, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
  }
  // B's cancel did nothing; B's list does not show A's job; A's and the admin's do.
  ASSERT_EQ(GetJobCode(a, *job, &seen), grpc::StatusCode::OK);
  EXPECT_EQ(seen.state(), v1::JOB_RUNNING);
  EXPECT_TRUE(ListJobIds(b).empty());
  EXPECT_EQ(ListJobIds(a), std::vector<std::string>{*job});
  EXPECT_EQ(ListJobIds(admin_token_), std::vector<std::string>{*job});

  // A one-off evaluation is the team's too.
  grpc::ClientContext ectx;
  Deadline(&ectx);
  v1::EvaluateRequest ereq;
  *ereq.mutable_task() = task_;
  ereq.mutable_candidate()->set_source("// never runs: no worker serves this platform\n");
  ereq.set_platform("nowhere");
  auto reader = Jobs(a)->EvaluateCandidate(&ectx, ereq);
  v1::EvaluateEvent accepted;
  ASSERT_TRUE(reader->Read(&accepted));
  ASSERT_FALSE(accepted.accepted_eval_id().empty());
  ectx.TryCancel();
  grpc::ClientContext gctx;
  Deadline(&gctx);
  v1::GetEvaluationRequest greq;
  greq.set_eval_id(accepted.accepted_eval_id());
  v1::Evaluation ev;
  EXPECT_EQ(stub_b->GetEvaluation(&gctx, greq, &ev).error_code(), grpc::StatusCode::NOT_FOUND);
  grpc::ClientContext gctx_a;
  Deadline(&gctx_a);
  // Still queued for A (UNAVAILABLE says so), not hidden.
  EXPECT_EQ(Jobs(a)->GetEvaluation(&gctx_a, greq, &ev).error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(AuthTest, RevokedAndRotatedTokensStopWorkingAtOnce) {
  const std::string first = CreateTeam("gamma");
  auto job = Submit(first);
  ASSERT_TRUE(job.ok()) << job.status();

  grpc::ClientContext rctx;
  Deadline(&rctx);
  v1::RotateTeamTokenRequest rot;
  rot.set_name("gamma");
  v1::TeamToken rotated;
  ASSERT_TRUE(Admin(admin_token_)->RotateTeamToken(&rctx, rot, &rotated).ok());
  EXPECT_EQ(GetJobCode(first, *job), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(GetJobCode(rotated.token(), *job), grpc::StatusCode::OK);

  // Revoked through the CLI, with the admin token in a file.
  const std::string admin_file = cluster_->dir() + "/db/admin.token";
  auto revoke = RunCommand({"/usr/bin/env", "-u", "KEVO_TOKEN", "KEVO_TOKEN_FILE=" + admin_file, Kevo(), "admin",
                            "team", "revoke", "gamma", "--coordinator", address()},
                           absl::Seconds(30));
  ASSERT_EQ(revoke.exit_code, 0) << revoke.err;
  EXPECT_TRUE(absl::StrContains(revoke.out, "1 token(s) revoked")) << revoke.out;
  EXPECT_EQ(GetJobCode(rotated.token(), *job), grpc::StatusCode::UNAUTHENTICATED);
  // The admin still sees the team's job, and the revocation survives a restart.
  EXPECT_EQ(GetJobCode(admin_token_, *job), grpc::StatusCode::OK);
  cluster_->StopCoordinator(SIGTERM);
  ASSERT_TRUE(cluster_->StartCoordinator({"--auth"}).ok());
  EXPECT_EQ(GetJobCode(rotated.token(), *job), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(GetJobCode(admin_token_, *job), grpc::StatusCode::OK);
}

TEST_F(AuthTest, ATeamPastItsQuotasIsRefusedWithWhatWasExceeded) {
  const std::string t = CreateTeam("delta", /*max_running_jobs=*/1);
  ASSERT_TRUE(Submit(t).ok());
  auto second = Submit(t);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(absl::StrContains(second.status().message(), "its limit (max_running_jobs) is 1")) << second.status();

  // Two evaluations a day: the third is refused, and so is a new job.
  v1::CreateTeamRequest req;
  req.set_name("frugal");
  req.set_max_evaluations_per_day(2);
  v1::TeamToken frugal;
  grpc::ClientContext cctx;
  Deadline(&cctx);
  ASSERT_TRUE(Admin(admin_token_)->CreateTeam(&cctx, req, &frugal).ok());
  auto stub = Jobs(frugal.token());
  for (int i = 0; i < 3; ++i) {
    grpc::ClientContext ctx;
    Deadline(&ctx);
    v1::EvaluateRequest ereq;
    *ereq.mutable_task() = task_;
    ereq.mutable_candidate()->set_source(absl::StrCat("// ", i, "\n"));
    ereq.set_platform("nowhere");
    auto reader = stub->EvaluateCandidate(&ctx, ereq);
    v1::EvaluateEvent event;
    if (i < 2) {
      ASSERT_TRUE(reader->Read(&event)) << i;
      EXPECT_FALSE(event.accepted_eval_id().empty());
      ctx.TryCancel();
    } else {
      EXPECT_FALSE(reader->Read(&event));
      grpc::Status st = reader->Finish();
      EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
      EXPECT_TRUE(absl::StrContains(st.error_message(), "resets at 00:00 UTC")) << st.error_message();
    }
  }
  auto job = Submit(frugal.token());
  EXPECT_EQ(job.status().code(), absl::StatusCode::kResourceExhausted) << job.status();
}

// A campaign belongs to the team that submitted it, whatever its file says:
// another team cannot see, list or cancel it; it launches no more jobs than
// the team's max_running_jobs allows, the rest waiting queued.
TEST_F(AuthTest, ACampaignIsItsTeamsAloneAndKeepsWithinItsQuota) {
  const std::string a = CreateTeam("camp-a", /*max_running_jobs=*/1);
  const std::string b = CreateTeam("camp-b");
  auto campaigns = [&](const std::string& token) {
    return v1::CampaignService::NewStub(ChannelWith(address(), token));
  };
  v1::SubmitCampaignRequest req;
  req.mutable_spec()->set_name("quota");
  req.mutable_spec()->set_team("camp-b");    // claimed: ignored for a team's token
  req.mutable_spec()->add_platforms("amd");  // no amd worker here: the jobs stay running
  for (const char* name : {"first", "second"}) {
    v1::CampaignTask* t = req.add_tasks();
    t->set_path(name);
    *t->mutable_task() = task_;
    t->mutable_task()->set_name(name);
  }
  v1::SubmitCampaignResponse submitted;
  {
    grpc::ClientContext ctx;
    Deadline(&ctx);
    grpc::Status st = campaigns(a)->SubmitCampaign(&ctx, req, &submitted);
    ASSERT_TRUE(st.ok()) << st.error_message();
  }
  const std::string id = submitted.campaign_id();
  auto get = [&](const std::string& token, v1::Campaign* c) {
    grpc::ClientContext ctx;
    Deadline(&ctx);
    v1::GetCampaignRequest g;
    g.set_campaign_id(id);
    return campaigns(token)->GetCampaign(&ctx, g, c).error_code();
  };
  v1::Campaign c;
  absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (absl::Now() < deadline) {
    ASSERT_EQ(get(a, &c), grpc::StatusCode::OK);
    if (c.jobs_by_state().at("running") > 0) break;
    absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_EQ(c.spec().team(), "camp-a");
  absl::SleepFor(absl::Seconds(2));  // the campaign loop has had two more chances to launch
  ASSERT_EQ(get(a, &c), grpc::StatusCode::OK);
  EXPECT_EQ(c.jobs_by_state().at("running"), 1);
  EXPECT_EQ(c.jobs_by_state().at("queued"), 1) << "launched past max_running_jobs";

  v1::Campaign other;
  EXPECT_EQ(get(b, &other), grpc::StatusCode::NOT_FOUND);
  {
    grpc::ClientContext ctx;
    Deadline(&ctx);
    v1::ListCampaignsResponse list;
    ASSERT_TRUE(campaigns(b)->ListCampaigns(&ctx, v1::ListCampaignsRequest(), &list).ok());
    EXPECT_EQ(list.campaigns_size(), 0);
  }
  {
    grpc::ClientContext ctx;
    Deadline(&ctx);
    v1::CancelCampaignRequest cancel;
    cancel.set_campaign_id(id);
    v1::Campaign r;
    EXPECT_EQ(campaigns(b)->CancelCampaign(&ctx, cancel, &r).error_code(), grpc::StatusCode::NOT_FOUND);
  }
  EXPECT_EQ(get(a, &c), grpc::StatusCode::OK);
  EXPECT_EQ(c.state(), v1::CAMPAIGN_RUNNING) << "another team's cancel took effect";
  {
    grpc::ClientContext ctx;
    Deadline(&ctx);
    v1::CancelCampaignRequest cancel;
    cancel.set_campaign_id(id);
    v1::Campaign r;
    ASSERT_TRUE(campaigns(a)->CancelCampaign(&ctx, cancel, &r).ok());
    EXPECT_EQ(r.state(), v1::CAMPAIGN_CANCELLED);
    EXPECT_EQ(r.jobs_by_state().at("cancelled"), 1);  // the entry never launched
    // The launched job was cancelled too: its evaluations no worker took are
    // withdrawn (CANCELLED), so it ends at once, and the campaign counts it.
    std::string launched;
    for (const auto& e : r.entries()) {
      if (!e.job_id().empty()) launched = e.job_id();
    }
    v1::Job job;
    absl::Time until = absl::Now() + absl::Seconds(10);
    while (absl::Now() < until && job.state() != v1::JOB_CANCELLED) {
      ASSERT_EQ(GetJobCode(a, launched, &job), grpc::StatusCode::OK);
      absl::SleepFor(absl::Milliseconds(100));
    }
    EXPECT_EQ(job.state(), v1::JOB_CANCELLED) << job.stop_reason();
    EXPECT_EQ(job.stop_reason(), "cancelled");
    EXPECT_GT(job.by_status().at("CANCELLED"), 0);
    v1::Campaign after;
    until = absl::Now() + absl::Seconds(10);
    while (absl::Now() < until) {
      ASSERT_EQ(get(a, &after), grpc::StatusCode::OK);
      if (after.jobs_by_state().at("cancelled") == 2) break;
      absl::SleepFor(absl::Milliseconds(100));
    }
    EXPECT_EQ(after.jobs_by_state().at("cancelled"), 2);
    EXPECT_EQ(after.jobs_by_state().at("running"), 0);
  }
  {
    grpc::ClientContext ctx;
    Deadline(&ctx);
    v1::ListCampaignsResponse list;
    ASSERT_TRUE(campaigns(admin_token_)->ListCampaigns(&ctx, v1::ListCampaignsRequest(), &list).ok());
    ASSERT_EQ(list.campaigns_size(), 1);
    EXPECT_EQ(list.campaigns(0).campaign_id(), id);
  }
}

TEST_F(AuthTest, WorkersWithoutAWorkerTokenAreRefused) {
  // kevo-worker with no token: refused, and it exits saying so.
  const std::string dir = cluster_->dir();
  auto bare = RunCommand(
      {"/usr/bin/env", "-u", "KEVO_TOKEN", "-u", "KEVO_TOKEN_FILE", "HOME=/nonexistent", BinDir() + "/kevo-worker",
       "--coordinator", address(), "--work-dir", dir + "/w0", "--profile-cap", "0.3"},
      absl::Seconds(120));
  EXPECT_EQ(bare.exit_code, 1) << bare.err;
  EXPECT_TRUE(absl::StrContains(bare.err, "refused this worker's credentials")) << bare.err;
  // A team's token is not a worker's.
  const std::string team = CreateTeam("epsilon");
  WriteTextFile(dir + "/team.token", team + "\n");
  auto as_team = RunCommand({BinDir() + "/kevo-worker", "--coordinator", address(), "--work-dir", dir + "/w1",
                             "--profile-cap", "0.3", "--token-file", dir + "/team.token"},
                            absl::Seconds(120));
  EXPECT_EQ(as_team.exit_code, 1) << as_team.err;
  EXPECT_TRUE(absl::StrContains(as_team.err, "worker token")) << as_team.err;

  // With a worker token it connects and serves.
  WriteTextFile(dir + "/worker.token", CreateWorkerToken("rack-1") + "\n");
  ASSERT_TRUE(cluster_->StartWorker("w-good", {"--token-file", dir + "/worker.token"}).ok());
  ASSERT_TRUE(cluster_->WaitForWorkers(1, absl::Seconds(90)).ok());

  // Revoked by the admin: its stream ends and the worker process exits.
  auto revoke = RunCommand({"/usr/bin/env", "KEVO_TOKEN=" + admin_token_, Kevo(), "admin", "worker", "revoke", "w-good",
                            "--coordinator", address()},
                           absl::Seconds(30));
  ASSERT_EQ(revoke.exit_code, 0) << revoke.err;
  EXPECT_TRUE(absl::StrContains(revoke.out, "rack-1")) << revoke.out;
  auto status = cluster_->worker("w-good")->Wait(absl::Seconds(30));
  ASSERT_TRUE(status.ok()) << "the revoked worker kept running";
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 1);
  grpc::ClientContext ctx;
  Deadline(&ctx);
  v1::ListWorkersResponse listed;
  ASSERT_TRUE(cluster_->stub()->ListWorkers(&ctx, v1::ListWorkersRequest(), &listed).ok());
  EXPECT_EQ(listed.workers_size(), 0);
}

TEST_F(AuthTest, ListJobsPagesThroughATeamsOwnJobsInOrder) {
  const std::string mine = CreateTeam("paged");
  const std::string other = CreateTeam("unpaged");
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) {
    auto id = Submit(mine);
    ASSERT_TRUE(id.ok()) << id.status();
    ids.push_back(*id);
    ASSERT_TRUE(Submit(other).ok());
  }
  std::sort(ids.begin(), ids.end());
  std::vector<std::string> paged;
  v1::ListJobsRequest req;
  req.set_page_size(2);
  int pages = 0;
  do {
    grpc::ClientContext ctx;
    Deadline(&ctx);
    v1::ListJobsResponse resp;
    ASSERT_TRUE(Jobs(mine)->ListJobs(&ctx, req, &resp).ok());
    EXPECT_LE(resp.jobs_size(), 2);
    for (const auto& j : resp.jobs()) paged.push_back(j.job_id());
    req.set_page_token(resp.next_page_token());
    ++pages;
  } while (!req.page_token().empty() && pages < 10);
  EXPECT_EQ(pages, 3);
  EXPECT_EQ(paged, ids);
  // The admin's --team filter gives the same five; a token from nowhere is refused.
  v1::ListJobsRequest filtered;
  filtered.set_team("paged");
  grpc::ClientContext fctx;
  Deadline(&fctx);
  v1::ListJobsResponse all;
  ASSERT_TRUE(Jobs(admin_token_)->ListJobs(&fctx, filtered, &all).ok());
  EXPECT_EQ(all.jobs_size(), 5);
  v1::ListJobsRequest bad;
  bad.set_page_size(2);
  bad.set_page_token("j-not-a-job");
  grpc::ClientContext bctx;
  Deadline(&bctx);
  EXPECT_EQ(Jobs(mine)->ListJobs(&bctx, bad, &all).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

// A synthetic worker: one WorkerService stream with a token.
class FakeWorker {
 public:
  FakeWorker(const std::string& address, const std::string& token, const std::string& id, const std::string& platform)
      : stub_(v1::WorkerService::NewStub(ChannelWith(address, token))) {
    // A test whose coordinator never assigns fails at this deadline, not at ctest's.
    ctx_.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    stream_ = stub_->Connect(&ctx_);
    v1::WorkerMessage hello;
    hello.mutable_hello()->set_worker_id(id);
    hello.mutable_hello()->set_platform(platform);
    hello.mutable_hello()->set_slots(1);
    hello.mutable_hello()->add_languages("c++");
    stream_->Write(hello);
    v1::CoordinatorMessage welcome;
    connected_ = stream_->Read(&welcome) && welcome.has_welcome();
  }
  ~FakeWorker() {
    ctx_.TryCancel();
    stream_->Finish();
  }
  bool connected() const { return connected_; }
  bool Send(const v1::WorkerMessage& m) { return stream_->Write(m); }
  // The next assignment, or nullopt when the stream ends.
  std::optional<v1::Assignment> NextAssignment() {
    v1::CoordinatorMessage m;
    while (stream_->Read(&m)) {
      if (m.has_assignment()) return m.assignment();
    }
    return std::nullopt;
  }
  bool Report(const std::string& eval_id, int attempt, double time_s) {
    v1::WorkerMessage m;
    m.mutable_result()->set_eval_id(eval_id);
    m.mutable_result()->set_attempt(attempt);
    m.mutable_result()->mutable_evaluation()->set_status(v1::OK);
    m.mutable_result()->mutable_evaluation()->mutable_timing()->set_median_s(time_s);
    m.mutable_result()->mutable_evaluation()->set_speedup(1000);
    return Send(m);
  }

 private:
  std::unique_ptr<v1::WorkerService::Stub> stub_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::WorkerMessage, v1::CoordinatorMessage>> stream_;
  bool connected_ = false;
};

TEST_F(AuthTest, AResultFromAWorkerThatDoesNotHoldTheLeaseIsRefused) {
  const std::string worker_token = CreateWorkerToken("synthetic");
  // A stream without a token never gets a Welcome.
  FakeWorker anonymous(address(), "", "anon", "synth");
  EXPECT_FALSE(anonymous.connected());

  const std::string team = CreateTeam("zeta");
  grpc::ClientContext ectx;
  ectx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  v1::EvaluateRequest ereq;
  *ereq.mutable_task() = task_;
  ereq.mutable_candidate()->set_source("// evaluated by a synthetic worker\n");
  ereq.set_platform("synth");
  auto reader = Jobs(team)->EvaluateCandidate(&ectx, ereq);
  v1::EvaluateEvent accepted;
  ASSERT_TRUE(reader->Read(&accepted));
  const std::string eval_id = accepted.accepted_eval_id();
  ASSERT_FALSE(eval_id.empty());

  auto still_queued = [&] {
    grpc::ClientContext g;
    Deadline(&g);
    v1::GetEvaluationRequest req;
    req.set_eval_id(eval_id);
    v1::Evaluation ev;
    return Jobs(team)->GetEvaluation(&g, req, &ev).error_code() == grpc::StatusCode::UNAVAILABLE;
  };
  // A worker of another platform (never leased it) reports a result.
  FakeWorker liar(address(), worker_token, "liar", "other");
  ASSERT_TRUE(liar.connected());
  ASSERT_TRUE(liar.Report(eval_id, 1, 1e-9));
  absl::SleepFor(absl::Milliseconds(500));
  EXPECT_TRUE(still_queued()) << "a result from a worker that was not leased the evaluation was recorded";

  // The worker that is leased it answers; the liar's second try (same
  // attempt number) changes nothing, and the record is the holder's.
  FakeWorker holder(address(), worker_token, "holder", "synth");
  ASSERT_TRUE(holder.connected());
  auto assignment = holder.NextAssignment();
  ASSERT_TRUE(assignment.has_value());
  EXPECT_EQ(assignment->eval_id(), eval_id);
  ASSERT_TRUE(liar.Report(eval_id, assignment->attempt(), 1e-9));
  absl::SleepFor(absl::Milliseconds(500));
  EXPECT_TRUE(still_queued());
  ASSERT_TRUE(holder.Report(eval_id, assignment->attempt(), 0.25));
  v1::EvaluateEvent event;
  std::optional<v1::Evaluation> final;
  while (reader->Read(&event)) {
    if (event.has_final()) final = event.final();
  }
  ASSERT_TRUE(final.has_value());
  EXPECT_EQ(final->worker_id(), "holder");
  EXPECT_DOUBLE_EQ(final->timing().median_s(), 0.25);
}

// A worker that heartbeats "still running" forever but never reports a
// stage of the evaluation loses its lease; another worker gets it, and the
// silent one's late result is refused.
TEST(LeaseTest, HeartbeatsWithoutProgressDoNotKeepALease) {
  Cluster cluster(MakeTempDir("kevo-lease"));
  ASSERT_TRUE(cluster.StartCoordinator({"--lease-progress-seconds", "2"}).ok());
  auto task = task::LoadTaskDir(SourceDir() + "/tasks/vector_add");
  ASSERT_TRUE(task.ok());
  grpc::ClientContext ectx;
  ectx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  v1::EvaluateRequest ereq;
  *ereq.mutable_task() = *task;
  ereq.mutable_candidate()->set_source("// leased twice\n");
  ereq.set_platform("synth");
  auto reader = cluster.stub()->EvaluateCandidate(&ectx, ereq);
  v1::EvaluateEvent accepted;
  ASSERT_TRUE(reader->Read(&accepted));

  FakeWorker silent(cluster.address(), "", "silent", "synth");
  ASSERT_TRUE(silent.connected());
  auto first = silent.NextAssignment();
  ASSERT_TRUE(first.has_value());
  // Heartbeats claiming the evaluation, for longer than the progress limit.
  for (int i = 0; i < 8; ++i) {
    v1::WorkerMessage hb;
    v1::RunningEvaluation* held = hb.mutable_heartbeat()->add_running_evaluations();
    held->set_eval_id(first->eval_id());
    held->set_attempt(first->attempt());
    ASSERT_TRUE(silent.Send(hb));
    absl::SleepFor(absl::Milliseconds(500));
  }
  FakeWorker honest(cluster.address(), "", "honest", "synth");
  ASSERT_TRUE(honest.connected());
  auto second = honest.NextAssignment();
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->eval_id(), first->eval_id());
  EXPECT_GT(second->attempt(), first->attempt());  // the silent worker may have been re-leased it meanwhile
  ASSERT_TRUE(silent.Report(first->eval_id(), first->attempt(), 1e-9));
  absl::SleepFor(absl::Milliseconds(300));
  ASSERT_TRUE(honest.Report(second->eval_id(), second->attempt(), 0.5));
  v1::EvaluateEvent event;
  std::optional<v1::Evaluation> final;
  bool said_why = false;
  while (reader->Read(&event)) {
    if (event.has_stage() && absl::StrContains(event.stage().message(), "no stage event")) said_why = true;
    if (event.has_final()) final = event.final();
  }
  ASSERT_TRUE(final.has_value());
  EXPECT_EQ(final->worker_id(), "honest");
  EXPECT_DOUBLE_EQ(final->timing().median_s(), 0.5);
  EXPECT_TRUE(said_why) << "the requeue event does not say the lease lapsed for lack of progress";
}

TEST_F(AuthTest, WorkerSlotsAreSharedByTeamWeightAndALightTeamIsNotStarved) {
  auto create = [&](const std::string& name, double weight) {
    v1::CreateTeamRequest req;
    req.set_name(name);
    req.set_weight(weight);
    v1::TeamToken resp;
    grpc::ClientContext ctx;
    Deadline(&ctx);
    EXPECT_TRUE(Admin(admin_token_)->CreateTeam(&ctx, req, &resp).ok());
    return resp.token();
  };
  const std::string light = create("light", 1), heavy = create("heavy", 3), small = create("small", 1);
  struct Call {
    std::unique_ptr<grpc::ClientContext> ctx = std::make_unique<grpc::ClientContext>();
    std::unique_ptr<grpc::ClientReader<v1::EvaluateEvent>> reader;
  };
  std::vector<Call> calls;
  std::map<std::string, std::string> team_of;  // eval id -> team
  auto submit = [&](const std::string& token, const std::string& team, int n) {
    auto stub = Jobs(token);
    for (int i = 0; i < n; ++i) {
      Call c;
      v1::EvaluateRequest req;
      *req.mutable_task() = task_;
      req.mutable_candidate()->set_source(absl::StrCat("// ", team, " ", i, "\n"));
      req.set_platform("synth");
      c.reader = stub->EvaluateCandidate(c.ctx.get(), req);
      v1::EvaluateEvent accepted;
      ASSERT_TRUE(c.reader->Read(&accepted));
      team_of[accepted.accepted_eval_id()] = team;
      calls.push_back(std::move(c));
    }
  };
  // The light team queues first: first come, first served would give it
  // every slot until its 40 evaluations ran out.
  submit(light, "light", 40);
  submit(heavy, "heavy", 80);
  submit(small, "small", 1);

  // One synthetic worker with 4 slots answers each assignment as it comes.
  const std::string worker_token = CreateWorkerToken("fair");
  auto stub = v1::WorkerService::NewStub(ChannelWith(address(), worker_token));
  grpc::ClientContext wctx;
  auto stream = stub->Connect(&wctx);
  v1::WorkerMessage hello;
  hello.mutable_hello()->set_worker_id("fair-worker");
  hello.mutable_hello()->set_platform("synth");
  hello.mutable_hello()->set_slots(4);
  ASSERT_TRUE(stream->Write(hello));
  std::map<std::string, int> leased;
  constexpr int kWindow = 60;  // both big teams still have work queued throughout
  v1::CoordinatorMessage in;
  int seen = 0;
  while (seen < kWindow && stream->Read(&in)) {
    if (!in.has_assignment()) continue;
    ++seen;
    ++leased[team_of[in.assignment().eval_id()]];
    v1::WorkerMessage result;
    result.mutable_result()->set_eval_id(in.assignment().eval_id());
    result.mutable_result()->set_attempt(in.assignment().attempt());
    result.mutable_result()->mutable_evaluation()->set_status(v1::OK);
    ASSERT_TRUE(stream->Write(result));
  }
  ASSERT_EQ(seen, kWindow);
  wctx.TryCancel();
  stream->Finish();
  ASSERT_GT(leased["light"], 0);
  const double ratio = static_cast<double>(leased["heavy"]) / leased["light"];
  EXPECT_NEAR(ratio, 3.0, 0.3) << "heavy " << leased["heavy"] << ", light " << leased["light"];
  // The small team's one evaluation ran within the window.
  EXPECT_EQ(leased["small"], 1);
  for (auto& c : calls) c.ctx->TryCancel();
}

// Certificates made with openssl: a CA, and a server certificate for
// 127.0.0.1 signed by it. Returns false when openssl fails.
bool MakeCertificates(const std::string& dir) {
  const std::string ca = dir + "/ca";
  const std::string srv = dir + "/server";
  WriteTextFile(dir + "/san.ext", "subjectAltName=IP:127.0.0.1,DNS:localhost\n");
  const std::vector<std::vector<std::string>> steps = {
      {"/usr/bin/openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=kevo-test-ca",
       "-keyout", ca + ".key", "-out", ca + ".pem"},
      {"/usr/bin/openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost", "-keyout", srv + ".key",
       "-out", srv + ".csr"},
      {"/usr/bin/openssl", "x509", "-req", "-in", srv + ".csr", "-CA", ca + ".pem", "-CAkey", ca + ".key",
       "-CAcreateserial", "-days", "2", "-extfile", dir + "/san.ext", "-out", srv + ".pem"}};
  for (const auto& argv : steps) {
    auto r = RunCommand(argv, absl::Seconds(60));
    if (r.exit_code != 0) {
      ADD_FAILURE() << argv[1] << ": " << r.err;
      return false;
    }
  }
  return true;
}

TEST(TlsTest, TheCoordinatorServesTlsAndRefusesPlaintextOffLoopback) {
  const std::string dir = MakeTempDir("kevo-tls");
  ASSERT_TRUE(MakeCertificates(dir));
  // Plaintext on an address other than loopback is refused at start.
  auto open =
      RunCommand({BinDir() + "/kevo-coordinator", "--listen", "0.0.0.0:0", "--db", dir + "/db0"}, absl::Seconds(60));
  EXPECT_NE(open.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(open.err, "refusing plaintext")) << open.err;

  Cluster cluster(dir);
  ASSERT_TRUE(
      cluster.StartCoordinator({"--auth", "--tls-cert", dir + "/server.pem", "--tls-key", dir + "/server.key"}).ok());
  const std::string admin = std::string(absl::StripAsciiWhitespace(ReadTextFile(dir + "/db/admin.token")));
  const std::string ca = ReadTextFile(dir + "/ca.pem");
  rpc::ClientCredentials tls;
  tls.token = admin;
  tls.tls_ca_pem = ca;
  auto stub = v1::JobService::NewStub(rpc::ClientChannel(cluster.address(), tls));
  grpc::ClientContext ok_ctx;
  Deadline(&ok_ctx);
  v1::ListJobsResponse resp;
  grpc::Status st = stub->ListJobs(&ok_ctx, v1::ListJobsRequest(), &resp);
  EXPECT_TRUE(st.ok()) << st.error_message();

  // A plaintext client does not get through.
  grpc::ClientContext plain_ctx;
  Deadline(&plain_ctx, 5);
  st = Jobs(cluster.address(), admin)->ListJobs(&plain_ctx, v1::ListJobsRequest(), &resp);
  EXPECT_FALSE(st.ok());

  // A worker with the CA and a worker token connects over TLS.
  v1::CreateWorkerTokenRequest req;
  req.set_name("tls-worker");
  v1::WorkerToken token;
  grpc::ClientContext admin_ctx;
  Deadline(&admin_ctx);
  ASSERT_TRUE(v1::AdminService::NewStub(rpc::ClientChannel(cluster.address(), tls))
                  ->CreateWorkerToken(&admin_ctx, req, &token)
                  .ok());
  WriteTextFile(dir + "/worker.token", token.token() + "\n");
  ASSERT_TRUE(cluster.StartWorker("w-tls", {"--token-file", dir + "/worker.token", "--tls-ca", dir + "/ca.pem"}).ok());
  cluster.UseCredentials(admin, ca);
  EXPECT_TRUE(cluster.WaitForWorkers(1, absl::Seconds(90)).ok());
}

}  // namespace
}  // namespace kevo::testing
