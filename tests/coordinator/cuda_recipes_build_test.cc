// The built-in CUDA recipes without a GPU (runs in CI, where nvcc is
// installed): on platform nvidia only CUDA recipes apply to the suite's
// hinted tasks and they propose "cuda" candidates; every task's first seed
// and a few more GEMM points compile with the nvidia backend's real compile
// path (sandboxed nvcc for sm_90a, symbol policy, the task's exported
// function). Skipped only when nvcc is absent. Whether the kernels are
// correct and fast needs a GPU: tests/bench/nvidia_h200.sh, and for the
// GEMM recipes tests/bench/cuda_gemm_bf16.sh.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "common/sandbox/sandbox.h"
#include "common/task/task_loader.h"
#include "coordinator/proposer/builtin/builtin_proposer.h"
#include "coordinator/proposer/builtin/recipe.h"
#include "worker/backends/nvidia/cuda_build.h"
#include "worker/backends/nvidia/nvidia_backend.h"
#include "worker/pipeline/kernel_builder.h"

namespace kevo::proposer {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string Env(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}

v1::Task Load(const std::string& name) {
  absl::StatusOr<v1::Task> task = task::LoadTaskDir(absl::StrCat(Env("KEVO_SOURCE_DIR", "."), "/tasks/", name));
  EXPECT_TRUE(task.ok()) << task.status();
  return task.ok() ? *task : v1::Task();
}

// (task, the first CUDA recipe that applies to it: its default genome is the
// first seed)
const std::pair<const char*, const char*> kCases[] = {
    {"gelu_erf", "cuda_elementwise"},  {"vector_add", "cuda_elementwise"}, {"softmax", "cuda_softmax"},
    {"layer_norm", "cuda_layer_norm"}, {"row_sum", "cuda_row_reduce"},     {"matmul_bf16", "cuda_gemm_wgmma"},
    {"log_softmax", "cuda_softmax"},
};

std::vector<std::string> Names(const std::vector<const Recipe*>& recipes) {
  std::vector<std::string> names;
  for (const Recipe* r : recipes) names.push_back(r->name());
  return names;
}

TEST(CudaRecipesTest, OnlyCudaRecipesApplyOnNvidiaAndNeverOnOtherPlatforms) {
  for (const auto& [task_name, recipe_name] : kCases) {
    const v1::Task task = Load(task_name);
    const std::vector<std::string> names = Names(BuiltinProposer::ApplicableRecipes(task, "nvidia"));
    if (std::string(task_name) == "matmul_bf16") {
      // Hopper's wgmma recipe first, the mma.sync one for any tensor-core GPU.
      EXPECT_EQ(names, (std::vector<std::string>{"cuda_gemm_wgmma", "cuda_gemm_mma"}));
    } else {
      EXPECT_EQ(names, std::vector<std::string>{recipe_name}) << task_name;
    }
    for (const char* other : {"cpu", "mtia-sim"}) {
      for (const Recipe* r : BuiltinProposer::ApplicableRecipes(task, other)) {
        EXPECT_NE(r->name().rfind("cuda_", 0), 0u) << r->name() << " applies on " << other;
      }
    }
  }
  // The f32 matmul has no CUDA recipe (the tensor-core one is bf16/fp16).
  EXPECT_TRUE(BuiltinProposer::ApplicableRecipes(Load("matmul"), "nvidia").empty());
}

// The nvidia backend's compile path: sandboxed nvcc with a build cache in
// the build tree. Skips the test where nvcc is absent.
// The first seed is the whole-tensor grid; a job on one GPU slot evaluates
// it, then expands it: its first child is the second seed (two vectors in
// flight per thread), tried once; a parent that is not the first seed gets
// no directed child.
TEST(CudaRecipesTest, TheFirstElementwiseSeedsFirstChildIsTheSecondSeed) {
  const v1::Task task = Load("gelu_erf");
  BuiltinProposer proposer;
  ProposeRequest seeds_request;
  seeds_request.task = &task;
  seeds_request.platform = "nvidia";
  seeds_request.count = 2;
  seeds_request.use_skills = false;
  absl::StatusOr<std::vector<Proposal>> seeds = proposer.Propose(seeds_request);
  ASSERT_TRUE(seeds.ok()) << seeds.status();
  ASSERT_EQ(seeds->size(), 2u);
  EXPECT_EQ((*seeds)[0].genome.ToString(),
            "cuda_elementwise{blocks_per_sm=all,fast_math=off,threads=128,unroll=1,vec=4}");
  auto first_child = [&](const Genome& genome, std::vector<ChildInfo> children) {
    ProposeRequest request = seeds_request;
    request.count = 1;
    request.seed = 5;
    ParentInfo parent;
    parent.node_id = "n00000";
    parent.genome = genome;
    parent.children = std::move(children);
    request.parents = {parent};
    absl::StatusOr<std::vector<Proposal>> out = proposer.Propose(request);
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() && !out->empty() ? (*out)[0] : Proposal();
  };
  const Proposal directed = first_child((*seeds)[0].genome, {});
  EXPECT_EQ(directed.genome.ToString(), (*seeds)[1].genome.ToString());
  EXPECT_EQ(directed.mutation, "directed:threads 128->256,unroll 1->2");
  ChildInfo tried;
  tried.mutation = directed.mutation;
  EXPECT_NE(first_child((*seeds)[0].genome, {tried}).mutation, directed.mutation);
  EXPECT_FALSE(absl::StartsWith(first_child((*seeds)[1].genome, {}).mutation, "directed:"));
}

class CudaRecipesBuild : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string nvcc = worker::FindNvcc("");
    if (nvcc.empty()) GTEST_SKIP() << "nvcc not found (set CUDACXX or install /usr/local/cuda)";
    auto sb = sandbox::Sandbox::Create({});
    ASSERT_TRUE(sb.ok()) << sb.status();
    sandbox_ = std::move(*sb);
    const std::string cache =
        (fs::path(Env("KEVO_BIN_DIR", ".")) / ".." / "tests" / "cuda-recipes-build-cache").lexically_normal().string();
    fs::create_directories(cache);
    builder_ = std::make_unique<worker::KernelBuilder>(sandbox_.get(), nvcc, "cuda_recipes_build_test", cache,
                                                       absl::Seconds(600), int64_t{8} << 30, std::vector<std::string>{},
                                                       worker::NvccLayout());
  }

  // `genome` (its recipe's name and params) for `task`: generated, compiled
  // for sm_90a through the backend's path, and without spills; its source
  // ("" once a failure is recorded).
  std::string CompileWithoutSpills(const v1::Task& task, const std::string& genome) {
    auto g = Genome::FromString(genome);
    const Recipe* recipe = g.ok() ? FindRecipe(g->recipe) : nullptr;
    if (recipe == nullptr) {
      ADD_FAILURE() << genome << ": " << (g.ok() ? "no such recipe" : g.status().ToString());
      return "";
    }
    auto candidate = recipe->Generate(task, *g);
    if (!candidate.ok()) {
      ADD_FAILURE() << genome << ": " << candidate.status();
      return "";
    }
    EXPECT_EQ(candidate->language(), "cuda") << genome;
    worker::CudaCompileResult r = worker::CompileCudaCandidate(*builder_, task, *candidate, "sm_90a");
    EXPECT_EQ(r.status, v1::OK) << genome << ": " << r.message << "\n" << candidate->source();
    if (r.status == v1::OK) {  // ptxas's report, from the build or the cache beside it
      EXPECT_GE(r.max_registers, 0) << genome << ": no ptxas report\n" << r.build.compiler_output;
      EXPECT_EQ(r.spill_bytes, 0) << genome;
    }
    return candidate->source();
  }

  std::unique_ptr<sandbox::Sandbox> sandbox_;
  std::unique_ptr<worker::KernelBuilder> builder_;
};

