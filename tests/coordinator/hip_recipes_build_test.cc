// The built-in HIP recipes without a GPU (runs in CI, where hipcc is
// installed): on platform amd only HIP recipes apply to the suite's hinted
// tasks and they propose "hip" candidates; every recipe's default genome and
// first seed override compile with the amd backend's real compile path
// (sandboxed hipcc for gfx90a, symbol policy, the task's exported function),
// do not spill and keep at least 2 waves per SIMD. The MFMA GEMM is compiled
// for gfx90a and gfx940, for bf16 and fp16, and its code objects are
// disassembled (llvm-objdump): the kernel's inner loop really is v_mfma_f32_*
// instructions. Whether the kernels are correct and fast needs an AMD GPU,
// which this project has not had (docs/amd.md).
#include <filesystem>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

#include "common/sandbox/sandbox.h"
#include "common/task/task_loader.h"
#include "coordinator/proposer/builtin/builtin_proposer.h"
#include "coordinator/proposer/builtin/recipe.h"
#include "tests/testing/process.h"
#include "worker/backends/amd/amd_backend.h"
#include "worker/backends/amd/hip_build.h"
#include "worker/pipeline/kernel_builder.h"

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
  bool mfma = false;   // built for gfx90a and gfx940; its GEMM kernel must use MFMA
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.task << " -> " << c.recipe; }
const Case kCases[] = {
    {"vector_add", "hip_elementwise"}, {"gelu_tanh", "hip_elementwise"},
    {"softmax", "hip_softmax"},        {"row_max", "hip_row_reduce"},
    {"matmul", "hip_gemm_lds"},        {"matmul_bf16", "hip_gemm_mfma", /*mfma=*/true},
};

// A sandboxed hipcc KernelBuilder with a build cache shared between runs.
std::unique_ptr<worker::KernelBuilder> HipBuilder(const sandbox::Sandbox* sb, const std::string& hipcc) {
  const std::string cache =
      (fs::path(testing::BinDir()) / ".." / "tests" / "hip-recipes-build-cache").lexically_normal().string();
  fs::create_directories(cache);
  return std::make_unique<worker::KernelBuilder>(sb, hipcc, "hip_recipes_build_test", cache, absl::Seconds(600),
                                                 int64_t{8} << 30, std::vector<std::string>{}, worker::HipLayout());
}

// Every target's MFMA kernel holds v_mfma_f32 instructions (from the
// disassembly); the plain fallback kernel holds none.
void ExpectMfmaInTheGemmKernel(const worker::HipCompileResult& r, const std::vector<std::string>& targets) {
  for (const std::string& target : targets) {
    int gemm = 0;
    for (const worker::KernelResources& k : r.kernels) {
      if (k.target != target) continue;
      EXPECT_TRUE(k.disassembled) << target << " " << k.kernel;
      if (k.kernel.find("kevo_gemm_mfma") != std::string::npos) {
        ++gemm;
        EXPECT_GE(k.mfma_instructions, 4) << target << " " << k.kernel;
        EXPECT_GT(k.lds_bytes, 0) << target << " " << k.kernel;
      } else {
        EXPECT_EQ(k.mfma_instructions, 0) << target << " " << k.kernel;
      }
    }
    EXPECT_EQ(gemm, 1) << target;
  }
}

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
  const std::unique_ptr<worker::KernelBuilder> builder = HipBuilder(sb->get(), hipcc);
  const std::vector<std::string> targets =
      GetParam().mfma ? std::vector<std::string>{"gfx90a", "gfx940"} : std::vector<std::string>{"gfx90a"};
  const std::string objdump = worker::FindLlvmObjdump();
  if (GetParam().mfma) {
    ASSERT_FALSE(objdump.empty()) << "llvm-objdump (llvm-15, a dependency of hipcc) not found";
  }
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
    worker::HipCompileResult r = worker::CompileHipCandidate(*builder, task, p.candidate, targets, objdump);
    ASSERT_EQ(r.status, v1::OK) << r.message << "\n" << r.build.compiler_output << "\n" << p.candidate.source();
    ASSERT_FALSE(r.kernels.empty());
    for (const worker::KernelResources& k : r.kernels) {
      EXPECT_EQ(k.vgpr_spills + k.sgpr_spills, 0) << k.kernel;
      // 8x8 register tiles of the GEMM leave 3 waves a SIMD: fine for a GEMM.
      EXPECT_GE(k.occupancy, 2) << k.kernel;
    }
    EXPECT_GT(worker::StaticScore(r.kernels), 0.0);
    if (GetParam().mfma) ExpectMfmaInTheGemmKernel(r, targets);
  }
}

