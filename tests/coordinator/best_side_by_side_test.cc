// Which kernel a job keeps: every candidate after the first measured one is
// sent with the job's best as its rival (Assignment.rival), and the two
// kernels timed side by side in that one evaluation decide which the job
// keeps, not each one's ratio over its own yardstick; ratios measured with
// different toolchains are never compared. The rival is stored with the
// evaluation, so a restarted coordinator sends it again. A kernel that would
// become the best is re-timed first (a second evaluation of it, beside the
// best then), and the lower of its two figures stands (docs/search.md,
// "Re-timing"). A real store in a temporary folder, the real scheduler and
// job manager; the worker is a send callback that answers each assignment
// with a scripted evaluation (job_harness.h).
#include <string>
#include <utility>

#include "common/hash.h"
#include "tests/coordinator/job_harness.h"

namespace kevo {
namespace {

using testing::JobHarness;
using testing::Scripted;

class BestSideBySideTest : public JobHarness {};

TEST_F(BestSideBySideTest, TheKernelFasterSideBySideIsKeptWhateverItsOwnRatio) {
  StartJobs();
  const std::string worker = Connect();
  const std::string job_id = SubmitJob(4);
  // k0: the first measured kernel, sent alone, and re-timed alone.
  v1::Assignment a0 = NextAssignment();
  EXPECT_EQ(a0.candidate().source(), "k0");
  EXPECT_FALSE(a0.has_rival());
  Answer(worker, a0, {2.0, 0});
  Answer(worker, NextRetiming("k0", ""), {2.0, 0});
  // k1: a higher ratio over its own yardstick, but slower than k0 beside it:
  // no re-timing.
  v1::Assignment a1 = NextAssignment();
  EXPECT_EQ(a1.candidate().source(), "k1");
  ASSERT_TRUE(a1.has_rival());
  EXPECT_EQ(a1.rival().source(), "k0");
  Answer(worker, a1, {2.6, 0.95});
  // k2: a lower ratio, but faster than k0 beside it, twice: the job keeps k2.
  v1::Assignment a2 = NextAssignment();
  EXPECT_EQ(a2.candidate().source(), "k2");
  EXPECT_EQ(a2.rival().source(), "k0");
  Answer(worker, a2, {1.8, 1.07});
  Answer(worker, NextRetiming("k2", "k0"), {1.8, 1.05});
  // k3: the rival is now k2; its side-by-side figure is missing (the rival
  // failed there, both times), so fitness decides: 1.9 is above k2's 1.8.
  v1::Assignment a3 = NextAssignment();
  EXPECT_EQ(a3.candidate().source(), "k3");
  EXPECT_EQ(a3.rival().source(), "k2");
  Answer(worker, a3, {1.9, 0});
  Answer(worker, NextRetiming("k3", "k2"), {1.9, 0});

  const v1::Job job = WaitDone(job_id);
  const v1::Node n1 = NodeFor(job_id, "k1");
  const v1::Node n2 = NodeFor(job_id, "k2");
  const v1::Node n3 = NodeFor(job_id, "k3");
  EXPECT_EQ(n1.rival_node_id(), NodeFor(job_id, "k0").node_id());
  EXPECT_NE(n1.best_decision().find("slower"), std::string::npos) << n1.best_decision();
  EXPECT_TRUE(n1.retiming().eval_id().empty());
  EXPECT_NE(n2.best_decision().find("faster"), std::string::npos) << n2.best_decision();
  // The lower of the two side-by-side figures is the one the decision names.
  EXPECT_NE(n2.best_decision().find("(1.050x)"), std::string::npos) << n2.best_decision();
  EXPECT_DOUBLE_EQ(n2.speedup_vs_rival(), 1.07);
  EXPECT_DOUBLE_EQ(n2.retiming().speedup_vs_rival(), 1.05);
  EXPECT_NE(n3.best_decision().find("rival was not timed"), std::string::npos) << n3.best_decision();
  EXPECT_EQ(job.best_node_id(), n3.node_id());
  EXPECT_DOUBLE_EQ(job.best_speedup_vs_production(), 1.9);
  EXPECT_EQ(job.evaluations_done(), 4);  // re-timings are extra
  EXPECT_EQ(job.retimings(), 3);
  EXPECT_EQ(job.retiming_disagreements(), 0);
  EXPECT_EQ(Retimings("agreed"), 3);
  // The job hashes each kernel, its rival and its task once and hands the
  // hashes to the scheduler: each names the bytes stored under it.
  for (const v1::Node& n : {n1, n2, n3}) {
    auto record = scheduler_->GetRecord(n.eval_id());
    ASSERT_TRUE(record.ok()) << record.status();
    ASSERT_FALSE(record->rival_hash().empty()) << n.node_id();
    for (const auto& [family, hash] : {std::pair{store::Family::kBlobs, record->candidate_hash()},
                                       std::pair{store::Family::kBlobs, record->rival_hash()},
                                       std::pair{store::Family::kTasks, record->task_hash()}}) {
      auto bytes = store_->Get(family, hash);
      ASSERT_TRUE(bytes.ok() && bytes->has_value()) << n.node_id() << ": nothing stored under " << hash;
      EXPECT_EQ(Sha256Hex(**bytes), hash) << n.node_id();
    }
  }
}

// A new best whose re-timing disagrees: the lower figure stands, the
// disagreement is recorded on the node, the job and the metric; one that is
// fast beside the best only once is not the best; one that fails its
// re-timing is not either.
TEST_F(BestSideBySideTest, ARetimingThatDisagreesLeavesTheLowerFigure) {
  StartJobs();
  const std::string worker = Connect();
  const std::string job_id = SubmitJob(3);
  // k0 measured 5x in its own evaluation, 2x when timed again.
  Answer(worker, NextAssignment(), {5.0, 0});
  Answer(worker, NextRetiming("k0", ""), {2.0, 0});
  // k1: faster than k0 beside it in its own evaluation (1.2x), slower when
  // re-timed (0.9x): k0 stays the best.
  v1::Assignment a1 = NextAssignment();
  EXPECT_EQ(a1.candidate().source(), "k1");
  Answer(worker, a1, {3.0, 1.2});
  Answer(worker, NextRetiming("k1", "k0"), {2.9, 0.9});
  // k2: faster beside k0, then wrong when evaluated again.
  v1::Assignment a2 = NextAssignment();
  EXPECT_EQ(a2.candidate().source(), "k2");
  Answer(worker, a2, {4.0, 1.5});
  Answer(worker, NextRetiming("k2", "k0"), {0, 0, v1::WRONG_ANSWER});

  const v1::Job job = WaitDone(job_id);
  const v1::Node n0 = NodeFor(job_id, "k0");
  const v1::Node n1 = NodeFor(job_id, "k1");
  const v1::Node n2 = NodeFor(job_id, "k2");
  EXPECT_EQ(job.best_node_id(), n0.node_id());
  EXPECT_DOUBLE_EQ(job.best_speedup(), 2.0);
  EXPECT_DOUBLE_EQ(job.best_speedup_vs_production(), 2.0);
  EXPECT_DOUBLE_EQ(job.best_time_s(), 1e-3 / 2.0);  // the re-timing's time, not the first
  EXPECT_DOUBLE_EQ(n0.fitness(), 2.0);
  EXPECT_TRUE(n0.retiming().done());
  EXPECT_DOUBLE_EQ(n0.retiming().first_fitness(), 5.0);
  EXPECT_DOUBLE_EQ(n0.retiming().retimed_fitness(), 2.0);
  EXPECT_DOUBLE_EQ(n0.retiming().disagreement(), 2.5);
  EXPECT_TRUE(n0.retiming().disagrees());
  EXPECT_NE(n0.best_decision().find("a disagreement: the lower stands"), std::string::npos) << n0.best_decision();
  // k1: the lower side-by-side figure stands, so it is slower than k0.
  EXPECT_FALSE(n1.retiming().disagrees());
  EXPECT_DOUBLE_EQ(n1.fitness(), 2.9);
  EXPECT_NE(n1.best_decision().find("slower than " + n0.node_id() + " side by side (0.900x)"), std::string::npos)
      << n1.best_decision();
  // k2: its re-timing failed, so it has no figure and is not the best.
  EXPECT_EQ(n2.status(), v1::OK);
  EXPECT_EQ(n2.retiming().status(), v1::WRONG_ANSWER);
  EXPECT_EQ(n2.fitness(), 0);
  EXPECT_NE(n2.best_decision().find("re-timing failed (WRONG_ANSWER"), std::string::npos) << n2.best_decision();
  // The best's evaluation is the re-timing's, whose figures stand.
  auto best = jobs_->GetBest(job_id);
  ASSERT_TRUE(best.ok()) << best.status();
  EXPECT_EQ(best->evaluation().eval_id(), n0.retiming().eval_id());
  EXPECT_DOUBLE_EQ(best->evaluation().speedup_vs_production(), 2.0);
  EXPECT_EQ(best->candidate().source(), "k0");
  EXPECT_EQ(job.retimings(), 3);
  EXPECT_EQ(job.retiming_disagreements(), 1);
  EXPECT_EQ(Retimings("disagreed"), 1);
  EXPECT_EQ(Retimings("agreed"), 1);
  EXPECT_EQ(Retimings("failed"), 1);
}

// A coordinator restarted while a re-timing is out: the worker that holds it
// reports it to the restarted one, which applies it, and the node becomes the
// best only then.
TEST_F(BestSideBySideTest, ARetimingOutlivesACoordinatorRestart) {
  StartJobs();
  std::string worker = Connect();
  const std::string job_id = SubmitJob(1);
  Answer(worker, NextAssignment(), {3.0, 0});
  const v1::Assignment before = NextRetiming("k0", "");
  {
    auto job = jobs_->Get(job_id);
    ASSERT_TRUE(job.ok());
    EXPECT_TRUE(job->best_node_id().empty()) << "the best before its re-timing";
    EXPECT_EQ(job->evaluations_in_flight(), 1);
  }
  Close();
  Open();
  StartJobs();
  worker = Connect();
  {
    auto job = jobs_->Get(job_id);
    ASSERT_TRUE(job.ok());
    EXPECT_TRUE(job->best_node_id().empty());
    EXPECT_EQ(job->evaluations_in_flight(), 1);
  }
  Answer(worker, before, {2.8, 0});
  const v1::Job job = WaitDone(job_id);
  EXPECT_EQ(job.best_node_id(), NodeFor(job_id, "k0").node_id());
  EXPECT_DOUBLE_EQ(job.best_speedup(), 2.8);
  EXPECT_EQ(job.retimings(), 1);
}

// A re-timing on a worker that timed no production form measured nothing on
// the job's yardstick: the node's own figure stands, and it is the best.
TEST_F(BestSideBySideTest, ARetimingWithoutTheJobsYardstickLeavesTheNodesOwnFigure) {
  StartJobs();
  const std::string worker = Connect();
  const std::string job_id = SubmitJob(1);
  Answer(worker, NextAssignment(), {3.0, 0});
  Answer(worker, NextRetiming("k0", ""), {0, 0});
  const v1::Job job = WaitDone(job_id);
  const v1::Node n0 = NodeFor(job_id, "k0");
  EXPECT_EQ(job.best_node_id(), n0.node_id());
  EXPECT_DOUBLE_EQ(job.best_speedup(), 3.0);
  EXPECT_EQ(n0.retiming().retimed_fitness(), 0);
  EXPECT_NE(n0.best_decision().find("not re-timed"), std::string::npos) << n0.best_decision();
  EXPECT_EQ(Retimings("not_retimed"), 1);
}

// A simulator's time would come out the same: its new bests are not re-timed.
TEST_F(BestSideBySideTest, ASimulatedTimeIsNotRetimed) {
  StartJobs();
  const std::string worker = Connect();
  const std::string job_id = SubmitJob(2);
  Answer(worker, NextAssignment(), {3.0, 0, v1::OK, /*simulated=*/true});
  v1::Assignment a1 = NextAssignment();
  EXPECT_EQ(a1.candidate().source(), "k1") << "a re-timing was sent";
  Answer(worker, a1, {4.0, 1.3, v1::OK, /*simulated=*/true});
  const v1::Job job = WaitDone(job_id);
  EXPECT_EQ(job.best_node_id(), NodeFor(job_id, "k1").node_id());
  EXPECT_EQ(job.retimings(), 0);
}

// Fitness is a ratio over a yardstick its own worker built and timed: one
// measured with another compiler is not ranked against the best's, while a
// side-by-side timing (both kernels built and timed by one worker) decides
// wherever the best was first measured.
TEST_F(BestSideBySideTest, FitnessMeasuredWithAnotherToolchainIsNotCompared) {
  StartJobs();
  const std::string worker = Connect();
  const std::string job_id = SubmitJob(4);
  constexpr v1::EvalStatus kOk = v1::OK;
  Answer(worker, NextAssignment(), {2.0, 0, kOk, false, "g++ 12"});
  Answer(worker, NextRetiming("k0", ""), {2.0, 0, kOk, false, "g++ 12"});
  Answer(worker, NextAssignment(), {3.0, 0, kOk, false, "clang++ 14"});  // higher, but over clang's yardstick
  Answer(worker, NextAssignment(), {2.5, 0, kOk, false, "g++ 12"});      // higher, over g++'s
  Answer(worker, NextRetiming("k2", "k0"), {2.5, 0, kOk, false, "g++ 12"});
  // faster than the best beside it, on one worker whatever its compiler
  Answer(worker, NextAssignment(), {1.5, 1.2, kOk, false, "clang++ 14"});
  Answer(worker, NextRetiming("k3", "k2"), {1.5, 1.2, kOk, false, "clang++ 14"});

  const v1::Job job = WaitDone(job_id);
  const v1::Node n0 = NodeFor(job_id, "k0"), n1 = NodeFor(job_id, "k1"), n2 = NodeFor(job_id, "k2"),
                 n3 = NodeFor(job_id, "k3");
  EXPECT_EQ(n1.best_decision().rfind("not compared with " + n0.node_id() + ": measured with AMD EPYC / clang++ 14, " +
                                         n0.node_id() + " with AMD EPYC / g++ 12",
                                     0),
            0u)
      << n1.best_decision();
  EXPECT_EQ(n2.best_decision().rfind("fitness 2.500 above " + n0.node_id() + "'s 2.000", 0), 0u) << n2.best_decision();
  EXPECT_EQ(n3.best_decision().rfind("faster than " + n2.node_id() + " side by side", 0), 0u) << n3.best_decision();
  EXPECT_EQ(job.best_node_id(), n3.node_id());
}

TEST_F(BestSideBySideTest, ARecoveredEvaluationKeepsItsRival) {
  v1::Task task;
  task.set_name("softmax");
  v1::Candidate cand, rival;
  cand.set_source("new kernel");
  rival.set_source("best kernel");
  scheduler::Scheduler::SubmitOptions o;
  o.rival = rival;
  auto id = scheduler_->Submit(task, cand, "cpu", std::move(o));
  ASSERT_TRUE(id.ok()) << id.status();
  Close();
  Open();  // a restarted coordinator
  Connect();
  v1::Assignment a = NextAssignment();
  EXPECT_EQ(a.eval_id(), *id);
  EXPECT_EQ(a.candidate().source(), "new kernel");
  ASSERT_TRUE(a.has_rival());
  EXPECT_EQ(a.rival().source(), "best kernel");
}

}  // namespace
}  // namespace kevo
