// Recipes of the built-in proposer: parameterised, hand-written kernel
// templates for one computational pattern on one platform. A recipe declares a
// search space (an ordered list of parameters, each with its allowed values
// and a default), says whether it applies to a task (from the task's hints,
// see docs/search.md) and turns a task and a genome (a point of its space)
// into candidate source.
//
// Recipes are stateless after construction: every method is const and
// thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

#include "coordinator/proposer/proposer.h"
#include "kevo/v1/evaluation.pb.h"
#include "kevo/v1/task.pb.h"

namespace kevo::proposer {

// One tunable parameter: its name, the values it may take (in a meaningful
// order, so that neighbouring values are similar) and the default.
struct ParamSpec {
  std::string name;
  std::vector<std::string> values;
  std::string default_value;
  std::string doc;  // one line, for docs/search.md and error messages
};

// The ordered parameters of a recipe.
class SearchSpace {
 public:
  SearchSpace() = default;
  explicit SearchSpace(std::vector<ParamSpec> params) : params_(std::move(params)) {}

  const std::vector<ParamSpec>& params() const { return params_; }
  // Null when the space has no parameter `name`.
  const ParamSpec* Find(std::string_view name) const;
  // Index of `value` among the parameter's values, or -1.
  static int IndexOf(const ParamSpec& param, std::string_view value);

  // Every parameter at its default.
  std::map<std::string, std::string> Defaults() const;
  // Every parameter uniformly at random.
  std::map<std::string, std::string> Random(std::mt19937_64& rng) const;
  // OK when `params` names exactly this space's parameters, each with an
  // allowed value; InvalidArgument naming the first offending parameter.
  absl::Status Check(const std::map<std::string, std::string>& params) const;
  // Number of points in the space (saturates at UINT64_MAX).
  uint64_t Size() const;

 private:
  std::vector<ParamSpec> params_;
};

class Recipe {
 public:
  virtual ~Recipe() = default;