// The same recipe for fp16 inputs and a float32 C (the task's dtypes
// changed), with the other MFMA shape and one LDS stage: the f16 builtins,
// the float output and the single-buffered loop compile for both targets.
TEST(HipGemmMfmaTest, Fp16WithFloatOutputCompilesToMfmaForGfx90aAndGfx940) {
  const std::string hipcc = worker::FindHipcc("");
  if (hipcc.empty()) GTEST_SKIP() << "hipcc not found";
  const std::string objdump = worker::FindLlvmObjdump();
  ASSERT_FALSE(objdump.empty()) << "llvm-objdump (llvm-15, a dependency of hipcc) not found";
  auto sb = sandbox::Sandbox::Create({});
  ASSERT_TRUE(sb.ok()) << sb.status();
  const std::unique_ptr<worker::KernelBuilder> builder = HipBuilder(sb->get(), hipcc);
  v1::Task task = Load("matmul_bf16");
  ASSERT_EQ(task.outputs_size(), 1);
  for (v1::TensorSpec& in : *task.mutable_inputs()) in.set_dtype(v1::F16);
  task.mutable_outputs(0)->set_dtype(v1::F32);
  const Recipe* recipe = FindRecipe("hip_gemm_mfma");
  ASSERT_NE(recipe, nullptr);
  ASSERT_TRUE(recipe->Applies(task, "amd"));
  Genome genome{recipe->name(), recipe->space().Defaults()};
  genome.params["instr"] = "16x16x16";
  genome.params["double_buffer"] = "0";
  auto candidate = recipe->Generate(task, genome);
  ASSERT_TRUE(candidate.ok()) << candidate.status();
  EXPECT_NE(candidate->source().find("__builtin_amdgcn_mfma_f32_16x16x16f16("), std::string::npos);
  EXPECT_NE(candidate->source().find("using OutT = float;"), std::string::npos);
  const std::vector<std::string> targets = {"gfx90a", "gfx940"};
  worker::HipCompileResult r = worker::CompileHipCandidate(*builder, task, *candidate, targets, objdump);
  ASSERT_EQ(r.status, v1::OK) << r.message << "\n" << r.build.compiler_output << "\n" << candidate->source();
  for (const worker::KernelResources& k : r.kernels) EXPECT_EQ(k.vgpr_spills + k.sgpr_spills, 0) << k.kernel;
  ExpectMfmaInTheGemmKernel(r, targets);
}

TEST(HipGemmMfmaTest, GenomesThatDoNotFitAreRefusedBeforeCompiling) {
  const v1::Task task = Load("matmul_bf16");
  const Recipe* recipe = FindRecipe("hip_gemm_mfma");
  ASSERT_NE(recipe, nullptr);
  Genome genome{recipe->name(), recipe->space().Defaults()};
  genome.params["tile"] = "256x128";
  genome.params["tile_k"] = "64";
  genome.params["pad"] = "8";  // 2 x 384 x 72 x 2 B of LDS
  auto lds = recipe->Generate(task, genome);
  ASSERT_FALSE(lds.ok());
  EXPECT_EQ(lds.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(lds.status().message().find("110592 bytes of LDS"), std::string::npos) << lds.status();
  genome = Genome{recipe->name(), recipe->space().Defaults()};
  genome.params["tile"] = "256x128";
  genome.params["wave_tile"] = "32x32";  // 32 wavefronts
  auto waves = recipe->Generate(task, genome);
  ASSERT_FALSE(waves.ok());
  EXPECT_NE(waves.status().message().find("32 wavefronts"), std::string::npos) << waves.status();
  // The f32 GEMM is hip_gemm_lds's, not this recipe's.
  EXPECT_FALSE(recipe->Applies(Load("matmul"), "amd"));
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
