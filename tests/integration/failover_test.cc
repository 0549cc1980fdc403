// Real processes on 127.0.0.1: a coordinator and two workers. One worker is
// killed with SIGKILL in the middle of an evaluation; the evaluation must be
// re-leased to the other and recorded exactly once. And an evaluation whose
// workers are killed twice while they hold it is quarantined, not leased to
// a third: the count of workers lost survives a coordinator restart.
#include <signal.h>

#include <algorithm>
#include <fstream>
#include <optional>
#include <sstream>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "common/task/task_loader.h"
#include "coordinator/store/store.h"
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

// The evaluation's record as the coordinator wrote it to RocksDB (the
// coordinator must be stopped).
v1::EvalRecord StoredRecord(Cluster& cluster, const std::string& eval_id) {
  auto store = store::Store::Open(cluster.dir() + "/db");
  EXPECT_TRUE(store.ok()) << store.status();
  v1::EvalRecord record;
  if (!store.ok()) return record;
  auto value = (*store)->Get(store::Family::kEvals, "eval/" + eval_id);
  EXPECT_TRUE(value.ok() && value->has_value()) << eval_id;
  if (value.ok() && value->has_value()) record.ParseFromString(**value);
  return record;
}

// Whatever takes a worker process down while it holds an evaluation, twice:
// simulated by killing the lease holder with SIGKILL as soon as the client
// hears from it (a task or candidate that crashes the worker itself
// is what the kevo checks exist to prevent, so the test plays its part). The
// client's stream must end with QUARANTINED, and the third worker is never
// given it and stays up.
TEST(FailoverTest, AnEvaluationThatLosesTwoWorkersIsQuarantinedAndAThirdStaysUp) {
  Cluster cluster(MakeTempDir("kevo-quarantine"));
  ASSERT_TRUE(cluster.StartCoordinator().ok());
  for (const char* id : {"worker-a", "worker-b", "worker-c"}) ASSERT_TRUE(cluster.StartWorker(id).ok());
  ASSERT_TRUE(cluster.WaitForWorkers(3, absl::Seconds(90)).ok());

  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(5));
  auto reader = cluster.stub()->EvaluateCandidate(&ctx, VectorAddRequest("fast.cc"));
  v1::EvaluateEvent ev;
  std::string eval_id;
  std::vector<std::string> killed, requeues;
  std::optional<v1::Evaluation> final;
  while (reader->Read(&ev)) {
    if (ev.has_accepted_eval_id()) eval_id = ev.accepted_eval_id();
    // The first stage the client hears from a lease holder (ASSIGNED, or
    // for a lease given before the client subscribed, COMPILE): kill it.
    const std::string holder = ev.has_stage() ? ev.stage().worker_id() : "";
    if (!holder.empty() && std::find(killed.begin(), killed.end(), holder) == killed.end()) {
      ASSERT_NE(cluster.worker(holder), nullptr) << holder;
      ASSERT_LT(killed.size(), 2u) << "leased to a third worker, " << holder << ", after two were lost";
      cluster.worker(holder)->Kill(SIGKILL);
      killed.push_back(holder);
    }
    if (ev.has_stage() && ev.stage().stage() == v1::STAGE_QUEUED) requeues.push_back(ev.stage().message());
    if (ev.has_final()) final = ev.final();
  }
  ASSERT_TRUE(reader->Finish().ok());
  ASSERT_EQ(killed.size(), 2u);
  ASSERT_TRUE(final.has_value()) << "the client's stream ended without the evaluation";
  EXPECT_EQ(final->status(), v1::QUARANTINED) << final->diagnostics().message();
  EXPECT_TRUE(absl::StrContains(final->diagnostics().message(),
                                absl::StrCat("quarantined: 2 workers were lost while running it (the last: worker ",
                                             killed[1], " disconnected mid-evaluation)")))
      << final->diagnostics().message();
  EXPECT_EQ(final->eval_id(), eval_id);
  EXPECT_EQ(final->attempt(), 2);
  ASSERT_EQ(requeues.size(), 1u);
  EXPECT_TRUE(absl::StrContains(requeues[0], absl::StrCat("worker ", killed[0],
                                                          " disconnected mid-evaluation (1 "
                                                          "worker lost while running it; quarantined at 2)")))
      << requeues[0];

  // The third worker is still up, connected, and evaluates the next
  // candidate as usual.
  std::string third;
  for (const char* id : {"worker-a", "worker-b", "worker-c"}) {
    if (std::find(killed.begin(), killed.end(), id) == killed.end()) third = id;
  }
  EXPECT_TRUE(cluster.worker(third)->Running());
  {
    grpc::ClientContext lctx;
    lctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::ListWorkersResponse workers;
    ASSERT_TRUE(cluster.stub()->ListWorkers(&lctx, v1::ListWorkersRequest(), &workers).ok());
    ASSERT_EQ(workers.workers_size(), 1);
    EXPECT_EQ(workers.workers(0).worker_id(), third);
    EXPECT_EQ(workers.workers(0).busy(), 0);
  }
  grpc::ClientContext nctx;
  nctx.set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(5));
  auto next = cluster.stub()->EvaluateCandidate(&nctx, VectorAddRequest("fast.cc"));
  std::optional<v1::Evaluation> next_final;
  while (next->Read(&ev)) {
    if (ev.has_final()) next_final = ev.final();
  }
  ASSERT_TRUE(next->Finish().ok());
  ASSERT_TRUE(next_final.has_value());
  EXPECT_EQ(next_final->status(), v1::OK) << next_final->diagnostics().message();
  EXPECT_EQ(next_final->worker_id(), third);

  cluster.StopCoordinator(SIGTERM);
  const v1::EvalRecord record = StoredRecord(cluster, eval_id);
  EXPECT_EQ(record.state(), v1::EVAL_DONE);
  EXPECT_EQ(record.workers_lost(), 2);
  EXPECT_EQ(record.evaluation().status(), v1::QUARANTINED);
}

