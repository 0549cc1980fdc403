// kill -9 of the coordinator 20 times while a job runs on three workers, at
// random short intervals (the coordinator restarted on the same port each
// time, so the workers reconnect): every other kill comes a random moment
// after the job stored a result, so that at least ten fall among the writes
// a result sets off (the node's result, the next proposals, their leases),
// whatever the host's load. At the end the job is done with its whole
// budget, no node lost or evaluated twice (each finished once on the
// workers, recorded once), and the store opens and reads cleanly after a
// last kill -9.
#include <signal.h>

#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include <gtest/gtest.h>

#include "common/task/task_loader.h"
#include "coordinator/store/keys.h"
#include "coordinator/store/store.h"
#include "tests/fault/fault_cases.h"
#include "tests/fault/fault_testing.h"
#include "tests/integration/cluster.h"

namespace kevo::testing {
namespace {

// How many of the coordinator's lifetimes in its log recorded a result:
// evidence that the kills fell among writes, not only between jobs.
int LifetimesThatRecorded(const std::string& log) {
  int lifetimes = 0;
  bool recorded = false;
  for (const absl::string_view line : absl::StrSplit(log, '\n')) {
    if (absl::StrContains(line, "coordinator listening on ")) {
      lifetimes += recorded;
      recorded = false;
    }
    recorded = recorded || absl::StrContains(line, "recorded evaluation ");
  }
  return lifetimes + recorded;
}

TEST(CoordinatorKillTest, TwentyKillsDuringAJobLoseNothingAndEvaluateNothingTwice) {
  constexpr int kKills = 20;
  constexpr int kBudget = 24;
  const FaultCase& row = FaultCaseNamed("coordinator_killed_repeatedly");
  Cluster cluster(MakeTempDir("kevo-fault-coordinator-kill"));
  // A worker that held a lease when the coordinator died has a lease period
  // to come back; a loaded host's worker needs more than the default's tenth.
  const std::vector<std::string> flags = {"--lease-seconds", "12"};
  ASSERT_TRUE(cluster.StartCoordinator(flags).ok());
  const std::vector<std::string> workers = {"worker-a", "worker-b", "worker-c"};
  std::vector<std::string> logs;
  for (const std::string& id : workers) {
    ASSERT_TRUE(cluster.StartWorker(id, {"--production", "off"}).ok());
    logs.push_back(cluster.dir() + "/worker-" + id + ".log");
  }
  ASSERT_TRUE(cluster.WaitForWorkers(static_cast<int>(workers.size()), absl::Seconds(90)).ok());
  auto task = task::LoadTaskDir(SourceDir() + "/tasks/vector_add");
  ASSERT_TRUE(task.ok()) << task.status();
  auto job_id = SubmitJob(cluster, *task, kBudget, /*seed=*/11);
  ASSERT_TRUE(job_id.ok()) << job_id.status();

  std::mt19937 rng(2026);
  int done_at_kill = 0;
  for (int kills = 0; kills < kKills; ++kills) {
    // Up and answering again (its restart replays RocksDB first); on every
    // other round, until the job stored one more result.
    const bool after_a_result = kills % 2 == 1;
    absl::StatusOr<v1::Job> job = cluster.GetJob(*job_id);
    for (const absl::Time end = absl::Now() + absl::Minutes(3);
         (!job.ok() || (after_a_result && job->evaluations_done() <= done_at_kill)) && absl::Now() < end;) {
      absl::SleepFor(absl::Milliseconds(50));
      job = cluster.GetJob(*job_id);
    }
    ASSERT_TRUE(job.ok()) << "after " << kills << " kills: " << job.status();
    ASSERT_EQ(job->state(), v1::JOB_RUNNING) << "the job ended after only " << kills << " kills: raise kBudget";
    ASSERT_TRUE(!after_a_result || job->evaluations_done() > done_at_kill) << "no progress after " << kills << " kills";
    absl::SleepFor(absl::Milliseconds(std::uniform_int_distribution<int>(after_a_result ? 0 : 100, 1500)(rng)));
    done_at_kill = job->evaluations_done();
    cluster.StopCoordinator(SIGKILL);
    ASSERT_TRUE(cluster.StartCoordinator(flags).ok()) << "restart " << kills + 1;
  }
  const v1::Job job = WaitForJobEnd(cluster, *job_id, absl::Minutes(5));
  ASSERT_EQ(job.state(), v1::JOB_DONE) << job.ShortDebugString();
  int unexpected = 0;
  for (const char* status : {"QUARANTINED", "INFRA_ERROR"}) {
    if (auto n = job.by_status().find(status); n != job.by_status().end()) unexpected += n->second;
  }
  ExpectOutcome(row, absl::StrCat(v1::JobState_Name(job.state()), " with ", job.evaluations_done(), " of ", kBudget,
                                  " evaluations, ", unexpected, " lost to the faults"));

  // The last kill -9 leaves the store as a crash does; it opens, and every
  // record in it reads.
  cluster.StopCoordinator(SIGKILL);
  const std::string coordinator_log = ReadTextFile(cluster.dir() + "/coordinator.log");
  EXPECT_GE(LifetimesThatRecorded(coordinator_log), kKills / 2)
      << "too few of the coordinator's lifetimes recorded a result: the kills did not fall among writes";
  auto stored = ReadStoredJob(cluster.dir() + "/db", *job_id);
  ASSERT_TRUE(stored.ok()) << stored.status();
  ExpectEachNodeEvaluatedOnce(*stored, kBudget, logs);
  auto db = store::Store::Open(cluster.dir() + "/db");
  ASSERT_TRUE(db.ok()) << db.status();
  int records = 0;
  ASSERT_TRUE((*db)
                  ->Scan(store::Family::kEvals, store::keys::kEvalPrefix,
                         [&](std::string_view key, std::string_view value) {
                           v1::EvalRecord r;
                           EXPECT_TRUE(r.ParseFromArray(value.data(), static_cast<int>(value.size()))) << key;
                           ++records;
                           return true;
                         })
                  .ok());
  // One record per node, and one per re-timing of a would-be best.
  int retimings = 0;
  for (const auto& [id, node] : stored->nodes) retimings += node.retiming().eval_id().empty() ? 0 : 1;
  EXPECT_EQ(records, kBudget + retimings);
}

}  // namespace
}  // namespace kevo::testing
