// Workers whose toolchains differ, in one job: one builds with g++, the other
// with clang++ (--compiler), so their timings are not comparable (each
// speedup is over a reference its own compiler built, on its own device).
// Each evaluation carries the fingerprint of the worker that measured it;
// kevo must never decide which kernel is the job's best by comparing
// fitness measured with one toolchain against fitness measured with another.
// Without production timing no rival is timed beside the candidates, so
// every decision after the first is such a comparison of fitness: the test
// looks at each one, and shows that those across toolchains were not made.
#include <signal.h>
#include <unistd.h>

#include <map>
#include <regex>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include <gtest/gtest.h>

#include "common/task/task_loader.h"
#include "tests/fault/fault_cases.h"
#include "tests/fault/fault_testing.h"
#include "tests/integration/cluster.h"

namespace kevo::testing {
namespace {

// What makes two timings comparable: the device and the compiler.
std::string Toolchain(const v1::Evaluation& evaluation) {
  return absl::StrCat(evaluation.fingerprint().device(), " / ", evaluation.fingerprint().compiler());
}

TEST(ToolchainTest, FitnessMeasuredWithDifferentToolchainsIsNeverCompared) {
  constexpr int kBudget = 8;
  if (::access("/usr/bin/clang++", X_OK) != 0) GTEST_SKIP() << "needs clang++ beside g++ (Debian's clang)";
  Cluster cluster(MakeTempDir("kevo-fault-toolchain"));
  ASSERT_TRUE(cluster.StartCoordinator().ok());
  ASSERT_TRUE(cluster.StartWorker("worker-gcc", {"--production", "off"}).ok());
  ASSERT_TRUE(cluster.StartWorker("worker-clang", {"--production", "off", "--compiler", "clang++"}).ok());
  ASSERT_TRUE(cluster.WaitForWorkers(2, absl::Seconds(90)).ok());
  auto task = task::LoadTaskDir(SourceDir() + "/tasks/vector_add");
  ASSERT_TRUE(task.ok()) << task.status();
  // Timed at 1 Mi elements, not 16 Mi: which timings get compared is under
  // test, not their precision; an evaluation takes about 3 s instead of 10.
  (*task->mutable_time()->mutable_values())["n"] = int64_t{1} << 20;
  auto job_id = SubmitJob(cluster, *task, kBudget, /*seed=*/3);
  ASSERT_TRUE(job_id.ok()) << job_id.status();
  const v1::Job job = WaitForJobEnd(cluster, *job_id, absl::Minutes(5));
  ASSERT_EQ(job.state(), v1::JOB_DONE) << job.ShortDebugString();

  cluster.StopCoordinator(SIGTERM);
  auto stored = ReadStoredJob(cluster.dir() + "/db", *job_id);
  ASSERT_TRUE(stored.ok()) << stored.status();
  // Each evaluation is keyed by the toolchain of the worker that ran it.
  std::map<std::string, std::string> toolchain_of;  // node id -> its evaluation's
  std::set<std::string> toolchains;
  for (const auto& [id, node] : stored->nodes) {
    const v1::Evaluation& e = stored->evals[node.eval_id()].evaluation();
    EXPECT_TRUE(absl::StrContains(e.fingerprint().compiler(), e.worker_id() == "worker-clang" ? "clang" : "g++"))
        << id << " on " << e.worker_id() << ": " << e.fingerprint().compiler();
    toolchain_of[id] = Toolchain(e);
    if (e.status() == v1::OK) toolchains.insert(toolchain_of[id]);
  }
  ASSERT_EQ(toolchains.size(), 2u) << "both workers must have measured a kernel, or nothing was at stake";

  // Every decision that compared this node's fitness with the best's
  // ("fitness 1.2 above n00003's 1.1 (...)") compared like with like; those
  // across toolchains say so instead, and keep the best.
  const std::regex compared("^fitness [0-9.]+ (above|not above) (n[0-9]+)'s");
  int across = 0, not_compared = 0;
  std::string said;
  for (const auto& [id, node] : stored->nodes) {
    std::smatch m;
    if (std::regex_search(node.best_decision(), m, compared) && toolchain_of[m[2].str()] != toolchain_of[id]) {
      ++across;
      ADD_FAILURE() << id << " (" << toolchain_of[id] << ") was ranked against " << m[2].str() << " ("
                    << toolchain_of[m[2].str()] << "): " << node.best_decision();
    }
    if (absl::StrContains(node.best_decision(), "not compared")) {
      ++not_compared;
      said = node.best_decision();
    }
  }
  EXPECT_GT(not_compared, 0) << "no kernel met a best measured with the other toolchain: nothing was shown";
  ExpectOutcome(FaultCaseNamed("toolchain_differs"),
                absl::StrCat(v1::JobState_Name(job.state()), "; ", across,
                             " of the best-kernel decisions compared fitness across toolchains"),
                said);
}

}  // namespace
}  // namespace kevo::testing
