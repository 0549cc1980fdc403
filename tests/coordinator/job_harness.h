// A job manager on a real store and the real scheduler, for tests of the job
// loop: a proposer of kernels "k0", "k1", ..., a one-slot worker that is a
// send callback answering each assignment with a scripted evaluation, and
// optionally a fake clock for the job manager.
#pragma once

#include <unistd.h>

#include <deque>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include <prometheus/registry.h>

#include "coordinator/jobs/manager.h"
#include "coordinator/scheduler/scheduler.h"
#include "tests/testing/test_dir.h"

namespace kevo::testing {

namespace fs = std::filesystem;

// Proposes the given sources in order, then kernels "k<n>", one at a time.
class Counting final : public proposer::Proposer {
 public:
  explicit Counting(std::vector<std::string> sources = {}) : sources_(std::move(sources)) {}
  absl::StatusOr<std::vector<proposer::Proposal>> Propose(const proposer::ProposeRequest& request) override {
    std::vector<proposer::Proposal> out;
    for (int i = 0; i < request.count; ++i) {
      proposer::Proposal p;
      p.candidate.set_language("c++");
      const int n = next_++;
      p.candidate.set_source(n < static_cast<int>(sources_.size()) ? sources_[n] : "k" + std::to_string(n));
      p.mutation = "seed";
      out.push_back(std::move(p));
    }
    return out;
  }
  std::string name() const override { return "counting"; }

