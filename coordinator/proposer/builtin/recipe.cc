#include "coordinator/proposer/builtin/recipe.h"

#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kevo::proposer {

const ParamSpec* SearchSpace::Find(std::string_view name) const {
  for (const ParamSpec& p : params_) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

int SearchSpace::IndexOf(const ParamSpec& param, std::string_view value) {
  for (size_t i = 0; i < param.values.size(); ++i) {
    if (param.values[i] == value) return static_cast<int>(i);
  }
  return -1;
}

std::map<std::string, std::string> SearchSpace::Defaults() const {
  std::map<std::string, std::string> out;
  for (const ParamSpec& p : params_) out[p.name] = p.default_value;
  return out;
}

std::map<std::string, std::string> SearchSpace::Random(std::mt19937_64& rng) const {
  std::map<std::string, std::string> out;
  for (const ParamSpec& p : params_) {
    std::uniform_int_distribution<size_t> pick(0, p.values.size() - 1);
    out[p.name] = p.values[pick(rng)];
  }
  return out;
}

absl::Status SearchSpace::Check(const std::map<std::string, std::string>& params) const {
  for (const ParamSpec& p : params_) {
    auto it = params.find(p.name);
    if (it == params.end()) {
      return absl::InvalidArgumentError(absl::StrCat("parameter '", p.name, "' is missing"));
    }
    if (IndexOf(p, it->second) < 0) {
      return absl::InvalidArgumentError(absl::StrCat("parameter '", p.name, "' has value '", it->second,
                                                     "'; allowed: ", absl::StrJoin(p.values, "|")));
    }
  }
  for (const auto& [key, value] : params) {
    if (Find(key) == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("unknown parameter '", key, "'"));
    }
  }
  return absl::OkStatus();
}

uint64_t SearchSpace::Size() const {
  uint64_t size = 1;
  for (const ParamSpec& p : params_) {
    if (size > std::numeric_limits<uint64_t>::max() / p.values.size()) {
      return std::numeric_limits<uint64_t>::max();
    }
    size *= p.values.size();
  }
  return size;
}

const std::vector<std::unique_ptr<Recipe>>& AllRecipes() {
  static const auto* recipes = [] {
    auto* v = new std::vector<std::unique_ptr<Recipe>>();
    v->push_back(NewElementwiseRecipe());
    v->push_back(NewRowReduceRecipe());
    v->push_back(NewColReduceRecipe());
    v->push_back(NewRowScanRecipe());
    v->push_back(NewMapReduceRecipe());
    v->push_back(NewPoolRecipe());
    v->push_back(NewRowScaleRecipe());
    v->push_back(NewRowArgmaxRecipe());
    v->push_back(NewSoftmaxThreePassRecipe());
    v->push_back(NewSoftmaxOnlineRecipe());
    v->push_back(NewLogSoftmaxTwoPassRecipe());
    v->push_back(NewLogSoftmaxOnlineRecipe());
    v->push_back(NewRowNormRecipe());
    v->push_back(NewCrossEntropyRecipe());
    v->push_back(NewGemvRowsRecipe());
    v->push_back(NewGemmPackedRecipe());
    v->push_back(NewGemmBf16DotRecipe());
    v->push_back(NewBucketizeTreeRecipe());
    v->push_back(NewBucketizeSearchRecipe());
    v->push_back(NewBucketizeLutRecipe());
    v->push_back(NewMapIdLutRecipe());
    v->push_back(NewElementwiseRowsRecipe());
    v->push_back(NewEmbeddingBagRowsRecipe());
    v->push_back(NewFmIkjRecipe());
    v->push_back(NewMlpRmsNormIkjRecipe());
    // The packed GEMM first: its default seeds before the register tiles'
    // (matmul_at: 1.11-1.18x of OpenBLAS sgemm against gemm_tiles' 0.61-0.66x).
    v->push_back(NewGemmPackedExRecipe());
    v->push_back(NewGemmTilesRecipe());
    v->push_back(NewJaggedTruncateRecipe());
    v->push_back(NewTopkRowsRecipe());
    v->push_back(NewSaturatingCastRecipe());
    // The register-tiled direct convolution first, then im2col + GEMM, then
    // the row-by-row direct one: on a 2-core Zen 4 their defaults read
    // 1.12-1.22x, 0.91x and 0.25x of PyTorch (docs/search.md, conv2d_direct).
    v->push_back(NewConv2dDirectRecipe());
    v->push_back(NewConv2dIm2colRecipe());
    v->push_back(NewConv2dRowsRecipe());
    v->push_back(NewCudaElementwiseRecipe());
    v->push_back(NewCudaSoftmaxRecipe());
    v->push_back(NewCudaLayerNormRecipe());
    v->push_back(NewCudaRowReduceRecipe());
    v->push_back(NewCudaRowScaleRecipe());
    v->push_back(NewCudaColReduceRecipe());
    v->push_back(NewCudaRowScanRecipe());
    v->push_back(NewCudaMapReduceRecipe());
    v->push_back(NewCudaCrossEntropyRecipe());
    v->push_back(NewCudaPoolRecipe());
    v->push_back(NewCudaGemmWgmmaRecipe());
    v->push_back(NewCudaGemmMmaRecipe());
    v->push_back(NewMtiaSoftmaxRecipe());
    v->push_back(NewMtiaRowReduceRecipe());
    v->push_back(NewMtiaElementwiseRecipe());
    v->push_back(NewMtiaGemmRecipe());
    v->push_back(NewMtiaBucketizeRecipe());
    v->push_back(NewMtiaEmbeddingBagRecipe());
    v->push_back(NewPytorchRewriteRecipe());
    for (auto& bridge : NewKernelBenchBridgeRecipes()) v->push_back(std::move(bridge));
    v->push_back(NewHipElementwiseRecipe());
    v->push_back(NewHipSoftmaxRecipe());
    v->push_back(NewHipRowReduceRecipe());
    v->push_back(NewHipGemmLdsRecipe());
    v->push_back(NewHipGemmMfmaRecipe());
    v->push_back(NewGenericRecipe());
    return v;
  }();
  return *recipes;
}

const Recipe* FindRecipe(std::string_view name) {
  for (const auto& r : AllRecipes()) {
    if (r->name() == name) return r.get();
  }
  return nullptr;
}

}  // namespace kevo::proposer
