// Real processes on 127.0.0.1: what a task may ask for. The coordinator
// refuses, before queueing anything, a task whose sizes overflow int64 or
// exceed its limits, whichever RPC brings it (EvaluateCandidate, SubmitJob,
// SubmitCampaign). And a worker handed a task larger than its memory (a
// coordinator whose limits let it through) answers INFRA_ERROR naming the
// size and stays up to evaluate the next candidate: issue 22's task asked
// for 10^12 elements and took three workers down in a row.
#include <fstream>
#include <optional>
#include <sstream>

#include "absl/strings/match.h"
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "common/task/task_loader.h"
#include "kevo/v1/campaign.grpc.pb.h"
#include "tests/integration/cluster.h"

namespace kevo::testing {
namespace {

v1::Task VectorAdd() {
  auto task = task::LoadTaskDir(SourceDir() + "/tasks/vector_add");
  EXPECT_TRUE(task.ok()) << task.status();
  return task.ok() ? *task : v1::Task();
}

// vector_add with 10^12 elements at its timed binding: 3.6 TiB per vector.
v1::Task Huge() {
  v1::Task task = VectorAdd();
  (*task.mutable_time()->mutable_values())["n"] = 1000000000000;
  return task;
}

v1::Candidate Fast() {
  std::ifstream in(SourceDir() + "/tasks/vector_add/examples/fast.cc");
  std::stringstream ss;
  ss << in.rdbuf();
  v1::Candidate c;
  c.set_language("c++");
  c.set_source(ss.str());
  return c;
}

std::chrono::system_clock::time_point In(absl::Duration d) {
  return std::chrono::system_clock::now() + absl::ToChronoMilliseconds(d);
}

struct Evaluated {
  grpc::Status status;
  std::optional<v1::Evaluation> final;
};
Evaluated Evaluate(Cluster& cluster, const v1::Task& task) {
  grpc::ClientContext ctx;
  ctx.set_deadline(In(absl::Minutes(5)));
  v1::EvaluateRequest req;
  *req.mutable_task() = task;
  *req.mutable_candidate() = Fast();
  req.set_platform("cpu");
  auto reader = cluster.stub()->EvaluateCandidate(&ctx, req);
  Evaluated out;
  v1::EvaluateEvent event;
  while (reader->Read(&event)) {
    if (event.has_final()) out.final = event.final();
  }
  out.status = reader->Finish();
  return out;
}

TEST(TaskGuardTest, TheCoordinatorRefusesOversizedAndOverflowingTasksWhereverTheyEnter) {
  Cluster cluster(MakeTempDir("kevo-task-guard"));
  ASSERT_TRUE(cluster.StartCoordinator().ok());

  Evaluated huge = Evaluate(cluster, Huge());
  EXPECT_EQ(huge.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(huge.status.error_message(),
                                "task: time binding: tensor 'x' is 3.6 TiB (4000000000000 bytes of f32), above the "
                                "limit of 8 GiB per tensor"))
      << huge.status.error_message();
  EXPECT_FALSE(huge.final.has_value());

  // A shape that wraps int64 (to 0 here: 2^32 x 2^32) is refused as such.
  v1::Task wraps = VectorAdd();
  wraps.mutable_inputs(0)->set_shape(0, "n*n");
  (*wraps.mutable_validate(0)->mutable_values())["n"] = int64_t{1} << 32;
  Evaluated overflow = Evaluate(cluster, wraps);
  EXPECT_EQ(overflow.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(overflow.status.error_message(),
                                "validate binding 'small': tensor 'x': expression \"n*n\": the product of 4294967296 "
                                "and 4294967296 overflows int64"))
      << overflow.status.error_message();

  {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(absl::Seconds(30)));
    v1::SubmitJobRequest req;
    *req.mutable_spec()->mutable_task() = Huge();
    req.mutable_spec()->set_platform("cpu");
    v1::SubmitJobResponse resp;
    grpc::Status st = cluster.stub()->SubmitJob(&ctx, req, &resp);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_TRUE(absl::StrContains(st.error_message(), "task: time binding: tensor 'x' is 3.6 TiB"))
        << st.error_message();
  }
  {
    auto campaigns =
        v1::CampaignService::NewStub(grpc::CreateChannel(cluster.address(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    ctx.set_deadline(In(absl::Seconds(30)));
    v1::SubmitCampaignRequest req;
    req.mutable_spec()->set_name("nightly");
    req.mutable_spec()->add_platforms("cpu");
    v1::CampaignTask* t = req.add_tasks();
    t->set_path("tasks/vector_add");
    *t->mutable_task() = Huge();
    v1::SubmitCampaignResponse resp;
    grpc::Status st = campaigns->SubmitCampaign(&ctx, req, &resp);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_TRUE(absl::StrContains(st.error_message(), "task tasks/vector_add: time binding: tensor 'x' is 3.6 TiB"))
        << st.error_message();
  }

  // Nothing was queued: the coordinator holds no evaluation and no job.
  grpc::ClientContext ctx;
  ctx.set_deadline(In(absl::Seconds(30)));
  v1::ListJobsResponse jobs;
  ASSERT_TRUE(cluster.stub()->ListJobs(&ctx, v1::ListJobsRequest(), &jobs).ok());
  EXPECT_EQ(jobs.jobs_size(), 0);
}

TEST(TaskGuardTest, AWorkerHandedATaskLargerThanItsMemoryAnswersAndStaysUp) {
  Cluster cluster(MakeTempDir("kevo-task-guard-worker"));
  // Limits far above any host's memory: the task reaches the worker.
  ASSERT_TRUE(
      cluster
          .StartCoordinator({"--max-tensor-bytes", "9000000000000000000", "--max-binding-bytes", "9000000000000000000"})
          .ok());
  ASSERT_TRUE(cluster.StartWorker("worker-a").ok());
  ASSERT_TRUE(cluster.WaitForWorkers(1, absl::Seconds(90)).ok());

  Evaluated huge = Evaluate(cluster, Huge());
  ASSERT_TRUE(huge.status.ok()) << huge.status.error_message();
  ASSERT_TRUE(huge.final.has_value());
  EXPECT_EQ(huge.final->status(), v1::INFRA_ERROR) << huge.final->diagnostics().message();
  EXPECT_TRUE(absl::StrContains(huge.final->diagnostics().message(),
                                "the task's timed binding 'timed' needs 10.9 TiB (12000000000000 bytes)"))
      << huge.final->diagnostics().message();
  EXPECT_EQ(huge.final->worker_id(), "worker-a");
  EXPECT_EQ(huge.final->attempt(), 1);  // answered, not lost and requeued
  EXPECT_TRUE(cluster.worker("worker-a")->Running());

  // The same worker evaluates the next candidate as usual.
  Evaluated next = Evaluate(cluster, VectorAdd());
  ASSERT_TRUE(next.status.ok()) << next.status.error_message();
  ASSERT_TRUE(next.final.has_value());
  EXPECT_EQ(next.final->status(), v1::OK) << next.final->diagnostics().message();
  EXPECT_EQ(next.final->worker_id(), "worker-a");
  EXPECT_TRUE(cluster.worker("worker-a")->Running());
}

}  // namespace
}  // namespace kevo::testing