TEST_F(CudaRecipesBuild, FirstGenerationIsCudaAndCompilesWithNvccForHopper) {
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
      worker::CudaCompileResult r = worker::CompileCudaCandidate(*builder_, task, p.candidate, "sm_90a");
      EXPECT_EQ(r.status, v1::OK) << task_name << " " << p.genome.ToString() << ": " << r.message << "\n"
                                  << p.candidate.source();
    }
  }
}

// Stages that would not fit in 227 KB of shared memory are clamped: 128x256
// and 256x128 tiles take 48 KB a stage, 128x128 tiles 32 KB.
TEST(CudaRecipesTest, WgmmaStagesAreClampedToWhatFitsInSharedMemory) {
  const v1::Task task = Load("matmul_bf16");
  const Recipe* recipe = FindRecipe("cuda_gemm_wgmma");
  ASSERT_NE(recipe, nullptr);
  const std::pair<std::string, std::string> cases[] = {
      {"cluster=2,epilogue=registers,schedule=persistent,tile=128x256,stages=6", "constexpr int kStages = 4;"},
      {"cluster=1,epilogue=registers,schedule=tiles,tile=256x128,stages=5", "constexpr int kStages = 4;"},
      {"cluster=2,epilogue=tma,schedule=tiles,tile=128x256,stages=3", "constexpr int kStages = 3;"},
      {"cluster=1,epilogue=registers,schedule=persistent,tile=128x128,stages=6", "constexpr int kStages = 6;"},
  };
  for (const auto& [params, want] : cases) {
    auto genome = Genome::FromString(absl::StrCat("cuda_gemm_wgmma{", params, "}"));
    ASSERT_TRUE(genome.ok()) << genome.status();
    auto candidate = recipe->Generate(task, *genome);
    ASSERT_TRUE(candidate.ok()) << candidate.status();
    EXPECT_NE(candidate->source().find(want), std::string::npos) << params;
    // The schedule and the cluster reach the kernel's constants.
    const bool clustered = params.find("cluster=2") != std::string::npos;
    const bool persistent = params.find("schedule=persistent") != std::string::npos;
    EXPECT_NE(candidate->source().find(clustered ? "constexpr int kCluster = 2;" : "constexpr int kCluster = 1;"),
              std::string::npos)
        << params;
    EXPECT_NE(candidate->source().find(persistent ? "constexpr bool kPersistent = true;"
                                                  : "constexpr bool kPersistent = false;"),
              std::string::npos)
        << params;
  }
  // C's buffer (epilogue tma) takes the widest whole boxes of the tile's
  // columns that fit beside the stages, dropping a stage only where none fits.
  const std::tuple<std::string, int, int> buffers[] = {
      {"tile=128x256,stages=4", 4, 128},  // 192 KB of stages leave 34 KB: 2 x 64 rows x 128 bf16 columns
      {"tile=256x128,stages=4", 4, 64},   // the same 34 KB over 2 x 128 rows
      {"tile=128x128,stages=6", 6, 128},
      {"tile=128x256,stages=2", 2, 256},
  };
  for (const auto& [params, stages, cols] : buffers) {
    auto genome =
        Genome::FromString(absl::StrCat("cuda_gemm_wgmma{cluster=1,epilogue=tma,schedule=persistent,", params, "}"));
    ASSERT_TRUE(genome.ok()) << genome.status();
    auto candidate = recipe->Generate(task, *genome);
    ASSERT_TRUE(candidate.ok()) << candidate.status();
    EXPECT_NE(candidate->source().find(absl::StrCat("constexpr int kStages = ", stages, ";")), std::string::npos)
        << params;
    EXPECT_NE(candidate->source().find(absl::StrCat("constexpr int kEpiCols = ", cols, ";")), std::string::npos)
        << params;
    EXPECT_NE(candidate->source().find("constexpr bool kTmaStore = true;"), std::string::npos) << params;
  }
  // Not a gemm on nvidia: the recipe refuses it.
  auto other = recipe->Generate(Load("softmax"), Genome{"cuda_gemm_wgmma", recipe->space().Defaults()});
  EXPECT_EQ(other.status().code(), absl::StatusCode::kFailedPrecondition);
}

