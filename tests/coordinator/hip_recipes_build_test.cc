// The built-in HIP recipes without a GPU (runs in CI, where hipcc is
// installed): on platform amd only HIP recipes apply to the suite's hinted
// tasks and they propose "hip" candidates; every recipe's default genome and
// first seed override compile with the amd backend's real compile path
// (sandboxed hipcc for gfx90a, symbol policy, the task's exported function),
// do not spill and keep at least 2 waves per SIMD. Whether the kernels are correct and
// fast needs an AMD GPU, which this project has not had (docs/amd.md).
#include <filesystem>
#include <ostream>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/sandbox/sandbox.h"
#include "common/task/task_loader.h"
#include "coordinator/proposer/builtin/builtin_proposer.h"
#include "coordinator/proposer/builtin/recipe.h"
#include "gtest/gtest.h"
#include "tests/testing/process.h"
#include "worker/backends/amd/amd_backend.h"
#include "worker/backends/amd/hip_build.h"
#include "worker/backends/cpu/kernel_builder.h"

namespace kevo::proposer {
namespace {

namespace fs = std::filesystem;

v1::Task Load(const std::string& name) {
  absl::StatusOr<v1::Task> task = task::LoadTaskDir(absl::StrCat(testing::SourceDir(), "/tasks/", name));
  EXPECT_TRUE(task.ok()) << task.status();
  return task.ok() ? *task : v1::Task();
}

struct Case {
  const char* task;
  const char* recipe;  // the one HIP recipe that applies
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.task << " -> " << c.recipe; }
const Case kCases[] = {
    {"vector_add", "hip_elementwise"}, {"gelu_tanh", "hip_elementwise"}, {"softmax", "hip_softmax"},
    {"row_max", "hip_row_reduce"},     {"matmul", "hip_gemm_lds"},
};

class HipRecipesTest : public ::testing::TestWithParam<Case> {};

TEST_P(HipRecipesTest, OnlyTheHipRecipeAppliesOnAmdAndNeverElsewhere) {
  const v1::Task task = Load(GetParam().task);
  const std::vector<const Recipe*> recipes = BuiltinProposer::ApplicableRecipes(task, "amd");
  ASSERT_EQ(recipes.size(), 1u);
  EXPECT_EQ(recipes[0]->name(), GetParam().recipe);
  for (const char* other : {"cpu", "nvidia", "mtia-sim"}) {
    for (const Recipe* r : BuiltinProposer::ApplicableRecipes(task, other)) {
      EXPECT_NE(r->name().rfind("hip_", 0), 0u) << r->name() << " applies on " << other;
    }
  }
}

TEST_P(HipRecipesTest, FirstGenerationCompilesForGfx90aWithoutSpills) {
  const std::string hipcc = worker::FindHipcc("");
  if (hipcc.empty()) GTEST_SKIP() << "hipcc not found";
  auto sb = sandbox::Sandbox::Create({});
  ASSERT_TRUE(sb.ok()) << sb.status();
  const std::string cache = (fs::path(testing::BinDir()) / ".." / "tests" / "hip-recipes-build-cache")
                                .lexically_normal()
                                .string();
  fs::create_directories(cache);
  worker::KernelBuilder builder(sb->get(), hipcc, "hip_recipes_build_test", cache, absl::Seconds(600),
                                int64_t{8} << 30, {}, worker::HipLayout());
  const v1::Task task = Load(GetParam().task);
  BuiltinProposer proposer;
  ProposeRequest req;
  req.task = &task;
  req.platform = "amd";
  req.count = 2;  // the default genome and the first seed override
  auto proposals = proposer.Propose(req);
  ASSERT_TRUE(proposals.ok()) << proposals.status();
  ASSERT_EQ(proposals->size(), 2u);
  for (const Proposal& p : *proposals) {
    SCOPED_TRACE(p.genome.ToString());
    EXPECT_EQ(p.genome.recipe, GetParam().recipe);
    EXPECT_EQ(p.candidate.language(), "hip");
    worker::HipCompileResult r = worker::CompileHipCandidate(builder, task, p.candidate, {"gfx90a"});
    ASSERT_EQ(r.status, v1::OK) << r.message << "\n" << r.build.compiler_output << "\n" << p.candidate.source();
    ASSERT_FALSE(r.kernels.empty());
    for (const worker::KernelResources& k : r.kernels) {
      EXPECT_EQ(k.vgpr_spills + k.sgpr_spills, 0) << k.kernel;
      // 8x8 register tiles of the GEMM leave 3 waves a SIMD: fine for a GEMM.
      EXPECT_GE(k.occupancy, 2) << k.kernel;
    }
    EXPECT_GT(worker::StaticScore(r.kernels), 0.0);
  }
}

INSTANTIATE_TEST_SUITE_P(Tasks, HipRecipesTest, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           std::string name = info.param.task;
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace kevo::proposer
