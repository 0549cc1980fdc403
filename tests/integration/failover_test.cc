// Real processes on 127.0.0.1: a coordinator and two workers. One worker is
// killed with SIGKILL in the middle of an evaluation; the evaluation must be
// re-leased to the other and recorded exactly once.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <optional>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "coordinator/store/store.h"
#include "common/task/task_loader.h"
#include "kevo/v1/store.pb.h"
#include "tests/integration/cluster.h"

namespace kevo::testing {
namespace {

v1::EvaluateRequest VectorAddRequest(const std::string& candidate_file) {
  auto task = task::LoadTaskDir(SourceDir() + "/tasks/vector_add");
  EXPECT_TRUE(task.ok()) << task.status();
  v1::EvaluateRequest req;
  *req.mutable_task() = *task;
  std::ifstream in(SourceDir() + "/tasks/vector_add/examples/" + candidate_file);
  std::stringstream ss;
  ss << in.rdbuf();
  req.mutable_candidate()->set_language("c++");
  req.mutable_candidate()->set_source(ss.str());
  req.set_platform("cpu");
  return req;
}

TEST(FailoverTest, KilledWorkersEvaluationIsReleasedAndRecordedOnce) {
  Cluster cluster(MakeTempDir("kevo-failover"));
  ASSERT_TRUE(cluster.StartCoordinator().ok());
  ASSERT_TRUE(cluster.StartWorker("worker-a").ok());
  ASSERT_TRUE(cluster.StartWorker("worker-b").ok());
  ASSERT_TRUE(cluster.WaitForWorkers(2, absl::Seconds(90)).ok());

  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(5));
  auto reader = cluster.stub()->EvaluateCandidate(&ctx, VectorAddRequest("fast.cc"));
  v1::EvaluateEvent ev;
  std::string eval_id, killed, requeue_message;
  v1::Evaluation final;
  bool have_final = false;
  while (reader->Read(&ev)) {
    if (ev.has_accepted_eval_id()) eval_id = ev.accepted_eval_id();
    if (ev.has_stage() && ev.stage().stage() == v1::STAGE_COMPILE && killed.empty()) {
      // The worker finished compiling and is now validating: kill it.
      killed = ev.stage().worker_id();
      ASSERT_NE(cluster.worker(killed), nullptr) << killed;
      cluster.worker(killed)->Kill(SIGKILL);
    }
    if (ev.has_stage() && ev.stage().stage() == v1::STAGE_QUEUED) {
      requeue_message = ev.stage().message();
    }
    if (ev.has_final()) {
      final = ev.final();
      have_final = true;
    }
  }
  ASSERT_TRUE(reader->Finish().ok());
  ASSERT_FALSE(killed.empty());
  ASSERT_TRUE(have_final);
  EXPECT_NE(requeue_message.find("disconnected"), std::string::npos) << requeue_message;
  EXPECT_EQ(final.status(), v1::OK) << final.diagnostics().message();
  EXPECT_NE(final.worker_id(), killed);
  EXPECT_EQ(final.attempt(), 2);
  EXPECT_EQ(final.eval_id(), eval_id);

  // Exactly one record, done once, in the coordinator's RocksDB.
  cluster.StopCoordinator(SIGTERM);
  auto store = store::Store::Open(cluster.dir() + "/db");
  ASSERT_TRUE(store.ok()) << store.status();
  int records = 0;
  v1::EvalRecord record;
  ASSERT_TRUE((*store)
                  ->Scan(store::Family::kEvals, "eval/",
                         [&](std::string_view, std::string_view value) {
                           ++records;
                           record.ParseFromArray(value.data(), static_cast<int>(value.size()));
                           return true;
                         })
                  .ok());
  EXPECT_EQ(records, 1);
  EXPECT_EQ(record.eval_id(), eval_id);
  EXPECT_EQ(record.state(), v1::EVAL_DONE);
  EXPECT_EQ(record.attempt(), 2);
  EXPECT_EQ(record.evaluation().worker_id(), final.worker_id());
}

TEST(FailoverTest, QueuedEvaluationSurvivesCoordinatorKill) {
  Cluster cluster(MakeTempDir("kevo-restart"));
  ASSERT_TRUE(cluster.StartCoordinator().ok());
  // No worker yet: the evaluation waits in the queue.
  std::string eval_id;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    auto reader = cluster.stub()->EvaluateCandidate(&ctx, VectorAddRequest("fast.cc"));
    v1::EvaluateEvent ev;
    ASSERT_TRUE(reader->Read(&ev));
    eval_id = ev.accepted_eval_id();
    ctx.TryCancel();
  }
  ASSERT_FALSE(eval_id.empty());
  cluster.StopCoordinator(SIGKILL);

  ASSERT_TRUE(cluster.StartCoordinator().ok());
  ASSERT_TRUE(cluster.StartWorker("worker-a").ok());
  absl::Time deadline = absl::Now() + absl::Minutes(3);
  v1::Evaluation evaluation;
  grpc::Status st;
  do {
    absl::SleepFor(absl::Milliseconds(200));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::GetEvaluationRequest req;
    req.set_eval_id(eval_id);
    st = cluster.stub()->GetEvaluation(&ctx, req, &evaluation);
  } while (!st.ok() && absl::Now() < deadline);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(evaluation.status(), v1::OK) << evaluation.diagnostics().message();
  EXPECT_EQ(evaluation.eval_id(), eval_id);
}

TEST(FailoverTest, UnknownEvaluationIsNotFound) {
  Cluster cluster(MakeTempDir("kevo-notfound"));
  ASSERT_TRUE(cluster.StartCoordinator().ok());
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::GetEvaluationRequest req;
  req.set_eval_id("e-nope");
  v1::Evaluation evaluation;
  grpc::Status st = cluster.stub()->GetEvaluation(&ctx, req, &evaluation);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND);
}

// An evaluation for a platform no worker serves says so at once and ends as
// INFRA_ERROR at the queue timeout, instead of waiting forever.
TEST(FailoverTest, AnEvaluationNoWorkerCanTakeSaysSoAndTimesOut) {
  Cluster cluster(MakeTempDir("kevo-unserved"));
  ASSERT_TRUE(cluster.StartCoordinator({"--queue-timeout-seconds", "2"}).ok());
  auto task = task::LoadTaskDir(SourceDir() + "/tasks/vector_add");
  ASSERT_TRUE(task.ok());
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  v1::EvaluateRequest req;
  *req.mutable_task() = *task;
  req.mutable_candidate()->set_source("// waits for a worker that never comes\n");
  req.set_platform("amd");
  auto reader = cluster.stub()->EvaluateCandidate(&ctx, req);
  v1::EvaluateEvent event;
  bool told = false;
  std::optional<v1::Evaluation> final;
  const absl::Time start = absl::Now();
  while (reader->Read(&event)) {
    if (event.has_stage() && absl::StrContains(event.stage().message(), "no worker of platform 'amd'")) told = true;
    if (event.has_final()) final = event.final();
  }
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_TRUE(told) << "the caller was not told that no amd worker is connected";
  ASSERT_TRUE(final.has_value());
  EXPECT_EQ(final->status(), v1::INFRA_ERROR);
  EXPECT_TRUE(absl::StrContains(final->diagnostics().message(), "no worker of platform 'amd' connected within"))
      << final->diagnostics().message();
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
}

}  // namespace
}  // namespace kevo::testing
