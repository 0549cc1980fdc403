// The rules by which a job figures a result and chooses its best
// (coordinator/jobs/best.h), as pure functions: a job, a node and an
// evaluation in, the node's figures and the decision out, with the reason the
// node records. The same rules run inside the job loop
// (best_side_by_side_test drives them through the real scheduler).
#include <string>

#include "gtest/gtest.h"

#include "coordinator/jobs/best.h"

namespace kevo::jobs {
namespace {

// An evaluation that passed, `speedup` over the naive reference and, when
// `production` > 0, that much over a production form named torch_eager.
v1::Evaluation Passed(double speedup, double production = 0) {
  v1::Evaluation e;
  e.set_status(v1::OK);
  e.set_speedup(speedup);
  e.mutable_timing()->set_median_s(1e-3 / speedup);
  e.mutable_baseline()->set_median_s(1e-3);
  if (production > 0) {
    e.set_speedup_vs_production(production);
    e.set_production_yardstick("torch_eager");
    v1::ProductionTiming* p = e.add_production();
    p->set_name("torch_eager");
    p->mutable_timing()->set_median_s(1e-3 / speedup * production);
  }
  return e;
}

// A job whose best is node "best" at fitness `fitness`.
v1::Job JobWithBest(double fitness) {
  v1::Job job;
  job.set_best_node_id("best");
  job.set_best_speedup(fitness);
  job.set_fitness_baseline("reference");
  return job;
}

TEST(BestRulesTest, TheFirstMeasuredKernelIsTheBest) {
  v1::Job job;
  v1::Node node;
  node.set_fitness(0.5);  // slower than the reference, still the best so far
  EXPECT_TRUE(BecomesBest(job, node, {}, "cpu / g++", ""));
  EXPECT_EQ(node.best_decision(), "the job's first measured kernel");
}

TEST(BestRulesTest, TheSideBySideFigureDecidesOverFitness) {
  const v1::Job job = JobWithBest(2.0);
  v1::Node slower_on_paper;
  slower_on_paper.set_fitness(1.5);  // below the best's 2.0 over its own yardstick
  EXPECT_TRUE(BecomesBest(job, slower_on_paper, {1.2, ""}, "a", "a"));
  EXPECT_EQ(slower_on_paper.best_decision(), "faster than best side by side (1.200x)");

  v1::Node faster_on_paper;
  faster_on_paper.set_fitness(3.0);
  EXPECT_FALSE(BecomesBest(job, faster_on_paper, {0.9, ""}, "a", "a"));
  EXPECT_EQ(faster_on_paper.best_decision(), "slower than best side by side (0.900x)");
}

TEST(BestRulesTest, WithoutASideBySideFigureFitnessDecidesOnOneToolchainOnly) {
  const v1::Job job = JobWithBest(2.0);
  v1::Node same;
  same.set_fitness(2.5);
  EXPECT_TRUE(BecomesBest(job, same, {0, "no rival was timed beside it"}, "host / g++", "host / g++"));
  EXPECT_EQ(same.best_decision(), "fitness 2.500 above best's 2.000 (no rival was timed beside it)");

  v1::Node lower;
  lower.set_fitness(1.9);
  EXPECT_FALSE(BecomesBest(job, lower, {0, "why"}, "host / g++", "host / g++"));

  v1::Node other_compiler;
  other_compiler.set_fitness(9.0);
  EXPECT_FALSE(BecomesBest(job, other_compiler, {0, "why"}, "host / clang++", "host / g++"));
  EXPECT_EQ(other_compiler.best_decision(),
            "not compared with best: measured with host / clang++, best with host / g++ (why)");
}

TEST(BestRulesTest, SideBySideOfSaysWhyThereIsNone) {
  const v1::Job job = JobWithBest(2.0);
  v1::Evaluation e = Passed(3.0);
  e.set_speedup_vs_rival(1.4);
  EXPECT_EQ(SideBySideOf(job, "best", e).speedup, 1.4);
  EXPECT_EQ(SideBySideOf(job, "n7", e).speedup, 0);
  EXPECT_EQ(SideBySideOf(job, "n7", e).why_not, "its rival n7 is no longer the best");
  EXPECT_EQ(SideBySideOf(job, "", e).why_not, "no rival was timed beside it");
  v1::Evaluation failed_rival = Passed(3.0);
  failed_rival.set_rival_error("the rival crashed");
  EXPECT_EQ(SideBySideOf(job, "best", failed_rival).why_not, "its rival was not timed: the rival crashed");
}

TEST(BestRulesTest, TheFirstMeasuredEvaluationFixesTheYardstick) {
  v1::Job job;
  v1::Node first;
  SetFigures(job, first, Passed(4.0, 1.5));
  EXPECT_EQ(job.fitness_baseline(), "production");
  EXPECT_DOUBLE_EQ(first.fitness(), 1.5);  // over what users run, not the naive reference
  EXPECT_DOUBLE_EQ(first.speedup_vs_reference(), 4.0);
  EXPECT_EQ(first.production_yardstick(), "torch_eager");
  EXPECT_GT(first.production_time_s(), 0);

  // A later evaluation without a production figure (a worker with
  // --production off) has no fitness on the job's yardstick.
  v1::Node later;
  SetFigures(job, later, Passed(8.0));
  EXPECT_EQ(job.fitness_baseline(), "production");
  EXPECT_DOUBLE_EQ(later.fitness(), 0);
  EXPECT_DOUBLE_EQ(later.speedup_vs_reference(), 8.0);
}

TEST(BestRulesTest, AJobThatAsksForTheReferenceKeepsIt) {
  v1::Job job;
  job.mutable_spec()->set_fitness_vs_reference(true);
  v1::Node node;
  SetFigures(job, node, Passed(4.0, 1.5));
  EXPECT_EQ(job.fitness_baseline(), "reference");
  EXPECT_DOUBLE_EQ(node.fitness(), 4.0);
}

TEST(BestRulesTest, AFailedOrCompileOnlyEvaluationMeasuresNothing) {
  v1::Job job;
  v1::Node failed;
  v1::Evaluation wrong = Passed(4.0, 1.5);
  wrong.set_status(v1::WRONG_ANSWER);
  SetFigures(job, failed, wrong);
  EXPECT_EQ(failed.status(), v1::WRONG_ANSWER);
  EXPECT_DOUBLE_EQ(failed.fitness(), 0);
  EXPECT_DOUBLE_EQ(failed.speedup_vs_production(), 0);
  EXPECT_EQ(job.fitness_baseline(), "");  // nothing measured: no yardstick yet

  v1::Node ranked;
  v1::Evaluation compile_only;
  compile_only.set_status(v1::OK);
  compile_only.set_compile_only(true);
  compile_only.set_static_score(0.83);
  SetFigures(job, ranked, compile_only);
  EXPECT_TRUE(ranked.static_fitness());
  EXPECT_DOUBLE_EQ(ranked.fitness(), 0.83);
  EXPECT_DOUBLE_EQ(ranked.speedup_vs_reference(), 0);
  EXPECT_EQ(job.fitness_baseline(), "");
}

TEST(BestRulesTest, InstallBestCopiesTheFiguresAndMarksTheGain) {
  v1::Job job;
  job.set_evaluations_done(12);
  job.set_best_static_score(0.5);
  v1::Node node;
  node.set_node_id("n00011");
  SetFigures(job, node, Passed(4.0, 1.5));
  InstallBest(job, node);
  EXPECT_EQ(job.best_node_id(), "n00011");
  EXPECT_DOUBLE_EQ(job.best_speedup(), 1.5);
  EXPECT_DOUBLE_EQ(job.best_speedup_vs_reference(), 4.0);
  EXPECT_DOUBLE_EQ(job.best_static_score(), 0);
  EXPECT_EQ(job.last_gain_at(), 12);
  EXPECT_EQ(BestLabel(job), "1.50x vs torch_eager, 4.00x vs the naive reference");
}

TEST(BestRulesTest, CopyFiguresTakesTheLowerTimingWhole) {
  v1::Job job;
  v1::Node first, retimed;
  SetFigures(job, first, Passed(4.0, 2.0));
  SetFigures(job, retimed, Passed(3.0, 1.5));
  CopyFigures(retimed, first);
  EXPECT_DOUBLE_EQ(first.fitness(), 1.5);
  EXPECT_DOUBLE_EQ(first.speedup_vs_reference(), 3.0);
  EXPECT_DOUBLE_EQ(first.time_s(), retimed.time_s());
}

TEST(BestRulesTest, ToolchainNamesDeviceAndCompiler) {
  v1::Evaluation e;
  EXPECT_EQ(ToolchainOf(e), "");
  e.mutable_fingerprint()->set_device("AMD EPYC");
  e.mutable_fingerprint()->set_compiler("g++ 12.2");
  EXPECT_EQ(ToolchainOf(e), "AMD EPYC / g++ 12.2");
  EXPECT_TRUE(NotTheKernels(v1::INFRA_ERROR));
  EXPECT_TRUE(NotTheKernels(v1::CANCELLED));
  EXPECT_FALSE(NotTheKernels(v1::WRONG_ANSWER));
}

TEST(BestRulesTest, BestLabelForAStaticallyRankedBest) {
  v1::Job job;
  job.set_best_static_score(0.83);
  EXPECT_EQ(BestLabel(job), "static score 0.83");
  job.set_best_speedup(1.52);
  EXPECT_EQ(BestLabel(job), "1.52x");
}

}  // namespace
}  // namespace kevo::jobs
