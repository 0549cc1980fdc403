// KernelBench's own metrics over the problems of a suite (kevo suite): the
// correctness rate and fast_p, the fraction of problems whose kernel is
// correct AND more than p times faster than the baseline (strictly: a kernel
// exactly p times faster is not counted), for p = 0, 1, 1.5 and 2, against
// PyTorch eager and against torch.compile; and the seconds one evaluation
// took. fast_0 is the correctness rate.
//
// Every problem counts against eager: the worker times eager for every
// correct kernel, and an incorrect one is fast over nothing. Against
// torch.compile, a correct kernel counts only when torch.compile was timed
// beside it (a worker without torch.compile, or a problem it failed on, gives
// no figure); an incorrect one counts when torch.compile was timed for any
// problem of the suite (the fleet has it). When it was timed for none, fast_p
// against it is "n/a", never 0.
//
// Functions are pure and thread-safe.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kevo::cli {

// The p of fast_p, in order.
inline constexpr double kFastPThresholds[] = {0, 1, 1.5, 2};

// One KernelBench problem of a suite: the best kernel its search found.
struct KernelBenchProblem {
  bool correct = false;
  double speedup_vs_eager = 0;    // the best kernel over PyTorch eager; 0 when none is correct
  double speedup_vs_compile = 0;  // over torch.compile; 0 when torch.compile was not timed
  std::string compile_note;       // why torch.compile was not timed, as the worker said
  int evaluations = 0;
  double wall_s = 0;  // the suite's wall time on the problem
};

// fast_p against one baseline.
struct FastP {
  int problems = 0;       // the problems that had the baseline; 0: n/a
  std::vector<int> fast;  // per kFastPThresholds: correct and faster by more than p

  double Fraction(size_t i) const { return problems > 0 ? static_cast<double>(fast[i]) / problems : 0; }
};

struct KernelBenchMetrics {
  int problems = 0;
  int correct = 0;
  FastP eager;
  FastP compile;
  std::string compile_note;  // why torch.compile was never timed (when compile.problems is 0)
  int evaluations = 0;
  double wall_s = 0;  // over the problems with evaluations

  // Wall seconds per evaluation over the problems with evaluations; 0 when none had any.
  double SecondsPerEvaluation() const { return evaluations > 0 ? wall_s / evaluations : 0; }
};

// The metrics over `problems` (rules in the header comment).
KernelBenchMetrics SummariseKernelBench(const std::vector<KernelBenchProblem>& problems);

// The label of kFastPThresholds[i]: "0", "1", "1.5", "2".
std::string FastPLabel(size_t i);

// {"problems", "correct", "correctness", "baseline_problems": {"eager", "compile"},
//  "fast_p": {"eager": {"0", "1", "1.5", "2"}, "compile": {...}},
//  "compile_unavailable" (only when n/a), "evaluations", "seconds_per_evaluation"}.
// fast_p values are fractions of baseline_problems; "n/a" against a baseline
// no problem had; seconds_per_evaluation is null when nothing was evaluated.
nlohmann::json KernelBenchJson(const KernelBenchMetrics& metrics);

// The block printed under the suite's table: a headline, one line per
// baseline with its problems and fast_p, seconds per evaluation. As Markdown
// (a table) when `markdown`.
std::string KernelBenchText(const KernelBenchMetrics& metrics, bool markdown);

}  // namespace kevo::cli
