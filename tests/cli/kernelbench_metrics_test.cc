// KernelBench's metrics over a suite's problems (cli/kernelbench_metrics.h):
// fast_p counts a problem only when its kernel is correct and strictly more
// than p times faster; against torch.compile a correct problem without a
// torch.compile time is left out, and a suite where it was never timed says
// "n/a".
#include "cli/kernelbench_metrics.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kevo::cli {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

KernelBenchProblem Wrong() { return {.correct = false, .evaluations = 4, .wall_s = 8}; }
// Exactly 1x over eager and exactly 1.5x over torch.compile.
KernelBenchProblem AtP() {
  return {.correct = true, .speedup_vs_eager = 1.0, .speedup_vs_compile = 1.5, .evaluations = 2, .wall_s = 4};
}
// Correct, but torch.compile failed on it: no figure.
KernelBenchProblem WithoutCompile() {
  return {.correct = true,
          .speedup_vs_eager = 2.5,
          .compile_note = "torch.compile unavailable: it failed: boom",
          .evaluations = 1,
          .wall_s = 3};
}
KernelBenchProblem Fast() {
  return {.correct = true, .speedup_vs_eager = 1.6, .speedup_vs_compile = 2.1, .evaluations = 3, .wall_s = 9};
}

TEST(KernelBenchMetricsTest, FastPCountsCorrectKernelsStrictlyFasterThanP) {
  KernelBenchMetrics m = SummariseKernelBench({Wrong(), AtP(), WithoutCompile(), Fast()});
  EXPECT_EQ(m.problems, 4);
  EXPECT_EQ(m.correct, 3);
  // Eager: every problem; the wrong one is fast over nothing, the one at 1x
  // is not faster than 1x.
  EXPECT_EQ(m.eager.problems, 4);
  EXPECT_THAT(m.eager.fast, ElementsAre(3, 2, 2, 1));
  EXPECT_DOUBLE_EQ(m.eager.Fraction(0), 0.75);  // fast_0 is the correctness rate
  // torch.compile: the correct problem without a figure is left out, the
  // wrong one stays in (torch.compile was timed in this suite); the one at
  // exactly 1.5x is not in fast_1.5.
  EXPECT_EQ(m.compile.problems, 3);
  EXPECT_THAT(m.compile.fast, ElementsAre(2, 2, 1, 1));
  EXPECT_EQ(m.compile_note, "");
  EXPECT_EQ(m.evaluations, 10);
  EXPECT_DOUBLE_EQ(m.SecondsPerEvaluation(), 2.4);
}

