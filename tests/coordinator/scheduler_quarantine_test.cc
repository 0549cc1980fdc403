// The scheduler's quarantine: an evaluation whose lease holder is lost
// mid-evaluation (its stream ends, or after a restart it never comes back)
// counts the loss in its record; at the second it is recorded QUARANTINED
// and never leased again, and the count survives a restart. Streams the
// coordinator ends itself (shutdown, a revoked worker) are not losses, nor is
// a worker gone silent (cut off, stopped), which is leased nothing more. A
// real store in a temporary folder; workers are send callbacks that record
// their assignments.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "coordinator/scheduler/scheduler.h"
#include "tests/testing/test_dir.h"

namespace kevo::scheduler {
namespace {

namespace fs = std::filesystem;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

class Finals final : public EvalListener {
 public:
  void OnStage(const v1::StageEvent& event) override {
    absl::MutexLock l(&mu_);
    stages_.push_back(event.message());
  }
  void OnFinal(const v1::Evaluation& evaluation) override {
    absl::MutexLock l(&mu_);
    finals_.push_back(evaluation);
  }
  std::vector<v1::Evaluation> finals() {
    absl::MutexLock l(&mu_);
    return finals_;
  }
  std::vector<std::string> stages() {
    absl::MutexLock l(&mu_);
    return stages_;
  }

 private:
  absl::Mutex mu_;
  std::vector<v1::Evaluation> finals_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> stages_ ABSL_GUARDED_BY(mu_);
};

class SchedulerQuarantineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = kevo::testing::FreshTestDir("scheduler-quarantine");
    auto store = store::Store::Open(dir_.string());
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    Restart(SchedulerOptions{});
  }
  void TearDown() override {
    if (scheduler_ != nullptr && subscribed_) scheduler_->Unsubscribe(eval_id_, &finals_);
    scheduler_.reset();
    store_.reset();
    fs::remove_all(dir_);
  }

  // A new scheduler over the same store, as a restarted coordinator has.
  void Restart(SchedulerOptions options) {
    if (scheduler_ != nullptr && subscribed_) scheduler_->Unsubscribe(eval_id_, &finals_);
    subscribed_ = false;
    scheduler_ = std::make_unique<Scheduler>(store_.get(), options, nullptr);
    ASSERT_TRUE(scheduler_->Recover().ok());
    scheduler_->Start();
  }

  // Connects a cpu worker with one slot; its assignments land in `got`, and
  // `dropped` (when given) is set when the scheduler ends its stream.
  // The scheduler may call these from its expiry thread: a test reading them
  // while the scheduler runs reads through Count and Dropped.
  void Connect(const std::string& id, std::vector<std::string>* got, bool* dropped = nullptr) {
    v1::Hello hello;
    hello.set_worker_id(id);
    hello.set_platform("cpu");
    hello.set_slots(1);
    scheduler_->AddWorker(
        hello,
        [this, got](v1::CoordinatorMessage m) {
          absl::MutexLock l(&seen_mu_);
          if (m.has_assignment()) got->push_back(m.assignment().eval_id());
        },
        [this, dropped] {
          absl::MutexLock l(&seen_mu_);
          if (dropped != nullptr) *dropped = true;
        });
  }
  size_t Count(const std::vector<std::string>& got) {
    absl::MutexLock l(&seen_mu_);
    return got.size();
  }
  bool Dropped(const bool& dropped) {
    absl::MutexLock l(&seen_mu_);
    return dropped;
  }
  absl::Mutex seen_mu_;

  void Submit() {
    v1::Task task;
    task.set_name("vector_add");
    v1::Candidate candidate;
    candidate.set_language("c++");
    candidate.set_source("// kernel");
    auto id = scheduler_->Submit(task, candidate, "cpu", Scheduler::SubmitOptions{});
    ASSERT_TRUE(id.ok()) << id.status();
    eval_id_ = *id;
    Subscribe();
  }
  void Subscribe() {
    ASSERT_TRUE(scheduler_->Subscribe(eval_id_, &finals_).ok());
    subscribed_ = true;
  }

  v1::EvalRecord Record() {
    auto r = scheduler_->GetRecord(eval_id_);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : v1::EvalRecord();
  }

  fs::path dir_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<Scheduler> scheduler_;
  std::string eval_id_;
  Finals finals_;
  bool subscribed_ = false;
};