// The wgmma recipe's two-m64-per-consumer tiles (256x128; the default
// 128x256 compiles above) and mma.sync's best measured point (no longer the
// first seed) compile for sm_90a through the backend's path, import only
// allowed symbols (the driver's tensor-map encoder comes through
// cudaGetDriverEntryPointByVersion) and spill no registers.
TEST_F(CudaRecipesBuild, GemmRecipePointsCompileForHopperWithoutSpills) {
  const v1::Task task = Load("matmul_bf16");
  for (const char* text : {"cuda_gemm_wgmma{cluster=1,epilogue=registers,schedule=tiles,stages=3,tile=256x128}",
                           "cuda_gemm_wgmma{cluster=2,epilogue=tma,schedule=persistent,stages=4,tile=256x128}",
                           "cuda_gemm_mma{stages=2,tile=128x128,tile_k=64,warp_tile=64x32}"}) {
    auto genome = Genome::FromString(text);
    ASSERT_TRUE(genome.ok()) << genome.status();
    const Recipe* recipe = FindRecipe(genome->recipe);
    ASSERT_NE(recipe, nullptr) << text;
    auto candidate = recipe->Generate(task, *genome);
    ASSERT_TRUE(candidate.ok()) << candidate.status();
    worker::CudaCompileResult r = worker::CompileCudaCandidate(*builder_, task, *candidate, "sm_90a");
    ASSERT_EQ(r.status, v1::OK) << text << ": " << r.message;
    if (genome->recipe == "cuda_gemm_wgmma") {
      EXPECT_NE(std::find(r.imports.begin(), r.imports.end(), "cudaGetDriverEntryPointByVersion"), r.imports.end())
          << text;
    }
    EXPECT_GE(r.max_registers, 0) << text << ": no ptxas report";  // kept beside a cached build
    EXPECT_EQ(r.spill_bytes, 0) << text;
  }
}

