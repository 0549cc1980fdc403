// The built-in CUDA recipes without a GPU (runs in CI, where nvcc is
// installed): on platform nvidia only CUDA recipes apply to the suite's
// hinted tasks and they propose "cuda" candidates; every recipe's default
// genome compiles with the nvidia backend's real compile
// path (sandboxed nvcc for sm_90a, symbol policy, the task's exported
// function). Skipped only when nvcc is absent. Whether the kernels are
// correct and fast needs a GPU: tests/bench/nvidia_h200.sh.
#include <cstdlib>
#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/sandbox/sandbox.h"
#include "common/task/task_loader.h"
#include "coordinator/proposer/builtin/builtin_proposer.h"
#include "coordinator/proposer/builtin/recipe.h"
#include "gtest/gtest.h"
#include "worker/backends/cpu/kernel_builder.h"
#include "worker/backends/nvidia/cuda_build.h"
#include "worker/backends/nvidia/nvidia_backend.h"

namespace kevo::proposer {
namespace {

namespace fs = std::filesystem;

std::string Env(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}

v1::Task Load(const std::string& name) {
  absl::StatusOr<v1::Task> task = task::LoadTaskDir(absl::StrCat(Env("KEVO_SOURCE_DIR", "."), "/tasks/", name));
  EXPECT_TRUE(task.ok()) << task.status();
  return task.ok() ? *task : v1::Task();
}

// (task, the one CUDA recipe that applies to it)
const std::pair<const char*, const char*> kCases[] = {
    {"gelu_erf", "cuda_elementwise"}, {"vector_add", "cuda_elementwise"},
    {"softmax", "cuda_softmax"},      {"layer_norm", "cuda_layer_norm"},
    {"row_sum", "cuda_row_reduce"},   {"matmul_bf16", "cuda_gemm_mma"},
};

TEST(CudaRecipesTest, OnlyCudaRecipesApplyOnNvidiaAndNeverOnOtherPlatforms) {
  for (const auto& [task_name, recipe_name] : kCases) {
    const v1::Task task = Load(task_name);
    const std::vector<const Recipe*> recipes = BuiltinProposer::ApplicableRecipes(task, "nvidia");
    ASSERT_EQ(recipes.size(), 1u) << task_name;
    EXPECT_EQ(recipes[0]->name(), recipe_name);
    for (const char* other : {"cpu", "mtia-sim"}) {
      for (const Recipe* r : BuiltinProposer::ApplicableRecipes(task, other)) {
        EXPECT_NE(r->name().rfind("cuda_", 0), 0u) << r->name() << " applies on " << other;
      }
    }
  }
  // The f32 matmul has no CUDA recipe (the tensor-core one is bf16/fp16).
  EXPECT_TRUE(BuiltinProposer::ApplicableRecipes(Load("matmul"), "nvidia").empty());
}

TEST(CudaRecipesTest, FirstGenerationIsCudaAndCompilesWithNvccForHopper) {
  const std::string nvcc = worker::FindNvcc("");
  if (nvcc.empty()) GTEST_SKIP() << "nvcc not found (set CUDACXX or install /usr/local/cuda)";
  auto sb = sandbox::Sandbox::Create({});
  ASSERT_TRUE(sb.ok()) << sb.status();
  const std::string cache =
      (fs::path(Env("KEVO_BIN_DIR", ".")) / ".." / "tests" / "cuda-recipes-build-cache").lexically_normal().string();
  fs::create_directories(cache);
  worker::KernelBuilder builder(sb->get(), nvcc, "cuda_recipes_build_test", cache, absl::Seconds(600),
                                int64_t{8} << 30, {}, worker::NvccLayout());
  for (const auto& [task_name, recipe_name] : kCases) {
    if (std::string(task_name) == "vector_add") continue;  // the same recipe as gelu_erf
    const v1::Task task = Load(task_name);
    BuiltinProposer proposer;
    ProposeRequest req;
    req.task = &task;
    req.platform = "nvidia";
    req.count = 1;  // the default genome (nvcc takes seconds a candidate)
    auto proposals = proposer.Propose(req);
    ASSERT_TRUE(proposals.ok()) << task_name << ": " << proposals.status();
    ASSERT_EQ(proposals->size(), 1u) << task_name;
    for (const Proposal& p : *proposals) {
      EXPECT_EQ(p.genome.recipe, recipe_name);
      EXPECT_EQ(p.candidate.language(), "cuda");
      worker::CudaCompileResult r = worker::CompileCudaCandidate(builder, task, p.candidate, "sm_90a");
      EXPECT_EQ(r.status, v1::OK) << task_name << " " << p.genome.ToString() << ": " << r.message << "\n"
                                  << p.candidate.source();
    }
  }
}

}  // namespace
}  // namespace kevo::proposer
