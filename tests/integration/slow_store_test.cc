// A slow disk under the coordinator: every write and sync of its database
// delayed (--fault-db-write-delay-ms) while a job runs on a real worker. The
// calls that wait for a write (SubmitJob) take that long; calls that write
// nothing (ListWorkers, GetJob, ListJobs) must not wait behind anyone's
// write, not even while the scheduler is leasing and recording the job's
// evaluations (whose records are written outside the scheduler's lock) or
// the job loop is syncing.
#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "common/task/task_loader.h"
#include "tests/integration/cluster.h"

namespace kevo::testing {
namespace {

constexpr int kDelayMs = 800;

// Milliseconds `call` took.
template <typename F>
double TimedMs(F call) {
  const auto start = std::chrono::steady_clock::now();
  call();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

TEST(SlowStoreTest, ASlowWriteDelaysNoUnrelatedCall) {
  Cluster cluster(MakeTempDir("kevo-slow-store"));
  ASSERT_TRUE(cluster.StartCoordinator({"--fault-db-write-delay-ms", std::to_string(kDelayMs)}).ok());
  // Without the production baselines (PyTorch, timed beside each candidate):
  // this test needs the job's writes, not its timing.
  ASSERT_TRUE(cluster.StartWorker("worker-a", {"--production", "off"}).ok());
  ASSERT_TRUE(cluster.WaitForWorkers(1, absl::Seconds(90)).ok());

  auto task = task::LoadTaskDir(SourceDir() + "/tasks/relu");
  ASSERT_TRUE(task.ok()) << task.status();
  // Timed at 1 Mi elements, not 8 Mi: the writes are under test, not the timing.
  (*task->mutable_time()->mutable_values())["n"] = int64_t{1} << 20;
  v1::SubmitJobRequest req;
  *req.mutable_spec()->mutable_task() = *task;
  req.mutable_spec()->set_platform("cpu");
  req.mutable_spec()->mutable_budget()->set_max_evaluations(3);
  req.mutable_spec()->set_seed(3);

  absl::Mutex mu;
  std::string job_id;
  double submit_ms = 0;
  grpc::Status submit_status;
  std::thread submitter([&] {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::SubmitJobResponse resp;
    grpc::Status st;
    const double ms = TimedMs([&] { st = cluster.stub()->SubmitJob(&ctx, req, &resp); });
    absl::MutexLock l(&mu);
    submit_status = st;
    submit_ms = ms;
    job_id = resp.job_id();
  });

  // Probe with calls that write nothing until the job ends: every one must
  // answer well inside one delayed write.
  double worst_ms = 0;
  std::string worst_call;
  int probes = 0, evaluations_seen = 0;
  v1::JobState state = v1::JOB_STATE_UNSPECIFIED;
  const absl::Time deadline = absl::Now() + absl::Minutes(4);
  auto probe = [&](const std::string& name, auto call) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    grpc::Status st;
    const double ms = TimedMs([&] { st = call(ctx); });
    ASSERT_TRUE(st.ok()) << name << ": " << st.error_message();
    ++probes;
    if (ms > worst_ms) worst_ms = ms, worst_call = name;
  };
  while (absl::Now() < deadline && state != v1::JOB_DONE) {
    probe("ListWorkers", [&](grpc::ClientContext& ctx) {
      v1::ListWorkersResponse resp;
      return cluster.stub()->ListWorkers(&ctx, v1::ListWorkersRequest(), &resp);
    });
    probe("ListJobs", [&](grpc::ClientContext& ctx) {
      v1::ListJobsResponse resp;
      return cluster.stub()->ListJobs(&ctx, v1::ListJobsRequest(), &resp);
    });
    std::string id;
    {
      absl::MutexLock l(&mu);
      id = job_id;
    }
    if (!id.empty()) {
      probe("GetJob", [&](grpc::ClientContext& ctx) {
        v1::GetJobRequest get;
        get.set_job_id(id);
        v1::Job job;
        grpc::Status st = cluster.stub()->GetJob(&ctx, get, &job);
        state = job.state();
        evaluations_seen = job.evaluations_done();
        return st;
      });
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
  submitter.join();

  ASSERT_TRUE(submit_status.ok()) << submit_status.error_message();
  // The delay is real: SubmitJob waited for its synced write.
  EXPECT_GE(submit_ms, kDelayMs);
  // The job went through leases, results and syncs, every write delayed,
  // while the probes ran.
  ASSERT_EQ(state, v1::JOB_DONE) << "the job did not finish in time (" << evaluations_seen << " evaluated)";
  EXPECT_EQ(evaluations_seen, 3);
  // No call that writes nothing waited behind a write.
  EXPECT_LT(worst_ms, kDelayMs / 2) << "the slowest of " << probes << " calls was " << worst_call << " (" << worst_ms
                                    << " ms; each write waits " << kDelayMs << " ms)";
  EXPECT_GT(probes, 30);
}

}  // namespace
}  // namespace kevo::testing