// The KernelBench bridge's reduction along a middle dim (no native task has
// its shape; the bridge makes one per graph node): every op, and the genome's
// corners, compile for sm_90a without spills.
v1::Task ColReduceTask(const std::string& op) {
  v1::Task t;
  t.set_name(absl::StrCat("col_reduce_", op));
  t.mutable_signature()->set_function("kevo_col_reduce_entry");
  for (const char* p : {"x", "y", "outer", "len", "inner"}) t.mutable_signature()->add_params(p);
  v1::TensorSpec* x = t.add_inputs();
  x->set_name("x");
  x->set_dtype(v1::F32);
  for (const char* d : {"outer", "len", "inner"}) x->add_shape(d);
  v1::TensorSpec* y = t.add_outputs();
  y->set_name("y");
  y->set_dtype(v1::F32);
  for (const char* d : {"outer", "inner"}) y->add_shape(d);
  (*t.mutable_hints())["pattern"] = "col_reduce";
  (*t.mutable_hints())["op"] = op;
  return t;
}

TEST_F(CudaRecipesBuild, ColumnReductionsCompileForHopperWithoutSpills) {
  const Recipe* recipe = FindRecipe("cuda_col_reduce");
  ASSERT_NE(recipe, nullptr);
  EXPECT_FALSE(recipe->Applies(ColReduceTask("prod"), "nvidia"));
  EXPECT_FALSE(recipe->Applies(ColReduceTask("sum"), "cpu"));
  const std::pair<const char*, const char*> cases[] = {
      {"sum", "threads=256,unroll=4"}, {"mean", "threads=512,unroll=8"},   {"max", "threads=128,unroll=1"},
      {"min", "threads=256,unroll=8"}, {"argmax", "threads=256,unroll=4"}, {"argmin", "threads=512,unroll=1"}};
  for (const auto& [op, params] : cases) {
    v1::Task task = ColReduceTask(op);
    if (absl::StartsWith(op, "arg")) {
      EXPECT_FALSE(recipe->Applies(task, "nvidia")) << op << " with float32 indices";
      task.mutable_outputs(0)->set_dtype(v1::I64);
    }
    ASSERT_TRUE(recipe->Applies(task, "nvidia")) << op;
    CompileWithoutSpills(task, absl::StrCat("cuda_col_reduce{", params, "}"));
  }
  // x over the root mean square of its column (KernelBench 36): y has x's
  // shape, and the recipe refuses a reduced y or an eps that is no number.
  v1::Task rms = ColReduceTask("rms_norm");
  (*rms.mutable_hints())["eps"] = "1e-05";
  EXPECT_FALSE(recipe->Applies(rms, "nvidia")) << "a reduced y";
  rms.mutable_outputs(0)->clear_shape();
  for (const char* d : {"outer", "len", "inner"}) rms.mutable_outputs(0)->add_shape(d);
  ASSERT_TRUE(recipe->Applies(rms, "nvidia"));
  for (const char* params : {"threads=128,unroll=1", "threads=512,unroll=8"}) {
    const std::string source = CompileWithoutSpills(rms, absl::StrCat("cuda_col_reduce{", params, "}"));
    EXPECT_THAT(source, HasSubstr("static_cast<float>(1.0000000000000001e-05)")) << "eps as PyTorch adds it";
    EXPECT_THAT(source, HasSubstr("/ root;")) << "divided, as PyTorch divides";
    // Columns of up to 64 values held in registers (x read once); longer
    // ones read twice.
    EXPECT_THAT(source, HasSubstr("<= 64) {\n    kevo_col_rms_cached<64><<<kevo_grid, kThreads>>>(")) << params;
    EXPECT_THAT(source, HasSubstr("} else {\n    kevo_col_reduce<<<kevo_grid, kThreads>>>(")) << params;
  }
  (*rms.mutable_hints())["eps"] = "tiny";
  EXPECT_FALSE(recipe->Applies(rms, "nvidia")) << "an eps that is no number";
  (*rms.mutable_hints())["eps"] = "inf";
  EXPECT_FALSE(recipe->Applies(rms, "nvidia")) << "an eps that is not finite";
}

