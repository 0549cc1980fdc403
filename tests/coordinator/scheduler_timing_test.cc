// The scheduler and compile-only workers: an evaluation that requires
// measured timing is never leased to a compile-only worker, waits for one
// that can run it, and is refused while every connected worker of its
// platform is compile-only; other evaluations go to compile-only workers as
// to any other. Also: between one team's evaluations a higher priority (a
// campaign's) is leased first, and a cancelled job's queued evaluations are
// withdrawn. A worker that holds tasks is sent each task whole once. A real
// store in a temporary folder; workers are send callbacks
// that record what they were given.
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "coordinator/scheduler/scheduler.h"
#include "tests/testing/test_dir.h"

namespace kevo::scheduler {
namespace {

namespace fs = std::filesystem;

class SchedulerTimingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = kevo::testing::FreshTestDir("scheduler-timing");
    auto store = store::Store::Open(dir_.string());
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    scheduler_ = std::make_unique<Scheduler>(store_.get(), SchedulerOptions{}, nullptr);
  }
  void TearDown() override {
    scheduler_.reset();
    store_.reset();
    fs::remove_all(dir_);
  }

  // Connects a worker; its assignments' eval ids land in `got`.
  std::string Connect(const std::string& id, bool compile_only, std::vector<std::string>* got, int slots = 4) {
    v1::Hello hello;
    hello.set_worker_id(id);
    hello.set_platform("amd");
    hello.set_slots(slots);
    hello.set_compile_only(compile_only);
    return scheduler_->AddWorker(hello, [got](v1::CoordinatorMessage m) {
      if (m.has_assignment()) got->push_back(m.assignment().eval_id());
    });
  }

  absl::StatusOr<std::string> Submit(bool require_timing, int priority = 0, const std::string& job_id = "") {
    v1::Task task;
    task.set_name("softmax");
    v1::Candidate candidate;
    candidate.set_language("hip");
    candidate.set_source("// kernel " + std::to_string(priority) + job_id);
    Scheduler::SubmitOptions o;
    o.require_timing = require_timing;
    o.priority = priority;
    o.job_id = job_id;
    return scheduler_->Submit(task, candidate, "amd", std::move(o));
  }

  fs::path dir_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<Scheduler> scheduler_;
};

