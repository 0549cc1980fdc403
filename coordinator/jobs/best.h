// The rules by which a job's results are figured and its best is chosen:
// pure functions of a job, a node and an evaluation, with no store and no
// clock, shared by the job loop (results.cc) and its tests.
#pragma once

#include <string>

#include "kevo/v1/evaluation.pb.h"
#include "kevo/v1/job.pb.h"

namespace kevo::jobs {

// How far apart two figures of one kernel may be (the larger over the
// smaller) before its re-timing is said to disagree with its own evaluation:
// ratios measured interleaved in one runner move by a few percent between
// runs on a quiet host; more says the host's timings are not to be trusted
// (docs/search.md, "Re-timing").
constexpr double kRetimingDisagreement = 1.25;

// A node's side-by-side figure against the job's current best, where one was
// measured against that node (> 1: the node is faster); 0, and why not, when
// none was.
struct SideBySide {
  double speedup = 0;
  std::string why_not;
};

// "1.52x" for a measured best, "static score 0.83" for one a compile-only
// fleet ranked without measuring.
std::string BestLabel(const v1::Job& job);

// What makes two evaluations' timings comparable: the device and the
// compiler that measured and built them ("" when the evaluation does not say).
std::string ToolchainOf(const v1::Evaluation& e);

SideBySide SideBySideOf(const v1::Job& job, const std::string& rival_node_id, const v1::Evaluation& e);

// Whether a measured, correct `node` replaces the job's best, and why
// (recorded in node.best_decision). The two kernels timed side by side in
// the node's own evaluation decide it (the rival was the job's best when the
// node was submitted); otherwise, when there was no production stage, the
// rival failed there or the best has changed since, their fitness does:
// each is a ratio over a yardstick timed beside that kernel alone, so only
// when both were measured with one toolchain (`toolchain`, the node's
// ToolchainOf, and `best_toolchain`, the best's): a ratio over a reference
// another compiler built, on another device, says nothing of which kernel is
// faster, and the best stays.
bool BecomesBest(const v1::Job& job, v1::Node& node, const SideBySide& side_by_side, const std::string& toolchain,
                 const std::string& best_toolchain);

// Fills `node`'s status and figures from an evaluation of its kernel. Fitness
// is the speedup over what users run today when the job measures it
// (docs/search.md, "Fitness"), else over the naive reference; the job's
// yardstick is fixed by its first measured evaluation.
void SetFigures(v1::Job& job, v1::Node& node, const v1::Evaluation& e);

// The measured figures of `from` (SetFigures's, but for the side by side) into `to`.
void CopyFigures(const v1::Node& from, v1::Node& to);

// Makes `node` the job's best.
void InstallBest(v1::Job& job, const v1::Node& node);

// Failures of a re-timing that are not the kernel's (the worker's, or the
// job's own cancellation): the node's own figure then stands.
bool NotTheKernels(v1::EvalStatus status);

}  // namespace kevo::jobs