// The bridge's scans (KernelBench 89-93): cumsum and cumprod, reverse,
// exclusive and masked, at the genome's corners, compile for sm_90a without
// spills; the recipe refuses an exclusive product and a mask that is not u8.
v1::Task RowScanTask(const std::string& op, bool reverse, bool exclusive, bool masked) {
  v1::Task t;
  t.set_name("row_scan");
  t.mutable_signature()->set_function("kevo_row_scan_entry");
  std::vector<std::string> tensors = {"x"};
  if (masked) tensors.push_back("mask");
  for (const std::string& p : tensors) t.mutable_signature()->add_params(p);
  for (const char* p : {"y", "rows", "cols"}) t.mutable_signature()->add_params(p);
  for (const std::string& name : tensors) {
    v1::TensorSpec* in = t.add_inputs();
    in->set_name(name);
    in->set_dtype(name == "mask" ? v1::U8 : v1::F32);
    for (const char* d : {"rows", "cols"}) in->add_shape(d);
  }
  v1::TensorSpec* y = t.add_outputs();
  y->set_name("y");
  y->set_dtype(v1::F32);
  for (const char* d : {"rows", "cols"}) y->add_shape(d);
  auto& h = *t.mutable_hints();
  h["pattern"] = "row_scan";
  h["in"] = "x";
  h["out"] = "y";
  h["op"] = op;
  h["reverse"] = reverse ? "1" : "0";
  h["exclusive"] = exclusive ? "1" : "0";
  if (masked) h["mask"] = "mask";
  return t;
}

TEST_F(CudaRecipesBuild, RowScansCompileForHopperWithoutSpills) {
  const Recipe* recipe = FindRecipe("cuda_row_scan");
  ASSERT_NE(recipe, nullptr);
  EXPECT_FALSE(recipe->Applies(RowScanTask("prod", false, true, false), "nvidia")) << "an exclusive product";
  v1::Task f32_mask = RowScanTask("sum", false, false, true);
  f32_mask.mutable_inputs(1)->set_dtype(v1::F32);
  EXPECT_FALSE(recipe->Applies(f32_mask, "nvidia")) << "a float mask";
  EXPECT_FALSE(recipe->Applies(RowScanTask("sum", false, false, false), "cpu"));
  const struct {
    v1::Task task;
    const char* params;
  } cases[] = {{RowScanTask("sum", false, false, false), "items=4,threads=512"},
               {RowScanTask("prod", false, false, false), "items=8,threads=1024"},
               {RowScanTask("sum", true, false, false), "items=2,threads=128"},
               {RowScanTask("sum", false, true, false), "items=8,threads=256"},
               {RowScanTask("sum", false, false, true), "items=4,threads=1024"}};
  for (const auto& [task, params] : cases) {
    const std::string what = absl::StrCat(task.hints().at("op"), " reverse ", task.hints().at("reverse"), " exclusive ",
                                          task.hints().at("exclusive"), " ", params);
    ASSERT_TRUE(recipe->Applies(task, "nvidia")) << what;
    const std::string source = CompileWithoutSpills(task, absl::StrCat("cuda_row_scan{", params, "}"));
    // The next tile is loaded between the barrier and the scan.
    EXPECT_THAT(source, HasSubstr("__syncthreads();\n    if (base + kTile < n) load(base + kTile);")) << what;
  }
}

// The bridge's losses (KernelBench 94, 96, 98): the sum of a two-input term
// (an immediately called lambda, as the bridge writes losses) and of one
// input, at the genome's corners (float4 loads or single floats), compile
// for sm_90a without spills; the
// kernel keeps its partials and counter in device globals (no atomics on
// the sum: deterministic).
v1::Task MapReduceTask(int inputs, const std::string& expr) {
  v1::Task t;
  t.set_name("map_reduce");
  t.mutable_signature()->set_function("kevo_map_reduce_entry");
  for (int k = 0; k < inputs; ++k) {
    const std::string name = absl::StrCat("x", k);
    t.mutable_signature()->add_params(name);
    v1::TensorSpec* in = t.add_inputs();
    in->set_name(name);
    in->set_dtype(v1::F32);
    in->add_shape("n");
  }
  for (const char* p : {"y", "n"}) t.mutable_signature()->add_params(p);
  v1::TensorSpec* y = t.add_outputs();
  y->set_name("y");
  y->set_dtype(v1::F32);
  y->add_shape("1");
  (*t.mutable_hints())["pattern"] = "map_reduce";
  (*t.mutable_hints())["expr"] = expr;
  return t;
}

// The same, divided by n (the mse_loss task's mean).
v1::Task MeanTask(v1::Task t) {
  (*t.mutable_hints())["divide"] = "n";
  return t;
}

// The same with input `k` broadcast: [m], read at i % m (the bridge's
// HingeLoss targets).
v1::Task BroadcastTask(v1::Task t, int k) {
  t.mutable_inputs(k)->set_shape(0, "m");
  t.mutable_signature()->add_params("m");
  return t;
}

