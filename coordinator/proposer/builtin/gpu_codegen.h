// What the GPU recipes share: those of CUDA (cuda_*.cc, language "cuda", for
// the nvidia platform's workers) and of HIP (hip_*.cc, language "hip", for the
// amd platform's). Each dialect's prelude every generated source starts with
// and its candidate wrapper; the pieces the two elementwise recipes write
// alike, from binding to launch. Internal to kevo_builtin_proposer; pure, thread-safe.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "coordinator/proposer/builtin/bound_recipe.h"
#include "coordinator/proposer/builtin/codegen.h"
#include "kevo/v1/evaluation.pb.h"
#include "kevo/v1/task.pb.h"

namespace kevo::proposer {

// The platform names CUDA and HIP recipes apply to.
inline constexpr char kCudaPlatform[] = "nvidia";
inline constexpr char kHipPlatform[] = "amd";

// Includes and the kevo_min / kevo_max / kevo_ceil_div helpers that
// ElementCountExpr uses, usable from host and device code, and
// kevo_grid_blocks(per_sm) for grid-stride launches.
// Built once; the reference stays valid.
const std::string& CudaPrelude();

// CUDA device code for a deterministic sum over the whole grid, for kernels
// that define kThreads (threads per block, a multiple of 32) before it:
// BlockSum(v), the block's sum of a double per thread (in thread 0), and
// GridSum(v, &total), which adds each block's sum in block order through
// device-global partials (at most kMaxBlocks = 4096 blocks) and a counter,
// never atomically on the sum: true in the last block's thread 0, with the
// total. Each block calls it once, with all its threads.
const std::string& CudaGridSum();

// The same for HIP, with the wavefront width (kWave = 64 on CDNA);
// kevo_grid_blocks(per_cu) counts compute units.
const std::string& HipPrelude();

// A candidate of language "cuda" or "hip" with `source`.
inline v1::Candidate CudaCandidate(std::string source) { return SourceCandidate("cuda", std::move(source)); }
inline v1::Candidate HipCandidate(std::string source) { return SourceCandidate("hip", std::move(source)); }

// What the elementwise recipes bind (BindElementwiseF32): the expression's
// inputs and the output, which points into the task.
struct GpuElementwiseBinding {
  ExprInfo info;
  const v1::TensorSpec* out = nullptr;
};

// An elementwise recipe of one GPU platform.
class GpuElementwiseRecipe : public BoundRecipe<GpuElementwiseBinding> {
 public:
  using BoundRecipe::BoundRecipe;

 protected:
  bool Bind(const v1::Task& task, GpuElementwiseBinding* b) const final {
    b->out = BindElementwiseF32(task, &b->info);
    return b->out != nullptr;
  }
};

// The parameter lists of an elementwise kernel over float32 `inputs` (those
// the expression reads, in task order) writing `out`.
struct ElementwiseParams {
  std::vector<std::string> scalars;   // "float x", ...: kevo_op's parameters
  std::vector<std::string> pointers;  // "const float* __restrict__ x", ..., then out's
  std::vector<std::string> args;      // "x", ..., "out": the kernel's arguments
  std::vector<std::string> aligned;   // "kevo_aligned(x)", ...: the vector path's test
  std::vector<std::string> at_i;      // "x[i]", ...: the scalar tail's operands
};
ElementwiseParams MakeElementwiseParams(const std::vector<std::string>& inputs, const std::string& out);

// The end of an elementwise kernel template (the scalar tail after the last
// whole vector, writing `out`) and of the anonymous namespace (kevo_aligned),
// then the start of the exported function `definition` up to `per_block`,
// the elements one block handles per round; `out_spec` gives the count.
std::string ElementwiseKernelEnd(const ElementwiseParams& p, const std::string& out, const std::string& definition,
                                 const v1::TensorSpec& out_spec);

// The launch of kevo_kernel<kVec> when every pointer is aligned to a vector,
// else of kevo_kernel<1>; `launch(kernel, args)` writes one launch statement.
std::string ElementwiseLaunches(
    const ElementwiseParams& p,
    const std::function<std::string(const std::string& kernel, const std::string& args)>& launch);

}  // namespace kevo::proposer
