#include "cli/kernelbench_metrics.h"

#include <iterator>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace kevo::cli {
namespace {

constexpr size_t kThresholds = std::size(kFastPThresholds);

// Counts `p` into `f` when it had the baseline; `speedup` is its kernel's over it.
void Count(FastP& f, const KernelBenchProblem& p, double speedup) {
  ++f.problems;
  for (size_t i = 0; i < kThresholds; ++i) f.fast[i] += p.correct && speedup > kFastPThresholds[i];
}

nlohmann::json FastPJson(const FastP& f) {
  nlohmann::json j = nlohmann::json::object();
  for (size_t i = 0; i < kThresholds; ++i) {
    j[FastPLabel(i)] = f.problems > 0 ? nlohmann::json(f.Fraction(i)) : nlohmann::json("n/a");
  }
  return j;
}

// One cell per threshold: "50.0% (1/2)", or "n/a".
std::vector<std::string> FastPCells(const FastP& f) {
  std::vector<std::string> cells;
  for (size_t i = 0; i < kThresholds; ++i) {
    cells.push_back(f.problems > 0 ? absl::StrFormat("%.1f%% (%d/%d)", 100 * f.Fraction(i), f.fast[i], f.problems)
                                   : "n/a");
  }
  return cells;
}

}  // namespace

std::string FastPLabel(size_t i) { return absl::StrFormat("%g", kFastPThresholds[i]); }

KernelBenchMetrics SummariseKernelBench(const std::vector<KernelBenchProblem>& problems) {
  KernelBenchMetrics m;
  m.eager.fast.assign(kThresholds, 0);
  m.compile.fast.assign(kThresholds, 0);
  bool compile_timed = false;
  for (const KernelBenchProblem& p : problems) compile_timed |= p.correct && p.speedup_vs_compile > 0;
  for (const KernelBenchProblem& p : problems) {
    ++m.problems;
    m.correct += p.correct;
    Count(m.eager, p, p.speedup_vs_eager);
    if (compile_timed && (!p.correct || p.speedup_vs_compile > 0)) Count(m.compile, p, p.speedup_vs_compile);
    if (m.compile_note.empty() && p.correct && p.speedup_vs_compile <= 0) m.compile_note = p.compile_note;
    if (p.evaluations > 0) {
      m.evaluations += p.evaluations;
      m.wall_s += p.wall_s;
    }
  }
  if (compile_timed) m.compile_note.clear();
  return m;
}

nlohmann::json KernelBenchJson(const KernelBenchMetrics& m) {
  nlohmann::json j = {{"problems", m.problems},
                      {"correct", m.correct},
                      {"correctness", m.problems > 0 ? static_cast<double>(m.correct) / m.problems : 0.0},
                      {"baseline_problems", {{"eager", m.eager.problems}, {"compile", m.compile.problems}}},
                      {"fast_p", {{"eager", FastPJson(m.eager)}, {"compile", FastPJson(m.compile)}}},
                      {"evaluations", m.evaluations},
                      {"seconds_per_evaluation",
                       m.evaluations > 0 ? nlohmann::json(m.SecondsPerEvaluation()) : nlohmann::json(nullptr)}};
  if (m.compile.problems == 0) {
    j["compile_unavailable"] = m.compile_note.empty() ? "no problem was timed against torch.compile" : m.compile_note;
  }
  return j;
}

std::string KernelBenchText(const KernelBenchMetrics& m, bool markdown) {
  const std::string headline = absl::StrFormat(
      "KernelBench: %d problems, %d correct (%.1f%%); fast_p = the fraction of problems whose kernel is correct "
      "and more than p times faster than the baseline",
      m.problems, m.correct, m.problems > 0 ? 100.0 * m.correct / m.problems : 0.0);
  const std::string seconds = m.evaluations > 0
                                  ? absl::StrFormat("seconds per evaluation: %.2f s (%d evaluations in %.1f s)",
                                                    m.SecondsPerEvaluation(), m.evaluations, m.wall_s)
                                  : std::string("seconds per evaluation: - (nothing evaluated)");
  const std::string why =
      m.compile.problems > 0 ? ""
                             : (m.compile_note.empty() ? "no problem was timed against torch.compile" : m.compile_note);
  std::vector<std::string> head = {"baseline", "problems"};
  for (size_t i = 0; i < kThresholds; ++i) head.push_back("fast_" + FastPLabel(i));
  std::vector<std::vector<std::string>> lines;
  for (const auto& [name, f] : {std::pair<const char*, const FastP&>{"PyTorch eager", m.eager},
                                std::pair<const char*, const FastP&>{"torch.compile", m.compile}}) {
    std::vector<std::string> line = {name, absl::StrCat(f.problems)};
    for (std::string& c : FastPCells(f)) line.push_back(std::move(c));
    lines.push_back(std::move(line));
  }
  if (markdown) {
    std::string out = absl::StrCat("**", headline, "**\n\n| ", absl::StrJoin(head, " | "), " |\n|---|");
    for (size_t i = 1; i < head.size(); ++i) absl::StrAppend(&out, "---:|");
    absl::StrAppend(&out, "\n");
    for (const auto& line : lines) absl::StrAppend(&out, "| ", absl::StrJoin(line, " | "), " |\n");
    if (!why.empty()) absl::StrAppend(&out, "\ntorch.compile n/a: ", why, "\n");
    return absl::StrCat(out, "\n", seconds, "\n");
  }
  auto row = [](const std::vector<std::string>& cells) {
    std::string l = absl::StrFormat("  %-14s %-9s", cells[0], cells[1]);
    for (size_t i = 2; i < cells.size(); ++i) absl::StrAppend(&l, absl::StrFormat(" %-15s", cells[i]));
    return std::string(absl::StripTrailingAsciiWhitespace(l));
  };
  std::string out = absl::StrCat(headline, "\n", row(head), "\n");
  for (const auto& line : lines) absl::StrAppend(&out, row(line), "\n");
  if (!why.empty()) absl::StrAppend(&out, "  torch.compile n/a: ", why, "\n");
  return absl::StrCat(out, "  ", seconds, "\n");
}

}  // namespace kevo::cli