TEST_F(CudaRecipesBuild, MapReduceCompilesForHopperWithoutSpills) {
  const Recipe* recipe = FindRecipe("cuda_map_reduce");
  ASSERT_NE(recipe, nullptr);
  EXPECT_FALSE(recipe->Applies(MapReduceTask(1, ""), "nvidia")) << "no term";
  EXPECT_FALSE(recipe->Applies(MapReduceTask(1, "x0"), "cpu"));
  const std::pair<v1::Task, const char*> cases[] = {
      {MapReduceTask(2,
                     "([](float in, float t) { return (t == 0.0f ? 0.0f : t * logf(t)) - t * in; })((logf(x0)), x1)"),
       "threads=1024,unroll=8,vec=4"},
      {MapReduceTask(1, "x0"), "threads=256,unroll=1,vec=1"},
      {MeanTask(MapReduceTask(2, "(x0 - x1) * (x0 - x1)")), "threads=512,unroll=4,vec=4"},
      {MeanTask(BroadcastTask(MapReduceTask(2, "fmaxf((1.0f) - ((x0) * (x1)), 0.0f)"), 1)),
       "threads=512,unroll=8,vec=4"},
      {BroadcastTask(MapReduceTask(2, "x0 * x1"), 0), "threads=256,unroll=1,vec=1"}};
  // Two broadcast lengths are not one m.
  v1::Task two = BroadcastTask(MapReduceTask(2, "x0 * x1"), 0);
  two.mutable_inputs(1)->set_shape(0, "m2");
  two.mutable_signature()->add_params("m2");
  EXPECT_FALSE(recipe->Applies(two, "nvidia"));
  for (const auto& [task, params] : cases) {
    ASSERT_TRUE(recipe->Applies(task, "nvidia")) << params;
    const std::string source = CompileWithoutSpills(task, absl::StrCat("cuda_map_reduce{", params, "}"));
    EXPECT_THAT(source, HasSubstr("if (GridSum(")) << "the sum through per-block partials, added in block order";
    EXPECT_FALSE(absl::StrContains(source, "atomicAdd(y")) << "the sum itself is never atomic";
    EXPECT_EQ(absl::StrContains(source, "reinterpret_cast<const float4*>"), absl::StrContains(params, "vec=4"))
        << "float4 loads exactly when vec=4: " << params;
    // unroll counts float4s (as registers allow), not floats.
    EXPECT_THAT(source, HasSubstr("constexpr int kVecUnroll = kUnroll < kFit ? kUnroll : kFit;")) << params;
    EXPECT_THAT(source, HasSubstr(task.hints().count("divide") ? ", static_cast<double>(n));" : ", 1.0);"))
        << "the divisor the sum is divided by: " << params;
    // A broadcast input is read at i % m, its float4s at a float4 index % m / 4.
    const bool broadcast = std::any_of(task.inputs().begin(), task.inputs().end(),
                                       [](const v1::TensorSpec& in) { return in.shape(0) == "m"; });
    EXPECT_EQ(absl::StrContains(source, "Wrap(i, m)"), broadcast) << params;
    EXPECT_EQ(absl::StrContains(source, "Wrap(j + u * stride, m / 4)"), broadcast && absl::StrContains(params, "vec=4"))
        << params;
  }
}

// Softmax cross-entropy (the cross_entropy task; KernelBench 95 through the
// bridge): the genome's corners, a warp or a block a row, compile for sm_90a
// without spills; the rows' losses are summed through per-block partials,
// never atomically.
TEST_F(CudaRecipesBuild, CrossEntropyCompilesForHopperWithoutSpills) {
  const Recipe* recipe = FindRecipe("cuda_row_cross_entropy");
  ASSERT_NE(recipe, nullptr);
  v1::Task task = Load("cross_entropy");
  ASSERT_TRUE(recipe->Applies(task, "nvidia"));
  EXPECT_FALSE(recipe->Applies(task, "cpu"));
  for (const char* params : {"mapping=block,threads=128,vec=1", "mapping=block,threads=1024,vec=4",
                             "mapping=warp,threads=128,vec=1", "mapping=warp,threads=256,vec=4"}) {
    const std::string source = CompileWithoutSpills(task, absl::StrCat("cuda_row_cross_entropy{", params, "}"));
    // A warp a row, or a block.
    EXPECT_EQ(absl::StrContains(source, "constexpr bool kWarpRows = true;"), absl::StrContains(params, "mapping=warp"))
        << params;
    EXPECT_THAT(source, HasSubstr("if (GridSum(")) << "the sum through per-block partials, added in block order";
    EXPECT_FALSE(absl::StrContains(source, "atomicAdd(y")) << "the sum itself is never atomic";
    EXPECT_EQ(absl::StrContains(source, "reinterpret_cast<const float4*>"), absl::StrContains(params, "vec=4"))
        << params;
    // Four float4s in flight a thread, merged as one chunk.
    EXPECT_EQ(absl::StrContains(source, "float4 v[kLoads];"), absl::StrContains(params, "vec=4")) << params;
  }
}

