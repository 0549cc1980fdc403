// A slow worker: stopped (SIGSTOP) while it times a candidate, for longer
// than the lease, then continued. Its TCP connection stays up (the kernel
// answers for it), but it says nothing: its evaluation must go to the other
// worker and be recorded once, from it; when it continues, it finishes the
// evaluation and sends its result late, and that result is not recorded.
#include <signal.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include <gtest/gtest.h>

#include "tests/fault/fault_cases.h"
#include "tests/fault/fault_testing.h"
#include "tests/integration/cluster.h"

namespace kevo::testing {
namespace {

TEST(SlowWorkerTest, AStoppedWorkersLateResultIsNotRecordedAndTheOtherDoesTheWork) {
  Cluster cluster(MakeTempDir("kevo-fault-slow"));
  ASSERT_TRUE(cluster.StartCoordinator({"--lease-seconds", "5"}).ok());
  for (const char* id : {"worker-a", "worker-b"}) ASSERT_TRUE(cluster.StartWorker(id, {"--production", "off"}).ok());
  ASSERT_TRUE(cluster.WaitForWorkers(2, absl::Seconds(90)).ok());

  // Both idle: worker-a, first in id order, takes it; stop it while it times
  // the candidate, until the evaluation is recorded from worker-b.
  EvaluationStream stream(cluster, VectorAddRequest());
  const std::string log_a = cluster.dir() + "/worker-worker-a.log";
  auto running = WaitForStageStart(log_a, "profile", absl::Minutes(3));
  ASSERT_TRUE(running.ok()) << running.status();
  ChildProcess* slow = cluster.worker("worker-a");
  slow->Kill(SIGSTOP);
  const absl::Time stopped = absl::Now();
  const EvaluationStream::Heard heard = stream.Wait();
  const int64_t continued_micros = absl::ToUnixMicros(absl::Now());
  slow->Kill(SIGCONT);
  ASSERT_TRUE(heard.final.has_value());
  ASSERT_FALSE(heard.requeues.empty());
  EXPECT_GT(absl::Now() - stopped, absl::Seconds(5)) << "stopped for less than the lease";
  EXPECT_EQ(*running, absl::StrCat(heard.eval_id, "/1")) << "worker-a was running another evaluation";

  // Continued, it finishes attempt 1 and sends the result: on its old stream
  // (which the coordinator ended), then again once it has reconnected.
  const bool late_seen =
      WaitForText(cluster.dir() + "/coordinator.log",
                  absl::StrCat(" result for ", heard.eval_id, " attempt=1 from worker-a"), absl::Minutes(2));
  EXPECT_TRUE(late_seen) << "worker-a's late result never reached the coordinator; see " << log_a;
  EXPECT_EQ(StagesLogged(log_a, *running).back(), "finished") << "worker-a did not finish its attempt";
  auto stored = GetEvaluation(cluster, heard.eval_id);
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(stored->worker_id(), "worker-b") << "the late result replaced the one recorded";
  EXPECT_EQ(stored->attempt(), 2);
  EXPECT_TRUE(WaitForReconnect(cluster, "worker-a", continued_micros, absl::Minutes(1)).ok());
  ExpectOutcome(FaultCaseNamed("worker_stopped"),
                absl::StrCat("the evaluation ", EvaluationOutcome(*heard.final, "worker-b"),
                             late_seen ? "; the stopped worker's late result not recorded" : ""),
                heard.requeues.back());
}

}  // namespace
}  // namespace kevo::testing