  // Unique among all recipes, e.g. "softmax_online".
  virtual std::string name() const = 0;
  // The pattern family it implements, e.g. "softmax"; recipes of one family
  // are algorithm variants of each other (a mutation may switch between them).
  virtual std::string family() const = 0;
  // One line saying what the generated kernel does.
  virtual std::string description() const = 0;
  // Whether this recipe can generate a kernel for `task` on `platform`
  // ("cpu", "nvidia", ...): the task's hints name its pattern and the hints'
  // tensor and symbol names exist in the task with supported dtypes.
  virtual bool Applies(const v1::Task& task, std::string_view platform) const = 0;
  virtual const SearchSpace& space() const = 0;
  // Points the first generation should try right after the default, as
  // overrides of the default's values (e.g. {threads: 1}: whether threads pay
  // off depends on the host). Every override must lie in the space.
  virtual std::vector<std::map<std::string, std::string>> SeedOverrides() const {
    if (space().Find("threads") == nullptr) return {};
    return {{{"threads", "1"}}};
  }
  // The seed overrides for a job on `platform`, for a recipe that runs on
  // several and whose best first points differ between them.
  virtual std::vector<std::map<std::string, std::string>> SeedOverridesOn(std::string_view platform) const {
    return SeedOverrides();
  }
  // Children of `parent` worth trying before any random mutation, as
  // overrides of its values, when the task (e.g. its captured Model graph)
  // says so on `platform`: pytorch_rewrite's TF32 for a Model with float32
  // GEMMs on a GPU. Children already tried are skipped by the caller.
  virtual std::vector<std::map<std::string, std::string>> DirectedMutations(const v1::Task& task,
                                                                            std::string_view platform,
                                                                            const Genome& parent) const {
    return {};
  }
  // Whether a KernelBench parent that only reruns PyTorch (pytorch_rewrite)
  // should get this recipe at its defaults as a child before any left to
  // chance, because it removes work PyTorch does (a bridge that never
  // computes the indices torch.max computes and the Model drops), or
  // because it runs the whole Model, which pytorch_rewrite cannot speed up.
  virtual bool DirectedVariant(const v1::Task& task, std::string_view platform) const { return false; }
  // The candidate (source, language, extra flags) for `genome`. Returns
  // InvalidArgument when the genome is outside the space or names another
  // recipe, FailedPrecondition when the recipe does not apply to `task`.
  virtual absl::StatusOr<v1::Candidate> Generate(const v1::Task& task, const Genome& genome) const = 0;
};

// Every built-in recipe, in a fixed order (the generic mutator last).
const std::vector<std::unique_ptr<Recipe>>& AllRecipes();
// The recipe named `name`, or null.
const Recipe* FindRecipe(std::string_view name);

// Factories, one per recipe (defined next to each recipe).
std::unique_ptr<Recipe> NewElementwiseRecipe();
std::unique_ptr<Recipe> NewRowReduceRecipe();
// Reductions along a middle dim (col_reduce.cc; no native task has the shape:
// the KernelBench bridge's).
std::unique_ptr<Recipe> NewColReduceRecipe();
// Cumulative sums and products along rows (scan.cc; the KernelBench bridge's).
std::unique_ptr<Recipe> NewRowScanRecipe();
// Sums of an elementwise expression over all elements (map_reduce.cc; the KernelBench bridge's).
std::unique_ptr<Recipe> NewMapReduceRecipe();
// Max and average pooling over up to three dims (pool.cc; the KernelBench bridge's).
std::unique_ptr<Recipe> NewPoolRecipe();
// Row L1 (mean) and L2 norms and the divide (rows.cc; the KernelBench bridge's).
std::unique_ptr<Recipe> NewRowScaleRecipe();
std::unique_ptr<Recipe> NewRowNormRecipe();
std::unique_ptr<Recipe> NewGemvRowsRecipe();
std::unique_ptr<Recipe> NewGemmPackedExRecipe();
std::unique_ptr<Recipe> NewCrossEntropyRecipe();
std::unique_ptr<Recipe> NewRowArgmaxRecipe();
std::unique_ptr<Recipe> NewSoftmaxThreePassRecipe();
std::unique_ptr<Recipe> NewSoftmaxOnlineRecipe();
std::unique_ptr<Recipe> NewLogSoftmaxTwoPassRecipe();
std::unique_ptr<Recipe> NewLogSoftmaxOnlineRecipe();
std::unique_ptr<Recipe> NewGemmPackedRecipe();
std::unique_ptr<Recipe> NewGemmBf16DotRecipe();
std::unique_ptr<Recipe> NewBucketizeSearchRecipe();
std::unique_ptr<Recipe> NewBucketizeLutRecipe();
std::unique_ptr<Recipe> NewBucketizeTreeRecipe();
std::unique_ptr<Recipe> NewMapIdLutRecipe();
std::unique_ptr<Recipe> NewElementwiseRowsRecipe();
std::unique_ptr<Recipe> NewEmbeddingBagRowsRecipe();
std::unique_ptr<Recipe> NewFmIkjRecipe();
std::unique_ptr<Recipe> NewMlpRmsNormIkjRecipe();
std::unique_ptr<Recipe> NewGemmTilesRecipe();
std::unique_ptr<Recipe> NewJaggedTruncateRecipe();
// Per-row top k of scored lists (topk.cc).
std::unique_ptr<Recipe> NewTopkRowsRecipe();
std::unique_ptr<Recipe> NewSaturatingCastRecipe();
std::unique_ptr<Recipe> NewConv2dRowsRecipe();
std::unique_ptr<Recipe> NewConv2dDirectRecipe();
std::unique_ptr<Recipe> NewConv2dIm2colRecipe();
std::unique_ptr<Recipe> NewGenericRecipe();
// KernelBench tasks (language "python"), pytorch_rewrite.cc.
std::unique_ptr<Recipe> NewPytorchRewriteRecipe();
// KernelBench tasks with a captured graph: "kb_<recipe>", one per CPU or CUDA
// recipe a graph node can be lowered to (kernelbench_bridge.cc).
std::vector<std::unique_ptr<Recipe>> NewKernelBenchBridgeRecipes();
// nvidia (language "cuda"), cuda_*.cc.
std::unique_ptr<Recipe> NewCudaElementwiseRecipe();
std::unique_ptr<Recipe> NewCudaSoftmaxRecipe();
std::unique_ptr<Recipe> NewCudaLayerNormRecipe();
std::unique_ptr<Recipe> NewCudaRowReduceRecipe();
std::unique_ptr<Recipe> NewCudaRowScaleRecipe();
std::unique_ptr<Recipe> NewCudaColReduceRecipe();     // col_reduce.cc
std::unique_ptr<Recipe> NewCudaRowScanRecipe();       // scan.cc
std::unique_ptr<Recipe> NewCudaMapReduceRecipe();     // map_reduce.cc
std::unique_ptr<Recipe> NewCudaCrossEntropyRecipe();  // rows.cc
std::unique_ptr<Recipe> NewCudaPoolRecipe();          // pool.cc
std::unique_ptr<Recipe> NewCudaGemmMmaRecipe();
std::unique_ptr<Recipe> NewCudaGemmWgmmaRecipe();
// mtia-sim (language "mtia-c++"), mtia_*.cc.
std::unique_ptr<Recipe> NewMtiaSoftmaxRecipe();
std::unique_ptr<Recipe> NewMtiaRowReduceRecipe();
std::unique_ptr<Recipe> NewMtiaElementwiseRecipe();
std::unique_ptr<Recipe> NewMtiaGemmRecipe();
std::unique_ptr<Recipe> NewMtiaBucketizeRecipe();
std::unique_ptr<Recipe> NewMtiaEmbeddingBagRecipe();
// amd (language "hip", 64-wide wavefronts), hip_*.cc.
std::unique_ptr<Recipe> NewHipElementwiseRecipe();
std::unique_ptr<Recipe> NewHipSoftmaxRecipe();
std::unique_ptr<Recipe> NewHipRowReduceRecipe();
std::unique_ptr<Recipe> NewHipGemmLdsRecipe();
std::unique_ptr<Recipe> NewHipGemmMfmaRecipe();

}  // namespace kevo::proposer