// The bridge's pools (KernelBench 41-46): max with dilation, average with
// and without the padding in its count, compile for sm_90a without spills;
// the recipe refuses padding past half the kernel (PyTorch's rule).
v1::Task PoolTask(const std::string& op, const std::string& kernel, const std::string& stride,
                  const std::string& padding, const std::string& dilation, const std::string& include_pad) {
  v1::Task t;
  t.set_name("pool");
  t.mutable_signature()->set_function("kevo_pool_entry");
  for (const char* p : {"x", "y", "planes", "d", "h", "w", "od", "oh", "ow"}) t.mutable_signature()->add_params(p);
  v1::TensorSpec* x = t.add_inputs();
  x->set_name("x");
  x->set_dtype(v1::F32);
  for (const char* d : {"planes", "d", "h", "w"}) x->add_shape(d);
  v1::TensorSpec* y = t.add_outputs();
  y->set_name("y");
  y->set_dtype(v1::F32);
  for (const char* d : {"planes", "od", "oh", "ow"}) y->add_shape(d);
  auto& h = *t.mutable_hints();
  h["pattern"] = "pool";
  h["op"] = op;
  h["kernel"] = kernel;
  h["stride"] = stride;
  h["padding"] = padding;
  h["dilation"] = dilation;
  h["include_pad"] = include_pad;
  return t;
}

TEST_F(CudaRecipesBuild, PoolsCompileForHopperWithoutSpills) {
  const Recipe* recipe = FindRecipe("cuda_pool");
  ASSERT_NE(recipe, nullptr);
  EXPECT_FALSE(recipe->Applies(PoolTask("max", "1,1,4", "1,1,1", "0,0,3", "1,1,1", "1"), "nvidia"))
      << "padding past half the kernel";
  EXPECT_FALSE(recipe->Applies(PoolTask("max", "1,4", "1,1", "0,1", "1,1", "1"), "nvidia")) << "two dims given";
  EXPECT_FALSE(recipe->Applies(PoolTask("avg", "1,1,4", "1,1,1", "0,0,1", "1,1,1", "1"), "cpu"));
  struct Case {
    v1::Task task;
    const char* params;
    int items;    // outputs a thread takes
    bool shared;  // the windows read from a block's tile in shared memory
  };
  // A thread takes 4 outputs where their windows overlap enough (KernelBench
  // 42's 4x4 stride-1 max, 44's 8-tap stride-1 average read from registers,
  // the 3-tap stride-2 average), one where they do not (11x11 stride 11;
  // dilation 3 at stride 2). 1-D pools whose windows overlap (44; 41's 8 taps
  // 3 apart) read a tile in shared memory unless told otherwise (4 taps at
  // stride 4 do not); a 2-D one when told.
  const Case cases[] = {
      {PoolTask("max", "3,3,3", "2,2,2", "1,1,1", "3,3,3", "1"), "load=auto,threads=128", 1, false},
      {PoolTask("avg", "1,11,11", "1,11,11", "0,0,0", "1,1,1", "1"), "load=auto,threads=512", 1, false},
      {PoolTask("avg", "3,3,3", "2,2,2", "1,1,1", "1,1,1", "0"), "load=auto,threads=256", 4, false},
      {PoolTask("max", "1,4,4", "1,1,1", "0,1,1", "1,1,1", "1"), "load=auto,threads=256", 4, false},
      {PoolTask("avg", "1,1,8", "1,1,1", "0,0,4", "1,1,1", "1"), "load=registers,threads=512", 4, false},
      {PoolTask("avg", "1,1,8", "1,1,1", "0,0,4", "1,1,1", "1"), "load=auto,threads=512", 4, true},
      {PoolTask("max", "1,1,8", "1,1,1", "0,0,4", "1,1,3", "1"), "load=auto,threads=256", 4, true},
      {PoolTask("avg", "1,1,5", "1,1,2", "0,0,2", "1,1,1", "0"), "load=auto,threads=128", 4, true},
      {PoolTask("max", "1,1,4", "1,1,4", "0,0,0", "1,1,1", "1"), "load=auto,threads=256", 1, false},
      {PoolTask("max", "1,4,4", "1,1,1", "0,1,1", "1,1,1", "1"), "load=shared,threads=256", 4, true}};
  for (const Case& c : cases) {
    ASSERT_TRUE(recipe->Applies(c.task, "nvidia")) << c.task.hints().at("op") << " " << c.params;
    const std::string source = CompileWithoutSpills(c.task, absl::StrCat("cuda_pool{", c.params, "}"));
    // A row's position found in 32 bits where every size fits (an int64_t
    // division per output made the 2-D pool slower than torch.compile).
    EXPECT_THAT(source, HasSubstr("if (kevo_widest < (int64_t{1} << 31)) {\n    kevo_pool<uint32_t><<<")) << c.params;
    EXPECT_THAT(source, HasSubstr("kevo_pool<int64_t><<<")) << c.params;
    EXPECT_THAT(source, HasSubstr(absl::StrCat("constexpr int kItems = ", c.items, ";"))) << c.params;
    EXPECT_EQ(source.find("float v[kSpan];") != std::string::npos, c.items > 1 && !c.shared) << c.params;
    EXPECT_EQ(source.find("__shared__ float tile[kTileSpan];") != std::string::npos, c.shared) << c.params;
  }
}