TEST(KernelBenchMetricsTest, JsonHasFastPPerBaselineAndTheProblemsEachHad) {
  nlohmann::json j = KernelBenchJson(SummariseKernelBench({Wrong(), AtP(), WithoutCompile(), Fast()}));
  EXPECT_EQ(j["problems"], 4);
  EXPECT_EQ(j["correct"], 3);
  EXPECT_DOUBLE_EQ(j["correctness"].get<double>(), 0.75);
  EXPECT_EQ(j["baseline_problems"]["eager"], 4);
  EXPECT_EQ(j["baseline_problems"]["compile"], 3);
  const auto& eager = j["fast_p"]["eager"];
  EXPECT_DOUBLE_EQ(eager["0"].get<double>(), 0.75);
  EXPECT_DOUBLE_EQ(eager["1"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(eager["1.5"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(eager["2"].get<double>(), 0.25);
  const auto& compile = j["fast_p"]["compile"];
  EXPECT_DOUBLE_EQ(compile["0"].get<double>(), 2.0 / 3);
  EXPECT_DOUBLE_EQ(compile["1"].get<double>(), 2.0 / 3);
  EXPECT_DOUBLE_EQ(compile["1.5"].get<double>(), 1.0 / 3);
  EXPECT_DOUBLE_EQ(compile["2"].get<double>(), 1.0 / 3);
  EXPECT_FALSE(j.contains("compile_unavailable")) << j.dump(2);
  EXPECT_DOUBLE_EQ(j["seconds_per_evaluation"].get<double>(), 2.4);
  EXPECT_EQ(j["evaluations"], 10);
}

TEST(KernelBenchMetricsTest, TorchCompileNeverTimedIsNotApplicableNotZero) {
  KernelBenchProblem no_compile = WithoutCompile();
  no_compile.compile_note = "torch.compile unavailable: torch 1.13.0a0 has no torch.compile";
  KernelBenchMetrics m = SummariseKernelBench({Wrong(), no_compile});
  EXPECT_EQ(m.compile.problems, 0);
  EXPECT_EQ(m.eager.problems, 2);
  EXPECT_THAT(m.eager.fast, ElementsAre(1, 1, 1, 1));
  nlohmann::json j = KernelBenchJson(m);
  EXPECT_EQ(j["baseline_problems"]["compile"], 0);
  for (const char* p : {"0", "1", "1.5", "2"}) {
    EXPECT_EQ(j["fast_p"]["compile"][p], "n/a") << p;
    EXPECT_DOUBLE_EQ(j["fast_p"]["eager"][p].get<double>(), 0.5) << p;
  }
  EXPECT_EQ(j["compile_unavailable"], "torch.compile unavailable: torch 1.13.0a0 has no torch.compile");
  const std::string text = KernelBenchText(m, /*markdown=*/false);
  EXPECT_THAT(text, HasSubstr("torch.compile  0         n/a             n/a             n/a             n/a"));
  EXPECT_THAT(text, HasSubstr("torch.compile n/a: torch.compile unavailable: torch 1.13.0a0 has no"));
}

TEST(KernelBenchMetricsTest, NothingEvaluatedHasNoSecondsPerEvaluation) {
  KernelBenchMetrics m = SummariseKernelBench({KernelBenchProblem{}});
  EXPECT_EQ(m.problems, 1);
  EXPECT_THAT(m.eager.fast, ElementsAre(0, 0, 0, 0));
  EXPECT_TRUE(KernelBenchJson(m)["seconds_per_evaluation"].is_null());
  EXPECT_THAT(KernelBenchText(m, /*markdown=*/false), HasSubstr("seconds per evaluation: - (nothing evaluated)"));
}

TEST(KernelBenchMetricsTest, TextAndMarkdownShowEveryThresholdPerBaseline) {
  KernelBenchMetrics m = SummariseKernelBench({Wrong(), AtP(), WithoutCompile(), Fast()});
  const std::string text = KernelBenchText(m, /*markdown=*/false);
  EXPECT_THAT(text, HasSubstr("KernelBench: 4 problems, 3 correct (75.0%)"));
  EXPECT_THAT(text, HasSubstr("baseline       problems  fast_0          fast_1          fast_1.5        fast_2"));
  EXPECT_THAT(text, HasSubstr("PyTorch eager  4         75.0% (3/4)     50.0% (2/4)     50.0% (2/4)     25.0% (1/4)"));
  EXPECT_THAT(text, HasSubstr("torch.compile  3         66.7% (2/3)     66.7% (2/3)     33.3% (1/3)     33.3% (1/3)"));
  EXPECT_THAT(text, HasSubstr("seconds per evaluation: 2.40 s (10 evaluations in 24.0 s)"));
  EXPECT_THAT(text, Not(HasSubstr("n/a")));
  const std::string md = KernelBenchText(m, /*markdown=*/true);
  EXPECT_THAT(
      md, HasSubstr("| baseline | problems | fast_0 | fast_1 | fast_1.5 | fast_2 |\n|---|---:|---:|---:|---:|---:|\n"));
  EXPECT_THAT(md, HasSubstr("| PyTorch eager | 4 | 75.0% (3/4) | 50.0% (2/4) | 50.0% (2/4) | 25.0% (1/4) |\n"));
  EXPECT_THAT(md, HasSubstr("| torch.compile | 3 | 66.7% (2/3) | 66.7% (2/3) | 33.3% (1/3) | 33.3% (1/3) |\n"));
}

}  // namespace
}  // namespace kevo::cli