// The evaluation took one of its workers down after a coordinator
// restart: the first loss is in the record, so the second, after kill -9 and
// restart of the coordinator, quarantines it.
TEST(FailoverTest, WorkersLostBeforeACoordinatorRestartStillCount) {
  Cluster cluster(MakeTempDir("kevo-quarantine-restart"));
  ASSERT_TRUE(cluster.StartCoordinator().ok());
  ASSERT_TRUE(cluster.StartWorker("worker-a").ok());
  ASSERT_TRUE(cluster.WaitForWorkers(1, absl::Seconds(90)).ok());
  std::string eval_id;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(2));
    auto reader = cluster.stub()->EvaluateCandidate(&ctx, VectorAddRequest("fast.cc"));
    v1::EvaluateEvent ev;
    bool requeued = false;
    while (!requeued && reader->Read(&ev)) {
      if (ev.has_accepted_eval_id()) eval_id = ev.accepted_eval_id();
      // Leased before the client subscribed: its first stage is COMPILE.
      if (ev.has_stage() && ev.stage().worker_id() == "worker-a") cluster.worker("worker-a")->Kill(SIGKILL);
      // Written to RocksDB before the event is sent.
      requeued = ev.has_stage() && ev.stage().stage() == v1::STAGE_QUEUED &&
                 absl::StrContains(ev.stage().message(), "mid-evaluation");
    }
    ASSERT_TRUE(requeued);
    ctx.TryCancel();
  }
  cluster.StopCoordinator(SIGKILL);
  EXPECT_EQ(StoredRecord(cluster, eval_id).workers_lost(), 1);

  ASSERT_TRUE(cluster.StartCoordinator().ok());
  ASSERT_TRUE(cluster.StartWorker("worker-b").ok());
  // GetEvaluation says "still EVAL_LEASED" once worker-b holds it: kill it then.
  absl::Time deadline = absl::Now() + absl::Minutes(2);
  grpc::Status st;
  bool killed = false;
  v1::Evaluation evaluation;
  while (absl::Now() < deadline) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::GetEvaluationRequest req;
    req.set_eval_id(eval_id);
    st = cluster.stub()->GetEvaluation(&ctx, req, &evaluation);
    if (st.ok()) break;
    if (!killed && absl::StrContains(st.error_message(), "EVAL_LEASED")) {
      cluster.worker("worker-b")->Kill(SIGKILL);
      killed = true;
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_TRUE(killed);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(evaluation.status(), v1::QUARANTINED) << evaluation.diagnostics().message();
  EXPECT_TRUE(absl::StrContains(evaluation.diagnostics().message(),
                                "quarantined: 2 workers were lost while running it (the last: worker worker-b "
                                "disconnected mid-evaluation)"))
      << evaluation.diagnostics().message();
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