// Layer norm over a few long rows (KernelBench 40: 16 rows of 4M values) is
// split across blocks in two launches, the partial sums added in double in
// chunk order; every genome carries the path and compiles without spills.
TEST_F(CudaRecipesBuild, LayerNormSplitsFewLongRowsAcrossBlocks) {
  const v1::Task task = Load("layer_norm");
  for (const char* params :
       {"cache=reread,mapping=block,vec=4,warps=8", "cache=registers,mapping=warp,vec=1,warps=1"}) {
    const std::string source = CompileWithoutSpills(task, absl::StrCat("cuda_layer_norm{", params, "}"));
    EXPECT_THAT(source, HasSubstr("if (rows < kevo_grid_blocks(1) && nv >= 8192) {")) << params;
    EXPECT_THAT(source, HasSubstr("kevo_ln_sums<kVec><<<split_grid, kThreads>>>(x, cols, chunk);")) << params;
    EXPECT_THAT(source, HasSubstr("kevo_ln_apply<kVec><<<split_grid, kThreads>>>(x, gamma, beta, y, cols, chunk);"))
        << params;
    EXPECT_THAT(source, HasSubstr("double s1 = 0, s2 = 0;\n  for (unsigned i = 0; i < gridDim.x; ++i) {")) << params;
  }
}

// The bridge's row norm and divide (KernelBench's L1Norm and L2Norm): both
// norms, rows in registers and streamed, compile for sm_90a without spills.
TEST_F(CudaRecipesBuild, RowScaleCompilesForHopperWithoutSpills) {
  const Recipe* recipe = FindRecipe("cuda_row_scale");
  ASSERT_NE(recipe, nullptr);
  v1::Task task = Load("softmax");  // rows x cols in, the same out
  (*task.mutable_hints())["pattern"] = "row_scale";
  EXPECT_FALSE(recipe->Applies(task, "nvidia")) << "no norm hint";
  (*task.mutable_hints())["norm"] = "l3";
  EXPECT_FALSE(recipe->Applies(task, "nvidia")) << "an unknown norm";
  for (const char* norm : {"l2", "l1_mean"}) {
    (*task.mutable_hints())["norm"] = norm;
    ASSERT_TRUE(recipe->Applies(task, "nvidia")) << norm;
    EXPECT_FALSE(recipe->Applies(task, "cpu"));
    for (const char* params :
         {"cache=registers,mapping=warp,vec=4,warps=4", "cache=reread,mapping=block,vec=1,warps=8"}) {
      const std::string source = CompileWithoutSpills(task, absl::StrCat("cuda_row_scale{", params, "}"));
      EXPECT_THAT(source, HasSubstr(std::string(norm) == "l2" ? "sqrtf(" : "fabsf(")) << norm;
      // Streamed rows of any length go as float4s from their first 16-byte
      // boundary (KernelBench's 65535-value rows were read a float at a time).
      EXPECT_THAT(source, HasSubstr("const int64_t head = ax % 16 == ay % 16 && skip < cols ? skip : cols;")) << params;
      EXPECT_THAT(source, HasSubstr("v[u] = c < n4 ? __ldg(x4 + c) : make_float4(")) << params;
      // The reciprocal of the whole norm: 1 / (sum / cols), not 1 / sum / cols
      // (the mean's streamed rows came out cols^2 too small on an H100).
      EXPECT_THAT(source, HasSubstr(std::string(norm) == "l2"
                                        ? "const float inv = 1.0f / (sqrtf(GroupSum(s, smem)));"
                                        : "const float inv = 1.0f / (GroupSum(s, smem) / static_cast<float>(cols));"))
          << params;
    }
  }
}

}  // namespace
}  // namespace kevo::proposer
