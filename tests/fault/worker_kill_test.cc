// kill -9 of a worker during each stage of an evaluation (compile, validate,
// profile), told apart by the worker's "[e-1a2b/1] validate started" lines:
// two workers run a job of a task slowed so that each stage lasts seconds
// (SlowStagesTask); the first worker is killed as soon as its first
// evaluation enters the stage. The evaluation must go to the other worker,
// be recorded once, from it, and the job must end with its whole budget,
// each node evaluated and recorded exactly once.
#include <signal.h>

#include <ostream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "tests/fault/fault_cases.h"
#include "tests/fault/fault_testing.h"
#include "tests/integration/cluster.h"

namespace kevo::testing {
namespace {

struct Stage {
  const char* name;  // as the worker logs it
  const char* row;   // its fault case
};

// For ctest's test names (gtest prints an unknown parameter's bytes).
void PrintTo(const Stage& stage, std::ostream* os) { *os << stage.name; }

class WorkerKillTest : public ::testing::TestWithParam<Stage> {};

TEST_P(WorkerKillTest, TheEvaluationGoesToTheOtherWorkerAndIsRecordedOnce) {
  constexpr int kBudget = 2;
  const Stage& stage = GetParam();
  Cluster cluster(MakeTempDir(absl::StrCat("kevo-fault-kill-", stage.name)));
  ASSERT_TRUE(cluster.StartCoordinator().ok());
  // Timing PyTorch too would add seconds and nothing to what is shown.
  for (const char* id : {"worker-a", "worker-b"}) ASSERT_TRUE(cluster.StartWorker(id, {"--production", "off"}).ok());
  ASSERT_TRUE(cluster.WaitForWorkers(2, absl::Seconds(90)).ok());
  auto job_id = SubmitJob(cluster, SlowStagesTask(), kBudget, /*seed=*/5);
  ASSERT_TRUE(job_id.ok()) << job_id.status();

  const std::string victim_log = cluster.dir() + "/worker-worker-a.log";
  auto victim = WaitForStageStart(victim_log, stage.name, absl::Minutes(2));
  ASSERT_TRUE(victim.ok()) << victim.status();
  cluster.worker("worker-a")->Kill(SIGKILL);
  ASSERT_TRUE(cluster.worker("worker-a")->Wait(absl::Seconds(10)).ok());
  // It died inside that stage: its log names no later stage of the
  // evaluation, nor its end.
  EXPECT_EQ(StagesLogged(victim_log, *victim).back(), stage.name) << "killed too late; see " << victim_log;

  const v1::Job job = WaitForJobEnd(cluster, *job_id, absl::Minutes(3));
  ASSERT_EQ(job.state(), v1::JOB_DONE) << job.ShortDebugString();
  const std::string eval_id = std::vector<std::string>(absl::StrSplit(*victim, '/'))[0];
  auto evaluation = GetEvaluation(cluster, eval_id);
  ASSERT_TRUE(evaluation.ok()) << evaluation.status();
  ExpectOutcome(FaultCaseNamed(stage.row), absl::StrCat(v1::JobState_Name(job.state()), "; the evaluation ",
                                                        EvaluationOutcome(*evaluation, "worker-b")));

  cluster.StopCoordinator(SIGTERM);
  auto stored = ReadStoredJob(cluster.dir() + "/db", *job_id);
  ASSERT_TRUE(stored.ok()) << stored.status();
  ExpectEachNodeEvaluatedOnce(*stored, kBudget, {victim_log, cluster.dir() + "/worker-worker-b.log"});
  EXPECT_EQ(stored->evals[eval_id].workers_lost(), 1);
}

INSTANTIATE_TEST_SUITE_P(Stages, WorkerKillTest,
                         ::testing::Values(Stage{"compile", "worker_killed_compiling"},
                                           Stage{"validate", "worker_killed_validating"},
                                           Stage{"profile", "worker_killed_profiling"}),
                         [](const ::testing::TestParamInfo<Stage>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace kevo::testing