TEST_F(SchedulerQuarantineTest, TheSecondWorkerLostWhileRunningItQuarantinesTheEvaluation) {
  Submit();
  std::vector<std::string> a, b, c;
  Connect("w-a", &a);
  ASSERT_EQ(a, std::vector<std::string>{eval_id_});
  scheduler_->RemoveWorker("w-a");  // its stream ended mid-evaluation
  EXPECT_EQ(Record().state(), v1::EVAL_QUEUED);
  EXPECT_EQ(Record().workers_lost(), 1);
  EXPECT_THAT(finals_.stages().back(),
              HasSubstr("requeued: worker w-a disconnected mid-evaluation (1 worker lost while running it; "
                        "quarantined at 2)"));

  Connect("w-b", &b);
  ASSERT_EQ(b, std::vector<std::string>{eval_id_});
  scheduler_->RemoveWorker("w-b");
  ASSERT_EQ(finals_.finals().size(), 1u);
  const v1::Evaluation ev = finals_.finals()[0];
  EXPECT_EQ(ev.status(), v1::QUARANTINED);
  EXPECT_THAT(ev.diagnostics().message(),
              HasSubstr("quarantined: 2 workers were lost while running it (the last: worker w-b disconnected "
                        "mid-evaluation); it is not requeued"));
  EXPECT_EQ(ev.eval_id(), eval_id_);
  EXPECT_EQ(ev.attempt(), 2);
  EXPECT_EQ(ev.task_name(), "vector_add");

  // Recorded like any result, durably; a third worker is never given it.
  const v1::EvalRecord r = Record();
  EXPECT_EQ(r.state(), v1::EVAL_DONE);
  EXPECT_EQ(r.workers_lost(), 2);
  EXPECT_EQ(r.evaluation().status(), v1::QUARANTINED);
  Connect("w-c", &c);
  EXPECT_THAT(c, IsEmpty());
}

// The fleet lost one of its three workers after a coordinator
// restart: the count is in the record, so the restart does not reset it.
TEST_F(SchedulerQuarantineTest, TheCountSurvivesACoordinatorRestart) {
  Submit();
  std::vector<std::string> a, b;
  Connect("w-a", &a);
  ASSERT_EQ(Count(a), 1u);
  scheduler_->RemoveWorker("w-a");
  ASSERT_EQ(Record().workers_lost(), 1);

  Restart(SchedulerOptions{});
  Subscribe();
  EXPECT_EQ(Record().state(), v1::EVAL_QUEUED);
  EXPECT_EQ(Record().workers_lost(), 1);
  Connect("w-b", &b);
  ASSERT_EQ(b, std::vector<std::string>{eval_id_});
  scheduler_->RemoveWorker("w-b");
  ASSERT_EQ(finals_.finals().size(), 1u);
  EXPECT_EQ(finals_.finals()[0].status(), v1::QUARANTINED);
  EXPECT_EQ(Record().workers_lost(), 2);
}

// A coordinator killed while a worker ran the evaluation gives the worker a
// lease period to come back; one that never does was lost with it.
TEST_F(SchedulerQuarantineTest, ALeaseHolderThatNeverComesBackAfterARestartIsALoss) {
  Submit();
  std::vector<std::string> a, b;
  Connect("w-a", &a);
  ASSERT_EQ(Count(a), 1u);
  ASSERT_EQ(Record().state(), v1::EVAL_LEASED);

  SchedulerOptions quick;
  quick.lease = absl::Milliseconds(300);
  quick.tick = absl::Milliseconds(20);
  Restart(quick);  // as after kill -9: w-a's lease is recovered, w-a is not connected
  Subscribe();
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (Record().state() != v1::EVAL_QUEUED && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(20));
  ASSERT_EQ(Record().state(), v1::EVAL_QUEUED);
  EXPECT_EQ(Record().workers_lost(), 1);
  // The record is requeued under the scheduler's lock; its stage event is
  // delivered to listeners after it (seen late under ASan).
  constexpr char kWhy[] = "worker w-a held the lease and did not come back after the coordinator restarted";
  auto told = [&] {
    const std::vector<std::string> stages = finals_.stages();
    return std::any_of(stages.begin(), stages.end(), [&](const std::string& s) { return s.find(kWhy) != s.npos; });
  };
  while (!told() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(20));
  EXPECT_THAT(finals_.stages(), Contains(HasSubstr(kWhy)));

  Connect("w-b", &b);
  ASSERT_EQ(Count(b), 1u);
  scheduler_->RemoveWorker("w-b");
  ASSERT_EQ(finals_.finals().size(), 1u);
  EXPECT_EQ(finals_.finals()[0].status(), v1::QUARANTINED);
}

TEST_F(SchedulerQuarantineTest, StreamsTheCoordinatorEndsItselfAreNotLosses) {
  Submit();
  std::vector<std::string> a, b, c;
  Connect("w-a", &a);
  ASSERT_EQ(Count(a), 1u);
  scheduler_->RemoveWorker("w-a", /*lost=*/false);  // revoked by the admin
  EXPECT_EQ(Record().state(), v1::EVAL_QUEUED);
  EXPECT_EQ(Record().workers_lost(), 0);

  Connect("w-b", &b);
  ASSERT_EQ(Count(b), 1u);
  scheduler_->PrepareShutdown();
  scheduler_->RemoveWorker("w-b");  // the server's shutdown ended its stream
  EXPECT_EQ(Record().state(), v1::EVAL_QUEUED);
  EXPECT_EQ(Record().workers_lost(), 0);
  EXPECT_THAT(finals_.finals(), IsEmpty());
}