 private:
  std::vector<std::string> sources_;
  int next_ = 0;
};

// What the worker reports for the kernel named by the source: its fitness
// (the speedup over the production yardstick), its median over the rival's
// in the same loop (0: no rival timed), and the compiler that built it (the
// worker's fingerprint).
struct Scripted {
  double vs_production;
  double vs_rival;
  v1::EvalStatus status = v1::OK;
  bool simulated = false;  // Evaluation.deterministic_timing
  const char* compiler = "g++ 12";
  double gpu_stage_s = 0;                 // device_use.stage_s: seconds the evaluation held a device
  const v1::ModelGraph* graph = nullptr;  // Evaluation.model_graph (KernelBench)
};

class JobHarness : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = kevo::testing::FreshTestDir("job-harness");
    Open();
  }
  void TearDown() override {
    Close();
    fs::remove_all(dir_);
  }
  void Open() {
    auto store = store::Store::Open(dir_.string());
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    scheduler_ = std::make_unique<scheduler::Scheduler>(store_.get(), scheduler::SchedulerOptions{}, nullptr);
    ASSERT_TRUE(scheduler_->Recover().ok());
  }
  void Close() {
    if (jobs_) jobs_->Stop();
    jobs_.reset();
    if (scheduler_) scheduler_->Stop();
    scheduler_.reset();
    store_.reset();
  }
  void StartJobs() {
    registry_ = std::make_shared<prometheus::Registry>();
    jobs_ = std::make_unique<jobs::JobManager>(
        store_.get(), scheduler_.get(),
        [this](const v1::JobSpec& spec) -> absl::StatusOr<std::unique_ptr<proposer::Proposer>> {
          if (spec.proposer() != "builtin" && spec.proposer() != accept_proposer_) {
            return absl::InvalidArgumentError("unknown proposer " + spec.proposer());
          }
          return std::make_unique<Counting>(proposed_sources_);
        },
        registry_);
    if (fake_clock_) {
      jobs_->SetClock([this] {
        absl::MutexLock l(&clock_mu_);
        return now_;
      });
    }
    ASSERT_TRUE(jobs_->Recover().ok());
    jobs_->Start();
  }

  // One slot: assignments arrive one at a time and are queued here.
  std::string Connect() {
    v1::Hello hello;
    hello.set_worker_id("w1");
    hello.set_platform("cpu");
    hello.set_slots(1);
    return scheduler_->AddWorker(hello, [this](v1::CoordinatorMessage m) {
      if (!m.has_assignment()) return;
      absl::MutexLock l(&mu_);
      assignments_.push_back(m.assignment());
    });
  }
  v1::Assignment NextAssignment() {
    absl::MutexLock l(&mu_);
    auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !assignments_.empty(); };
    EXPECT_TRUE(mu_.AwaitWithTimeout(absl::Condition(&ready), absl::Seconds(20)));
    if (assignments_.empty()) return {};
    v1::Assignment a = assignments_.front();
    assignments_.pop_front();
    return a;
  }
  void Answer(const std::string& worker, const v1::Assignment& a, Scripted s) {
    v1::WorkerMessage m;
    v1::EvalResult* r = m.mutable_result();
    r->set_eval_id(a.eval_id());
    r->set_attempt(a.attempt());
    v1::Evaluation* e = r->mutable_evaluation();
    e->set_eval_id(a.eval_id());
    e->set_status(s.status);
    if (s.graph != nullptr) *e->mutable_model_graph() = *s.graph;
    if (s.status != v1::OK) {
      e->mutable_diagnostics()->set_message("timed call 3 was wrong");
      scheduler_->OnWorkerMessage(worker, m);
      return;
    }
    // vs_production 0: a worker that timed no production form (the kernel
    // itself at 2x over the reference).
    const double vs_reference = s.vs_production > 0 ? 10 * s.vs_production : 2.0;
    e->set_speedup(vs_reference);  // over the naive reference: not what decides
    e->mutable_timing()->set_median_s(1e-2 / vs_reference);
    e->mutable_baseline()->set_median_s(1e-2);
    if (s.vs_production > 0) {
      e->set_speedup_vs_production(s.vs_production);
      e->set_production_yardstick("torch_eager");
    }
    e->mutable_fingerprint()->set_device("AMD EPYC");
    e->mutable_fingerprint()->set_compiler(s.compiler);
    e->set_deterministic_timing(s.simulated);
    if (s.gpu_stage_s > 0) e->mutable_device_use()->set_stage_s(s.gpu_stage_s);
    if (s.vs_rival > 0) {
      e->set_speedup_vs_rival(s.vs_rival);
      e->mutable_rival()->set_median_s(1e-3 * s.vs_rival);
    } else if (a.has_rival()) {
      e->set_rival_error("the rival disagreed with the reference");
    }
    scheduler_->OnWorkerMessage(worker, m);
  }
  v1::Job WaitDone(const std::string& job_id) {
    for (int i = 0; i < 400; ++i) {
      auto job = jobs_->Get(job_id);
      if (job.ok() && job->state() != v1::JOB_RUNNING) return *job;
      absl::SleepFor(absl::Milliseconds(50));
    }
    ADD_FAILURE() << "job " << job_id << " did not finish";
    return {};
  }
  std::string SubmitJob(int budget, v1::TaskFormat format = v1::TASK_FORMAT_NATIVE) {
    v1::JobSpec spec;
    spec.mutable_task()->set_name("softmax");
    spec.mutable_task()->set_format(format);
    spec.set_platform("cpu");
    spec.mutable_budget()->set_max_evaluations(budget);
    auto id = jobs_->Submit(spec);
    EXPECT_TRUE(id.ok()) << id.status();
    return id.ok() ? *id : "";
  }
  v1::Node NodeFor(const std::string& job_id, const std::string& source_name) {
    auto nodes = jobs_->Nodes(job_id);
    EXPECT_TRUE(nodes.ok());
    for (const v1::Node& n : *nodes) {
      auto record = scheduler_->GetRecord(n.eval_id());
      auto blob = store_->Get(store::Family::kBlobs, record->candidate_hash());
      v1::Candidate c;
      if (blob.ok() && blob->has_value() && c.ParseFromString(**blob) && c.source() == source_name) return n;
    }
    ADD_FAILURE() << "no node for " << source_name;
    return {};
  }

  // kevo_coordinator_retimings_total{platform="cpu", outcome=...}; 0 when
  // never counted.
  double Retimings(const std::string& outcome) {
    for (const prometheus::MetricFamily& f : registry_->Collect()) {
      if (f.name != "kevo_coordinator_retimings_total") continue;
      for (const prometheus::ClientMetric& m : f.metric) {
        for (const prometheus::ClientMetric::Label& l : m.label) {
          if (l.name == "outcome" && l.value == outcome) return m.counter.value;
        }
      }
    }
    return 0;
  }
  // The next assignment, which must be the re-timing of `source` (beside
  // `rival`'s kernel, or none).
  v1::Assignment NextRetiming(const std::string& source, const std::string& rival) {
    v1::Assignment a = NextAssignment();
    EXPECT_EQ(a.candidate().source(), source) << "expected the re-timing of " << source;
    EXPECT_EQ(a.has_rival() ? a.rival().source() : "", rival);
    return a;
  }

  // With a fake clock (UseFakeClock before StartJobs), the job manager's
  // time is now_, moved by Advance.
  void UseFakeClock(absl::Time start) {
    fake_clock_ = true;
    now_ = start;
  }
  void Advance(absl::Duration d) {
    absl::MutexLock l(&clock_mu_);
    now_ += d;
  }

  fs::path dir_;
  // A proposer name the factory accepts besides "builtin" (all make Counting).
  std::string accept_proposer_;
  // What the proposer proposes first (then "k<n>").
  std::vector<std::string> proposed_sources_;
  bool fake_clock_ = false;
  absl::Mutex clock_mu_;
  absl::Time now_ ABSL_GUARDED_BY(clock_mu_);
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<scheduler::Scheduler> scheduler_;
  std::unique_ptr<jobs::JobManager> jobs_;
  absl::Mutex mu_;
  std::deque<v1::Assignment> assignments_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kevo::testing
