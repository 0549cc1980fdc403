// The job manager's time-dependent rules on a fake clock (job_harness.h: a
// real store and scheduler, a scripted worker): a wall-time budget ends a job
// when the clock passes it and not before, the job's stamps and its device
// use come from that clock, a job that cannot resume after a restart fails
// alone, and a cancelled job withdraws what no worker has taken.
#include <string>

#include "tests/coordinator/job_harness.h"

namespace kevo {
namespace {

using testing::JobHarness;

class JobManagerTest : public JobHarness {
 protected:
  std::string SubmitWallTimeJob(double max_wall_seconds) {
    v1::JobSpec spec;
    spec.mutable_task()->set_name("softmax");
    spec.set_platform("cpu");
    spec.mutable_budget()->set_max_evaluations(1000);
    spec.mutable_budget()->set_max_wall_seconds(max_wall_seconds);
    auto id = jobs_->Submit(spec);
    EXPECT_TRUE(id.ok()) << id.status();
    return id.ok() ? *id : "";
  }
};

const absl::Time kStart = absl::FromUnixSeconds(1'800'000'000);

TEST_F(JobManagerTest, AWallTimeBudgetEndsTheJobWhenTheClockPassesIt) {
  UseFakeClock(kStart);
  StartJobs();
  const std::string worker = Connect();
  const std::string job_id = SubmitWallTimeJob(600);
  // Ten minutes less a second: the job goes on proposing.
  Answer(worker, NextAssignment(), {.vs_production = 1.5, .vs_rival = 0});
  Answer(worker, NextAssignment(), {.vs_production = 1.5, .vs_rival = 0});  // k0's re-timing
  Advance(absl::Seconds(599));
  Answer(worker, NextAssignment(), {.vs_production = 1.2, .vs_rival = 0.9});
  v1::Assignment next = NextAssignment();
  ASSERT_FALSE(next.eval_id().empty()) << "the job stopped before its wall-time budget";
  auto running = jobs_->Get(job_id);
  ASSERT_TRUE(running.ok());
  EXPECT_EQ(running->state(), v1::JOB_RUNNING);
  // Past it: the result in flight is recorded and the job ends.
  Advance(absl::Seconds(2));
  Answer(worker, next, {.vs_production = 1.1, .vs_rival = 0.8});
  const v1::Job job = WaitDone(job_id);
  EXPECT_EQ(job.state(), v1::JOB_DONE);
  EXPECT_EQ(job.stop_reason(), "wall-time budget spent");
  EXPECT_EQ(job.evaluations_done(), 3);
  EXPECT_EQ(job.created_unix_micros(), absl::ToUnixMicros(kStart));
  EXPECT_EQ(job.finished_unix_micros(), absl::ToUnixMicros(kStart + absl::Seconds(601)));
}

TEST_F(JobManagerTest, DeviceUseIsTheBusyTimeOverTheJobsWallTime) {
  UseFakeClock(kStart);
  StartJobs();
  const std::string worker = Connect();
  const std::string job_id = SubmitJob(1);
  Advance(absl::Seconds(60));
  // 30 s of a device's slot in the job's first 60 s: half its time.
  Answer(worker, NextAssignment(), {.vs_production = 1.5, .vs_rival = 0, .gpu_stage_s = 30});
  Answer(worker, NextAssignment(), {.vs_production = 1.5, .vs_rival = 0});  // the re-timing
  const v1::Job job = WaitDone(job_id);
  EXPECT_DOUBLE_EQ(job.device_busy_s(), 30);
  EXPECT_DOUBLE_EQ(job.device_utilisation(), 0.5);
}

TEST_F(JobManagerTest, AJobThatCannotResumeFailsAloneAndTheOthersGoOn) {
  StartJobs();
  const std::string worker = Connect();
  const std::string resumable = SubmitJob(2);
  v1::JobSpec spec;
  spec.mutable_task()->set_name("softmax");
  spec.set_platform("cpu");
  spec.set_proposer("gone-after-restart");
  accept_proposer_ = "gone-after-restart";
  auto doomed = jobs_->Submit(spec);
  ASSERT_TRUE(doomed.ok()) << doomed.status();
  NextAssignment();  // both jobs have work out
  // The coordinator restarts without the proposer the second job names (an
  // llm job restarted without --llm-config).
  Close();
  accept_proposer_.clear();
  Open();
  StartJobs();
  auto failed = jobs_->Get(*doomed);
  ASSERT_TRUE(failed.ok());
  EXPECT_EQ(failed->state(), v1::JOB_FAILED);
  EXPECT_NE(failed->stop_reason().find("cannot resume after the coordinator restarted"), std::string::npos)
      << failed->stop_reason();
  auto other = jobs_->Get(resumable);
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->state(), v1::JOB_RUNNING);
  // The failure is stored, not only shown: a second restart reads it back.
  Close();
  Open();
  StartJobs();
  auto read_back = jobs_->Get(*doomed);
  ASSERT_TRUE(read_back.ok());
  EXPECT_EQ(read_back->state(), v1::JOB_FAILED);
}

TEST_F(JobManagerTest, CancellingWithdrawsWhatNoWorkerHasTaken) {
  StartJobs();
  const std::string job_id = SubmitJob(10);  // no worker: everything stays queued
  for (int i = 0; i < 100; ++i) {
    auto job = jobs_->Get(job_id);
    if (job.ok() && job->evaluations_in_flight() > 0) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  auto cancelled = jobs_->Cancel(job_id);
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  const v1::Job job = WaitDone(job_id);
  EXPECT_EQ(job.state(), v1::JOB_CANCELLED);
  EXPECT_EQ(job.evaluations_in_flight(), 0);
  EXPECT_EQ(jobs_->Cancel(job_id).status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace kevo