TEST_F(SchedulerTimingTest, RefusesTimingWhenEveryWorkerIsCompileOnly) {
  std::vector<std::string> static_only;
  Connect("amd-static", /*compile_only=*/true, &static_only);
  auto timed = Submit(/*require_timing=*/true);
  EXPECT_EQ(timed.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(std::string(timed.status().message()).find("compile-only"), std::string::npos);
  EXPECT_EQ(scheduler_->CheckTimingAvailable("amd").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(scheduler_->SlotsFor("amd", /*timing_only=*/true), 0);
  EXPECT_EQ(scheduler_->SlotsFor("amd"), 4);
  // Without the requirement the compile-only worker takes it.
  auto any = Submit(/*require_timing=*/false);
  ASSERT_TRUE(any.ok()) << any.status();
  EXPECT_EQ(static_only, std::vector<std::string>{*any});
}

TEST_F(SchedulerTimingTest, TimingRequiredWorkGoesOnlyToAWorkerThatCanRunIt) {
  std::vector<std::string> static_only, gpu;
  // Workers are offered work in id order: the compile-only one first.
  Connect("a-static", /*compile_only=*/true, &static_only);
  Connect("b-gpu", /*compile_only=*/false, &gpu);
  std::vector<std::string> timed;
  for (int i = 0; i < 3; ++i) {
    auto id = Submit(/*require_timing=*/true);
    ASSERT_TRUE(id.ok()) << id.status();
    timed.push_back(*id);
  }
  EXPECT_TRUE(static_only.empty());
  EXPECT_EQ(gpu, timed);
  EXPECT_TRUE(scheduler_->CheckTimingAvailable("amd").ok());
  EXPECT_EQ(scheduler_->SlotsFor("amd", /*timing_only=*/true), 4);
}

TEST_F(SchedulerTimingTest, TimingRequiredWorkWaitsWhileOnlyACompileOnlyWorkerHasRoom) {
  std::vector<std::string> static_only, gpu;
  // No worker yet: it queues like any evaluation.
  auto queued = Submit(/*require_timing=*/true);
  ASSERT_TRUE(queued.ok()) << queued.status();
  Connect("amd-gpu", /*compile_only=*/false, &gpu);
  ASSERT_EQ(gpu.size(), 1u);
  // Fill the GPU worker's four slots, then one more waits in the queue even
  // though a compile-only worker arrives with free slots.
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(Submit(/*require_timing=*/true).ok());
  Connect("amd-static", /*compile_only=*/true, &static_only);
  EXPECT_EQ(gpu.size(), 4u);
  EXPECT_TRUE(static_only.empty());
  // An evaluation without the requirement behind it is not held up.
  auto any = Submit(/*require_timing=*/false);
  ASSERT_TRUE(any.ok());
  EXPECT_EQ(static_only, std::vector<std::string>{*any});
}

// A worker that holds tasks (Hello.holds_tasks) gets each task whole once,
// then its hash alone, until kTasksNamed others were sent whole after it; a
// worker that does not gets the task every time.
TEST_F(SchedulerTimingTest, AWorkerThatHoldsTasksIsSentEachTaskWholeOnce) {
  std::vector<v1::Assignment> holder, plain;
  auto connect = [&](const std::string& id, bool holds, std::vector<v1::Assignment>* got, int slots) {
    v1::Hello hello;
    hello.set_worker_id(id);
    hello.set_platform("amd");
    hello.set_slots(slots);
    hello.set_holds_tasks(holds);
    scheduler_->AddWorker(hello, [got](v1::CoordinatorMessage m) {
      if (m.has_assignment()) got->push_back(m.assignment());
    });
  };
  auto submit = [&](const std::string& task_name, int n) {
    v1::Task task;
    task.set_name(task_name);
    v1::Candidate candidate;
    candidate.set_language("hip");
    candidate.set_source("// kernel " + task_name + std::to_string(n));
    ASSERT_TRUE(scheduler_->Submit(task, candidate, "amd", Scheduler::SubmitOptions{}).ok());
  };
  // A worker that does not hold tasks: whole every time, and no hash.
  connect("a-plain", false, &plain, 2);
  submit("softmax", 10);
  submit("softmax", 11);
  ASSERT_EQ(plain.size(), 2u);
  for (const v1::Assignment& a : plain) {
    EXPECT_EQ(a.task().name(), "softmax");
    EXPECT_TRUE(a.task_hash().empty());
  }
  // Its slots are full: the rest go to the holder.
  connect("b-holds", true, &holder, 1000);
  for (int i = 0; i < 3; ++i) submit("softmax", i);
  submit("gelu", 0);
  ASSERT_EQ(holder.size(), 4u);
  EXPECT_TRUE(holder[0].has_task());
  EXPECT_EQ(holder[0].task().name(), "softmax");
  ASSERT_FALSE(holder[0].task_hash().empty());
  for (int i : {1, 2}) {
    EXPECT_FALSE(holder[i].has_task()) << i;
    EXPECT_EQ(holder[i].task_hash(), holder[0].task_hash()) << i;
  }
  EXPECT_TRUE(holder[3].has_task());
  EXPECT_EQ(holder[3].task().name(), "gelu");
  EXPECT_NE(holder[3].task_hash(), holder[0].task_hash());
  // After kTasksNamed other tasks sent whole, softmax is sent whole again.
  for (size_t i = 0; i < Scheduler::kTasksNamed; ++i) submit("other" + std::to_string(i), 0);
  submit("softmax", 3);
  ASSERT_EQ(holder.size(), 5 + Scheduler::kTasksNamed);
  EXPECT_TRUE(holder.back().has_task());
  EXPECT_EQ(holder.back().task().name(), "softmax");
}

TEST_F(SchedulerTimingTest, AHigherPriorityIsLeasedFirstThenTheOldest) {
  auto low = Submit(false, /*priority=*/0);
  auto high = Submit(false, /*priority=*/5);
  auto mid = Submit(false, /*priority=*/2);
  auto mid_later = Submit(false, /*priority=*/2);
  ASSERT_TRUE(low.ok() && high.ok() && mid.ok() && mid_later.ok());
  std::vector<std::string> got;
  Connect("amd-1", /*compile_only=*/false, &got, /*slots=*/1);
  ASSERT_EQ(got, std::vector<std::string>{*high});
  // The slot frees: the next is the older of the two at priority 2.
  v1::WorkerMessage result;
  result.mutable_result()->set_eval_id(*high);
  result.mutable_result()->set_attempt(1);
  result.mutable_result()->mutable_evaluation()->set_status(v1::OK);
  scheduler_->OnWorkerMessage("amd-1", result);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1], *mid);
  // The worker said neither: the scheduler stamps what it knows on the
  // recorded evaluation (the record's own candidate hash among them).
  auto recorded = scheduler_->GetRecord(*high);
  ASSERT_TRUE(recorded.ok()) << recorded.status();
  EXPECT_EQ(recorded->evaluation().eval_id(), *high);
  EXPECT_EQ(recorded->evaluation().worker_id(), "amd-1");
  EXPECT_FALSE(recorded->candidate_hash().empty());
  EXPECT_EQ(recorded->evaluation().candidate_hash(), recorded->candidate_hash());
}

TEST_F(SchedulerTimingTest, ACancelledJobsQueuedEvaluationsAreWithdrawn) {
  std::vector<v1::EvalRecord> done;
  scheduler_->SetCompletionHook([&done](const v1::EvalRecord& r) { done.push_back(r); });
  auto a = Submit(false, 0, "j-cancelled");
  auto b = Submit(false, 0, "j-cancelled");
  auto other = Submit(false, 0, "j-other");
  ASSERT_TRUE(a.ok() && b.ok() && other.ok());
  EXPECT_EQ(scheduler_->WithdrawQueued("j-cancelled"), 2);
  ASSERT_EQ(done.size(), 2u);
  for (const auto& r : done) {
    EXPECT_EQ(r.job_id(), "j-cancelled");
    EXPECT_EQ(r.evaluation().status(), v1::CANCELLED);
  }
  std::vector<std::string> got;
  Connect("amd-1", /*compile_only=*/false, &got);
  EXPECT_EQ(got, std::vector<std::string>{*other});
  EXPECT_EQ(scheduler_->WithdrawQueued("j-other"), 0) << "a leased evaluation runs to its end";
}

}  // namespace
}  // namespace kevo::scheduler