// A worker that says nothing for a whole lease (cut off from the network, or
// stopped) keeps its stream open, but is leased nothing more: its stream is
// ended and its evaluation goes to a worker that still speaks, not back to
// it, and a result it sends late is refused.
TEST_F(SchedulerQuarantineTest, AWorkerSilentForALeaseIsDroppedAndLeasedNothingMore) {
  SchedulerOptions quick;
  quick.lease = absl::Milliseconds(400);
  quick.tick = absl::Milliseconds(20);
  Restart(quick);
  Submit();
  std::vector<std::string> a, b;
  bool a_dropped = false;
  Connect("w-a", &a, &a_dropped);  // sorts first: leased first while it is connected
  ASSERT_EQ(Count(a), 1u);
  Connect("w-b", &b);
  v1::WorkerMessage heartbeat;
  heartbeat.mutable_heartbeat()->set_free_slots(1);
  for (const absl::Time end = absl::Now() + absl::Seconds(10); Count(b) == 0 && absl::Now() < end;) {
    scheduler_->OnWorkerMessage("w-b", heartbeat);  // w-b speaks; w-a says nothing
    absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_EQ(Count(b), 1u) << "the evaluation never went to the worker that speaks";
  EXPECT_EQ(Count(a), 1u) << "leased again to the silent worker";
  EXPECT_TRUE(Dropped(a_dropped)) << "the silent worker's stream was not ended";
  EXPECT_EQ(Record().lease_worker(), "w-b");
  EXPECT_EQ(Record().attempt(), 2);
  EXPECT_EQ(Record().workers_lost(), 0) << "a network cut is not the evaluation's doing";
  // The requeue reaches listeners once its record is written.
  for (const absl::Time end = absl::Now() + absl::Seconds(5); finals_.stages().empty() && absl::Now() < end;) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_THAT(finals_.stages(), Contains(HasSubstr("worker w-a held the lease and sent nothing for")));

  v1::WorkerMessage late;
  late.mutable_result()->set_eval_id(eval_id_);
  late.mutable_result()->set_attempt(1);
  late.mutable_result()->mutable_evaluation()->set_status(v1::OK);
  scheduler_->OnWorkerMessage("w-a", late);
  EXPECT_EQ(Record().state(), v1::EVAL_LEASED) << "the silent worker's late result was recorded";
  EXPECT_THAT(finals_.finals(), IsEmpty());
}

// A heartbeat that names an evaluation (RunningEvaluation, or the text
// "eval_id/attempt" older workers send) extends its lease; one that names
// nothing does not, and the lease lapses.
TEST_F(SchedulerQuarantineTest, HeartbeatsNamingTheEvaluationKeepItsLease) {
  SchedulerOptions quick;
  quick.lease = absl::Milliseconds(400);
  quick.tick = absl::Milliseconds(20);
  Restart(quick);
  Submit();
  std::vector<std::string> a;
  Connect("w-a", &a);
  ASSERT_EQ(Count(a), 1u);
  v1::WorkerMessage typed;
  v1::RunningEvaluation* held = typed.mutable_heartbeat()->add_running_evaluations();
  held->set_eval_id(eval_id_);
  held->set_attempt(1);
  v1::WorkerMessage text;
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  text.mutable_heartbeat()->add_running(absl::StrCat(eval_id_, "/1"));
#pragma GCC diagnostic pop
  v1::WorkerMessage idle;
  idle.mutable_heartbeat()->set_free_slots(1);
  for (const v1::WorkerMessage* heartbeat : {&typed, &text}) {
    for (const absl::Time end = absl::Now() + absl::Milliseconds(1200); absl::Now() < end;) {
      scheduler_->OnWorkerMessage("w-a", *heartbeat);
      absl::SleepFor(absl::Milliseconds(50));
    }
    EXPECT_EQ(Record().attempt(), 1) << (heartbeat == &typed ? "typed" : "text")
                                     << " heartbeats did not keep the lease";
    EXPECT_EQ(Record().state(), v1::EVAL_LEASED);
  }
  // Lapsed: queued again, or already leased again (attempt 2).
  auto lapsed = [&] { return Record().state() != v1::EVAL_LEASED || Record().attempt() >= 2; };
  for (const absl::Time end = absl::Now() + absl::Seconds(10); !lapsed() && absl::Now() < end;) {
    scheduler_->OnWorkerMessage("w-a", idle);
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_TRUE(lapsed()) << "heartbeats naming nothing kept the lease";
}

TEST_F(SchedulerQuarantineTest, ZeroMaxWorkerLossesNeverQuarantines) {
  SchedulerOptions never;
  never.max_worker_losses = 0;
  Restart(never);
  Submit();
  for (int i = 0; i < 4; ++i) {
    std::vector<std::string> got;
    const std::string id = "w-" + std::to_string(i);
    Connect(id, &got);
    ASSERT_EQ(Count(got), 1u) << id;
    scheduler_->RemoveWorker(id);
  }
  EXPECT_EQ(Record().state(), v1::EVAL_QUEUED);
  EXPECT_EQ(Record().workers_lost(), 4);
  EXPECT_THAT(finals_.finals(), IsEmpty());
}

}  // namespace
}  // namespace kevo::scheduler
