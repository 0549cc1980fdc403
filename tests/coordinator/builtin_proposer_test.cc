// Tests for the built-in recipe proposer (coordinator/proposer/builtin): the
// genome text form, the proposer's seeds, mutations and crossovers, the
// generic mutator's source edits, and — most important — that every recipe's
// default genome, genomes covering every value of every parameter, and a
// random genome compile and match each starter task's reference on all of
// the task's validation bindings (every other task with hints: the first
// generation's genomes and a random one).
#include "coordinator/proposer/builtin/builtin_proposer.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <unordered_set>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "common/task/task_loader.h"
#include "coordinator/proposer/builtin/codegen.h"
#include "coordinator/proposer/builtin/generic_source.h"
#include "coordinator/proposer/builtin/recipe.h"
#include "tests/coordinator/kernel_harness.h"

namespace kevo::proposer {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::UnorderedElementsAre;
using ::testing::UnorderedElementsAreArray;

std::string SourceDir() {
  const char* dir = std::getenv("KEVO_SOURCE_DIR");
  return dir != nullptr && *dir ? dir : ".";
}

// A starter task as committed (with its hints).
v1::Task LoadStarterTask(const std::string& name) {
  absl::StatusOr<v1::Task> task = task::LoadTaskDir(absl::StrCat(SourceDir(), "/tasks/", name));
  EXPECT_TRUE(task.ok()) << task.status();
  if (!task.ok()) return v1::Task();
  return *task;
}

std::vector<std::string> RecipeNames(const std::vector<const Recipe*>& recipes) {
  std::vector<std::string> out;
  for (const Recipe* r : recipes) out.push_back(r->name());
  return out;
}

// Parameters whose values differ between two genomes of one recipe.
std::vector<std::string> ChangedParams(const Genome& a, const Genome& b) {
  std::vector<std::string> out;
  for (const auto& [k, v] : a.params) {
    auto it = b.params.find(k);
    if (it == b.params.end() || it->second != v) out.push_back(k);
  }
  return out;
}

// ------------------------------------------------------------------ Genome

TEST(GenomeTest, RoundTripsThroughTextSortedByKey) {
  Genome g{"gemm_packed", {{"mr", "8"}, {"kc", "256"}, {"flags", "-O3,x=1{}%"}}};
  const std::string text = g.ToString();
  EXPECT_EQ(text.rfind("gemm_packed{flags=", 0), 0u) << text;
  EXPECT_THAT(text, HasSubstr(",kc=256,mr=8}"));
  absl::StatusOr<Genome> back = Genome::FromString(text);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->recipe, g.recipe);
  EXPECT_EQ(back->params, g.params);
  absl::StatusOr<Genome> empty = Genome::FromString("generic{}");
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(empty->recipe, "generic");
  EXPECT_THAT(empty->params, IsEmpty());
}

TEST(GenomeTest, RejectsMalformedTextAsInvalidArgument) {
  for (const std::string bad :
       {"", "gemm", "gemm{", "{mr=8}", "gemm{mr}", "gemm{mr=8,}", "gemm{mr=8,mr=16}", "gemm{mr=8}x", "gemm{mr=%G1}"}) {
    absl::StatusOr<Genome> g = Genome::FromString(bad);
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument) << "'" << bad << "'";
  }
}

// ------------------------------------------------------------- SearchSpace

TEST(SearchSpaceTest, CheckNamesMissingUnknownAndDisallowedParameters) {
  SearchSpace space({{"a", {"1", "2"}, "1", ""}, {"b", {"x", "y"}, "y", ""}});
  EXPECT_TRUE(space.Check(space.Defaults()).ok());
  EXPECT_EQ(space.Size(), 4u);
  absl::Status missing = space.Check({{"a", "1"}});
  EXPECT_EQ(missing.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(missing.message()), HasSubstr("'b'"));
  absl::Status bad = space.Check({{"a", "3"}, {"b", "x"}});
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.message()), HasSubstr("'a'"));
  EXPECT_EQ(space.Check({{"a", "1"}, {"b", "x"}, {"c", "0"}}).code(), absl::StatusCode::kInvalidArgument);
}

TEST(RecipeTest, EveryRecipeDeclaresAValidSpaceWithDefaults) {
  std::set<std::string> names;
  for (const auto& r : AllRecipes()) {
    EXPECT_TRUE(names.insert(r->name()).second) << "duplicate recipe " << r->name();
    EXPECT_THAT(r->space().params(), Not(IsEmpty())) << r->name();
    EXPECT_TRUE(r->space().Check(r->space().Defaults()).ok()) << r->name();
    EXPECT_EQ(FindRecipe(r->name()), r.get());
  }
  EXPECT_EQ(FindRecipe("no_such_recipe"), nullptr);
}

TEST(RecipeTest, GenerateRejectsGenomesOutsideTheSpaceAndTasksItDoesNotFit) {
  const v1::Task softmax = LoadStarterTask("softmax");
  const v1::Task matmul = LoadStarterTask("matmul");
  const Recipe* recipe = FindRecipe("softmax_online");
  ASSERT_NE(recipe, nullptr);
  Genome g{recipe->name(), recipe->space().Defaults()};
  ASSERT_TRUE(recipe->Generate(softmax, g).ok());
  g.params["accumulators"] = "3";
  EXPECT_EQ(recipe->Generate(softmax, g).status().code(), absl::StatusCode::kInvalidArgument);
  Genome other{"softmax_three_pass", FindRecipe("softmax_three_pass")->space().Defaults()};
  EXPECT_EQ(recipe->Generate(softmax, other).status().code(), absl::StatusCode::kInvalidArgument);
  Genome defaults{recipe->name(), recipe->space().Defaults()};
  EXPECT_EQ(recipe->Generate(matmul, defaults).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(RecipeTest, StarterTasksGetTheirPatternRecipesAndTheGenericMutator) {
  const std::map<std::string, std::vector<std::string>> want = {
      {"vector_add", {"elementwise", "generic"}},
      {"softmax", {"softmax_three_pass", "softmax_online", "generic"}},
      {"row_sum", {"row_reduce", "generic"}},
      {"matmul", {"gemm_packed", "generic"}},
      {"matvec", {"gemv_rows", "generic"}},
      {"matmul_bias_gelu", {"gemm_tiles", "gemm_packed_ex", "generic"}},
      {"matmul_at", {"gemm_tiles", "gemm_packed_ex", "generic"}},
      {"bucketize", {"bucketize_tree", "bucketize_search", "bucketize_lut", "generic"}},
  };
  // On nvidia only the CUDA recipes (cuda_*.cc) apply; matmul is f32, and the
  // tensor-core GEMM recipe wants bf16 or fp16.
  const std::map<std::string, std::vector<std::string>> want_nvidia = {
      {"vector_add", {"cuda_elementwise"}},
      {"softmax", {"cuda_softmax"}},
      {"row_sum", {"cuda_row_reduce"}},
      {"matmul", {}},
      {"matvec", {}},
      {"matmul_bias_gelu", {}},
      {"matmul_at", {}},
      {"bucketize", {}},
  };
  for (const auto& [name, recipes] : want) {
    const v1::Task task = LoadStarterTask(name);
    EXPECT_THAT(RecipeNames(BuiltinProposer::ApplicableRecipes(task, "cpu")), UnorderedElementsAreArray(recipes))
        << name;
    EXPECT_THAT(RecipeNames(BuiltinProposer::ApplicableRecipes(task, "nvidia")),
                UnorderedElementsAreArray(want_nvidia.at(name)))
        << name;
  }
}

// The tasks where PyTorch led on the cpu get their own recipes (log_softmax
// had only the generic mutator, matmul_bf16 too, conv2d only the direct
// recipe); conv2d's register-tiled direct recipe, then its im2col one, and
// the matmul_ex tasks' packed GEMM seed first.
TEST(RecipeTest, LogSoftmaxBf16GemmNormsAndConv2dGetTheirRecipes) {
  EXPECT_THAT(RecipeNames(BuiltinProposer::ApplicableRecipes(LoadStarterTask("log_softmax"), "cpu")),
              ::testing::IsSupersetOf({"log_softmax_two_pass", "log_softmax_online"}));
  EXPECT_THAT(RecipeNames(BuiltinProposer::ApplicableRecipes(LoadStarterTask("matmul_bf16"), "cpu")),
              ::testing::IsSupersetOf({"gemm_packed", "gemm_bf16_dot"}));
  // layer_norm and rms_norm had only the generic mutator (layer_norm 0.44x of
  // F.layer_norm at 2 threads), and cross_entropy too.
  for (const char* name : {"layer_norm", "rms_norm"}) {
    EXPECT_THAT(RecipeNames(BuiltinProposer::ApplicableRecipes(LoadStarterTask(name), "cpu")),
                ::testing::Contains("row_norm"))
        << name;
  }
  // cross_entropy too (0.19x of F.cross_entropy at 2 threads with the generic mutator).
  EXPECT_THAT(RecipeNames(BuiltinProposer::ApplicableRecipes(LoadStarterTask("cross_entropy"), "cpu")),
              ::testing::Contains("row_cross_entropy"));
  const std::vector<std::string> conv =
      RecipeNames(BuiltinProposer::ApplicableRecipes(LoadStarterTask("conv2d"), "cpu"));
  ASSERT_GE(conv.size(), 3u);
  EXPECT_EQ(conv[0], "conv2d_direct");
  EXPECT_EQ(conv[1], "conv2d_im2col");
  EXPECT_EQ(conv[2], "conv2d_rows");
  // The transposed and fused GEMMs seed the packed GEMM first (matmul_at
  // 0.61x of sgemm in a budget-3 suite job that never reached it).
  for (const char* name : {"matmul_at", "matmul_bt", "matmul_bias_gelu"}) {
    const std::vector<std::string> gemm = RecipeNames(BuiltinProposer::ApplicableRecipes(LoadStarterTask(name), "cpu"));
    ASSERT_GE(gemm.size(), 2u) << name;
    EXPECT_EQ(gemm[0], "gemm_packed_ex") << name;
  }
}

TEST(RecipeTest, HintsBindToTheTasksOwnNames) {
  // vector_add with its tensors renamed: the recipe follows the hints.
  v1::Task task = LoadStarterTask("vector_add");
  task.mutable_inputs(0)->set_name("lhs");
  task.mutable_inputs(1)->set_name("rhs");
  task.mutable_outputs(0)->set_name("sum");
  task.mutable_signature()->clear_params();
  for (const char* p : {"lhs", "rhs", "sum", "n"}) task.mutable_signature()->add_params(p);
  (*task.mutable_hints())["expr"] = "lhs + rhs";
  (*task.mutable_hints())["out"] = "sum";
  const Recipe* recipe = FindRecipe("elementwise");
  EXPECT_TRUE(recipe->Applies(task, "cpu"));
  absl::StatusOr<v1::Candidate> c = recipe->Generate(task, Genome{recipe->name(), recipe->space().Defaults()});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(c->source(), HasSubstr("return (float)(lhs + rhs);"));
  // Function calls and double literals (for float) take the omp simd path,
  // which compiles where float vector types would not.
  for (const char* expr : {"lhs * 2.0 + rhs", "lhs + fabsf(rhs)"}) {
    (*task.mutable_hints())["expr"] = expr;
    absl::StatusOr<v1::Candidate> simd = recipe->Generate(task, Genome{recipe->name(), recipe->space().Defaults()});
    ASSERT_TRUE(simd.ok()) << simd.status();
    EXPECT_THAT(simd->source(), HasSubstr("#pragma omp simd")) << expr;
    EXPECT_THAT(simd->source(), Not(HasSubstr("kevo_vop"))) << expr;
  }
  // An expression naming a tensor the task lacks does not apply.
  (*task.mutable_hints())["expr"] = "x + y";
  EXPECT_FALSE(recipe->Applies(task, "cpu"));
}

// elu's expm1f through glibc's libmvec: with vector_math=libmvec the built
// kernel calls a vector variant (_ZGV...expm1f), with it off only the scalar
// expm1f; neither links -ffast-math's crtfastmath.
TEST(RecipeTest, ElementwiseLibmCallsUseLibmvecVectorVariants) {
  const v1::Task task = LoadStarterTask("elu");
  const Recipe* recipe = FindRecipe("elementwise");
  ASSERT_TRUE(recipe->Applies(task, "cpu"));
  auto dir = harness::TempDir::Create("kevo-libmvec");
  ASSERT_TRUE(dir.ok()) << dir.status();
  auto imports = [&](const std::string& vector_math) {
    Genome g{recipe->name(), recipe->space().Defaults()};
    g.params["style"] = "omp_simd";
    g.params["vector_math"] = vector_math;
    absl::StatusOr<v1::Candidate> c = recipe->Generate(task, g);
    EXPECT_TRUE(c.ok()) << c.status();
    for (const std::string& f : c->extra_flags()) EXPECT_NE(f, "-ffast-math");
    auto k =
        harness::CompiledKernel::Compile(c->source(), harness::CandidateFlags(*c), "elu", (*dir)->path(), vector_math);
    EXPECT_TRUE(k.ok()) << k.status();
    const std::string nm =
        absl::StrCat("nm -D ", (*dir)->path(), "/", vector_math, ".so > ", (*dir)->path(), "/", vector_math, ".nm");
    EXPECT_EQ(std::system(nm.c_str()), 0);
    std::ifstream in(absl::StrCat((*dir)->path(), "/", vector_math, ".nm"));
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  };
  const std::string vector = imports("libmvec");
  EXPECT_THAT(vector, ::testing::ContainsRegex("U _ZGV[a-zA-Z]+[0-9]+v_expm1f"));
  const std::string scalar = imports("off");
  EXPECT_THAT(scalar, Not(HasSubstr("_ZGV")));
  EXPECT_THAT(scalar, HasSubstr("expm1f"));
}

// softplus' `fmaxf(x, 0.0f)`: libm's fmaxf kept the whole simd loop scalar
// (expf and log1pf included) without -ffast-math. The recipe writes it as a
// select, and the built kernel calls the vector variants and no fmaxf.
TEST(RecipeTest, ElementwiseMinMaxDoesNotKeepTheLoopScalar) {
  const v1::Task task = LoadStarterTask("softplus");
  const Recipe* recipe = FindRecipe("elementwise");
  ASSERT_TRUE(recipe->Applies(task, "cpu"));
  auto dir = harness::TempDir::Create("kevo-minmax");
  ASSERT_TRUE(dir.ok()) << dir.status();
  Genome g{recipe->name(), recipe->space().Defaults()};
  absl::StatusOr<v1::Candidate> c = recipe->Generate(task, g);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(c->source(), HasSubstr("kevo_fmaxf(x, 0.0f)"));
  for (const std::string& f : c->extra_flags()) EXPECT_NE(f, "-ffast-math");
  auto k = harness::CompiledKernel::Compile(c->source(), harness::CandidateFlags(*c), "softplus", (*dir)->path(), "k");
  ASSERT_TRUE(k.ok()) << k.status();
  const std::string nm = absl::StrCat("nm -D ", (*dir)->path(), "/k.so > ", (*dir)->path(), "/k.nm");
  ASSERT_EQ(std::system(nm.c_str()), 0);
  std::ifstream in(absl::StrCat((*dir)->path(), "/k.nm"));
  const std::string imports((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_THAT(imports, ::testing::ContainsRegex("U _ZGV[a-zA-Z]+[0-9]+v_expf"));
  EXPECT_THAT(imports, ::testing::ContainsRegex("U _ZGV[a-zA-Z]+[0-9]+v_log1pf"));
  EXPECT_THAT(imports, Not(::testing::ContainsRegex("U fmaxf")));
}

// The selects give libm's answers, NaNs and signed zeros included, whether
// inlined in a vectorised loop or not.
TEST(RecipeTest, SelectMinMaxAgreesWithLibm) {
  std::string expr = "fmaxf(x, 0.0f) + fminf (x, y) + fmax(1.0, 2.0) + fmin(3.0, 4.0) + my_fmaxf(x)";
  const std::string definitions = SelectMinMax(&expr);
  EXPECT_EQ(expr, "kevo_fmaxf(x, 0.0f) + kevo_fminf (x, y) + kevo_fmax(1.0, 2.0) + kevo_fmin(3.0, 4.0) + my_fmaxf(x)");
  auto dir = harness::TempDir::Create("kevo-minmax-libm");
  ASSERT_TRUE(dir.ok()) << dir.status();
  const std::string program = absl::StrCat("#include <cmath>\n#include <cstdio>\n#include <limits>\n", definitions, R"(
int main() {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const float v[] = {nan, -inf, -2.5f, -0.0f, 0.0f, 1e-40f, 3.0f, inf};
  constexpr int n = sizeof v / sizeof v[0];
  float a[n * n], b[n * n], mx[n * n], mn[n * n];
  for (int i = 0; i < n * n; ++i) a[i] = v[i / n], b[i] = v[i % n];
#pragma omp simd
  for (int i = 0; i < n * n; ++i) mx[i] = kevo_fmaxf(a[i], b[i]), mn[i] = kevo_fminf(a[i], b[i]);
  int bad = 0;
  for (int i = 0; i < n * n; ++i) {
    const float want_mx = fmaxf(a[i], b[i]), want_mn = fminf(a[i], b[i]);
    const bool same_mx = (std::isnan(want_mx) && std::isnan(mx[i])) ||
                         (want_mx == mx[i] && std::signbit(want_mx) == std::signbit(mx[i]));
    const bool same_mn = (std::isnan(want_mn) && std::isnan(mn[i])) ||
                         (want_mn == mn[i] && std::signbit(want_mn) == std::signbit(mn[i]));
    if (!same_mx || !same_mn) std::printf("a=%g b=%g: %g %g, libm %g %g\n", a[i], b[i], mx[i], mn[i], want_mx, want_mn), ++bad;
    if (kevo_fmax(a[i], b[i]) != fmax(a[i], b[i]) && !std::isnan(fmax(a[i], b[i]))) ++bad;
    if (kevo_fmin(a[i], b[i]) != fmin(a[i], b[i]) && !std::isnan(fmin(a[i], b[i]))) ++bad;
  }
  return bad;
}
)");
  const std::string path = (*dir)->path() + "/minmax";
  { std::ofstream(path + ".cc") << program; }
  const std::string build = absl::StrCat("g++ -O3 -march=native -fopenmp -fno-math-errno -o ", path, " ", path, ".cc");
  ASSERT_EQ(std::system(build.c_str()), 0) << program;
  EXPECT_EQ(std::system(path.c_str()), 0) << program;
}

// A program built for AVX2 without AVX-512 at PATH (from PATH.cc), and of
// its instructions containing `needle`, how many and how many of those
// address a stack slot (a spilled or stack-held vector).
struct Avx2Uses {
  int instructions = 0;
  int on_stack = 0;
};
absl::StatusOr<Avx2Uses> CompileForAvx2(const std::string& path, const std::string& program, const std::string& needle,
                                        const std::string& flags = "") {
  { std::ofstream(path + ".cc") << program; }
  const std::string build =
      absl::StrCat("g++ -O3 -mavx2 -mfma -mno-avx512f -fopenmp -Wno-psabi ", flags, " -o ", path, " ", path,
                   ".cc -lmvec && objdump -d --no-show-raw-insn ", path, " > ", path, ".s");
  if (std::system(build.c_str()) != 0) return absl::InternalError(absl::StrCat("cannot build ", path, ".cc"));
  std::ifstream in(path + ".s");
  Avx2Uses uses;
  for (std::string line; std::getline(in, line);) {
    if (line.find(needle) == std::string::npos) continue;
    ++uses.instructions;
    if (line.find("(%rsp)") != std::string::npos || line.find("(%rbp)") != std::string::npos) ++uses.on_stack;
  }
  return uses;
}

// The recipe's defaults with the parameters in `changes` ("k=v,k=v") set.
Genome DefaultsWith(const Recipe& recipe, absl::string_view changes) {
  Genome g{recipe.name(), recipe.space().Defaults()};
  for (absl::string_view kv : absl::StrSplit(changes, ',', absl::SkipEmpty())) {
    std::vector<std::string> p = absl::StrSplit(kv, '=');
    g.params[p[0]] = p[1];
  }
  return g;
}

// On AVX2 without AVX-512 the packed GEMM's micro-kernel keeps its
// accumulators in the 16 ymm registers (GCC keeps a 64-byte vector it cannot
// hold in one register on the stack: every multiply-add read and wrote
// memory, and a 1024^3 matmul ran 25x slower), and its sub-tiles give the
// right product with tails in every dimension and more than one k block.
TEST(RecipeTest, PackedGemmKeepsItsAccumulatorsInRegistersOnAvx2) {
  const v1::Task task = LoadStarterTask("matmul");
  const Recipe* recipe = FindRecipe("gemm_packed");
  ASSERT_TRUE(recipe->Applies(task, "cpu"));
  auto dir = harness::TempDir::Create("kevo-gemm-avx2");
  ASSERT_TRUE(dir.ok()) << dir.status();
  for (const char* tile : {"", "mr=14,nr=32", "mr=4,nr=16"}) {
    SCOPED_TRACE(tile);
    Genome g = DefaultsWith(*recipe, tile);
    g.params["kc"] = "128";
    absl::StatusOr<v1::Candidate> c = recipe->Generate(task, g);
    ASSERT_TRUE(c.ok()) << c.status();
    const std::string program = absl::StrCat(c->source(), R"(
#include <cmath>
#include <cstdio>
int main() {
  const int64_t m = 37, n = 53, k = 300;
  static float a[m * k], b[k * n], c[m * n];
  for (int64_t i = 0; i < m * k; ++i) a[i] = (float)((i * 7919) % 201 - 100) / 100.0f;
  for (int64_t i = 0; i < k * n; ++i) b[i] = (float)((i * 104729) % 199 - 99) / 99.0f;
  kevo_gemm(a, b, c, m, n, k);
  int bad = 0;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double want = 0;
      for (int64_t p = 0; p < k; ++p) want += (double)a[i * k + p] * b[p * n + j];
      if (std::fabs(want - c[i * n + j]) > 1e-3 * (1 + std::fabs(want))) {
        if (bad++ < 5) std::printf("c[%ld][%ld] = %g, want %g\n", (long)i, (long)j, c[i * n + j], want);
      }
    }
  }
  return bad != 0;
}
)");
    const std::string path = (*dir)->path() + "/gemm";
    const absl::StatusOr<Avx2Uses> fmas = CompileForAvx2(path, program, "vfmadd");
    ASSERT_TRUE(fmas.ok()) << fmas.status();
    const int from_stack = fmas->on_stack;
    EXPECT_GT(fmas->instructions, 0);
    EXPECT_EQ(from_stack, 0) << "multiply-adds on stack slots: the accumulators were spilled";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
      EXPECT_EQ(std::system(path.c_str()), 0) << "the AVX2 micro-kernel's product is wrong";
    }
  }
}

void ExpectRightOnValidation(const v1::Task& task, v1::Candidate candidate, const std::string& extra_flag);

// conv2d_direct's tile of fb filters x nv vectors is at most 24 of AVX-512's
// 32 registers; without AVX-512 its vectors are 8 floats and it holds at most 12
// of them (the default's 16-float tile spilled there: 0.02x of PyTorch, every
// multiply-add through the stack), and it is right on the validation shapes.
TEST(RecipeTest, Conv2dDirectKeepsItsTileInRegistersOnAvx2) {
  const v1::Task task = LoadStarterTask("conv2d");
  const Recipe* recipe = FindRecipe("conv2d_direct");
  ASSERT_TRUE(recipe->Applies(task, "cpu"));
  auto dir = harness::TempDir::Create("kevo-conv-avx2");
  ASSERT_TRUE(dir.ok()) << dir.status();
  for (const char* tile : {"", "fb=16,nv=1", "fb=4,nv=4"}) {
    SCOPED_TRACE(tile);
    Genome g = DefaultsWith(*recipe, tile);
    absl::StatusOr<v1::Candidate> c = recipe->Generate(task, g);
    ASSERT_TRUE(c.ok()) << c.status();
    const std::string path = (*dir)->path() + "/conv";
    const absl::StatusOr<Avx2Uses> fmas = CompileForAvx2(path, c->source() + "\nint main() { return 0; }\n", "vfmadd");
    ASSERT_TRUE(fmas.ok()) << fmas.status();
    EXPECT_GT(fmas->instructions, 0);
    EXPECT_EQ(fmas->on_stack, 0) << "multiply-adds on stack slots: the tile was spilled";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
      ExpectRightOnValidation(task, *c, "-mno-avx512f");
    }
  }
}

// The row recipes' vectors are 8 lanes on AVX2 without AVX-512 (16 kept
// GCC's vectors on the stack: softmax ran at 0.13x of PyTorch on a Zen 3
// host): far fewer vector instructions read or write stack slots, and the
// 8-lane loops and their tails give softmax's values.
TEST(RecipeTest, RowRecipesUseRegisterWideVectorsOnAvx2) {
  const v1::Task task = LoadStarterTask("softmax");
  auto dir = harness::TempDir::Create("kevo-rows-avx2");
  ASSERT_TRUE(dir.ok()) << dir.status();
  for (const char* name : {"softmax_three_pass", "softmax_online"}) {
    SCOPED_TRACE(name);
    const Recipe* recipe = FindRecipe(name);
    ASSERT_NE(recipe, nullptr);
    absl::StatusOr<v1::Candidate> c = recipe->Generate(task, Genome{name, recipe->space().Defaults()});
    ASSERT_TRUE(c.ok()) << c.status();
    const std::string program = absl::StrCat(c->source(), R"(
#include <cmath>
#include <cstdio>
int main() {
  int bad = 0;
  const int64_t all_cols[] = {1, 7, 8, 9, 37, 1000};
  for (int64_t cols : all_cols) {
    const int64_t rows = 3;
    static float x[3 * 1000], y[3 * 1000];
    for (int64_t i = 0; i < rows * cols; ++i) x[i] = (float)((i * 7919) % 401 - 200) / 25.0f;
    softmax(x, y, rows, cols);
    for (int64_t r = 0; r < rows; ++r) {
      double m = -1e300, s = 0;
      for (int64_t j = 0; j < cols; ++j) m = x[r * cols + j] > m ? x[r * cols + j] : m;
      for (int64_t j = 0; j < cols; ++j) s += std::exp((double)x[r * cols + j] - m);
      for (int64_t j = 0; j < cols; ++j) {
        const double want = std::exp((double)x[r * cols + j] - m) / s;
        if (std::fabs(want - y[r * cols + j]) > 1e-5 + 1e-4 * want && bad++ < 5)
          std::printf("cols %ld: y[%ld][%ld] = %g, want %g\n", (long)cols, (long)r, (long)j, y[r * cols + j], want);
      }
    }
  }
  return bad != 0;
}
)");
    const std::string path = absl::StrCat((*dir)->path(), "/", name);
    const absl::StatusOr<Avx2Uses> uses = CompileForAvx2(path, program, "%ymm");
    ASSERT_TRUE(uses.ok()) << uses.status();
    const int vector_ops = uses->instructions, on_stack = uses->on_stack;
    ASSERT_GT(vector_ops, 0);
    // 16-lane vectors: 34-37% of them; 8 lanes: 4-18% (GCC 12).
    EXPECT_LT(on_stack * 4, vector_ops) << on_stack << " of " << vector_ops << " ymm instructions on stack slots";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
      EXPECT_EQ(std::system(path.c_str()), 0) << "the 8-lane softmax is wrong";
    }
  }
}

// `source` and a main that runs its `fn(x, y, n)` on 1003 values in [-6, 6]
// and returns 0 when each y[i] is `want` (over x[i], in double) within
// `tolerance` relative.
std::string WithUnaryCheck(const std::string& source, const std::string& fn, const std::string& want,
                           double tolerance) {
  return absl::StrCat(source, R"(
#include <cstdio>
int main() {
  static float x[1003], y[1003];
  for (int i = 0; i < 1003; ++i) x[i] = (float)(i % 97 - 48) / 8.0f;
  )",
                      fn, R"((x, y, 1003);
  int bad = 0;
  for (int i = 0; i < 1003; ++i) {
    const double want = )",
                      want, R"(;
    if (std::fabs(y[i] - want) > )",
                      tolerance,
                      R"( * (1.0 + std::fabs(want)) && bad++ < 5) std::printf("y[%d] = %g, want %g\n", i, y[i], want);
  }
  return bad != 0;
}
)");
}

// The elementwise recipe's 64-byte default vectors are 32-byte ones on AVX2
// without AVX-512, the same elements a step (hardsigmoid took 15 ms instead
// of 1.8 ms on a Zen 3 host): no vector instruction on a stack slot, and the
// values right with a tail.
TEST(RecipeTest, ElementwiseVectorsFitYmmRegistersOnAvx2) {
  const v1::Task task = LoadStarterTask("hardsigmoid");
  const Recipe* recipe = FindRecipe("elementwise");
  ASSERT_TRUE(recipe->Applies(task, "cpu"));
  auto dir = harness::TempDir::Create("kevo-elementwise-avx2");
  ASSERT_TRUE(dir.ok()) << dir.status();
  Genome g{recipe->name(), recipe->space().Defaults()};
  ASSERT_EQ(g.params["width"], "16");  // 64 bytes of float
  absl::StatusOr<v1::Candidate> c = recipe->Generate(task, g);
  ASSERT_TRUE(c.ok()) << c.status();
  const std::string program = WithUnaryCheck(c->source(), "hardsigmoid",
                                             "x[i] <= -3.0f ? 0.0f : (x[i] >= 3.0f ? 1.0f : x[i] / 6.0f + 0.5f)", 0);
  const std::string path = (*dir)->path() + "/hardsigmoid";
  const absl::StatusOr<Avx2Uses> uses = CompileForAvx2(path, program, "%ymm");
  ASSERT_TRUE(uses.ok()) << uses.status();
  EXPECT_GT(uses->instructions, 0);
  EXPECT_EQ(uses->on_stack, 0) << "of " << uses->instructions << " ymm instructions";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    EXPECT_EQ(std::system(path.c_str()), 0) << "the 32-byte hardsigmoid is wrong";
  }
}

// Every `?:` becomes a kevo_select, nested ones and those inside calls
// included, and the selects give the same bits as `?:`: NaNs, signed zeros
// and infinities, float and double, in a vectorised loop.
TEST(RecipeTest, SelectBothArmsAgreesWithTheConditional) {
  const std::string original = "x > 0.0f ? x : (y < x ? fmaxf(y, x > y ? -x : y) : x ? y : 1.0)";
  std::string expr = original;
  const std::string definitions = SelectBothArms(&expr);
  EXPECT_EQ(expr,
            "kevo_select(x > 0.0f , x , (kevo_select(y < x , fmaxf(y,kevo_select( x > y , -x , y)) ,"
            "kevo_select( x , y , 1.0))))");
  std::string plain = "x + y";
  EXPECT_EQ(SelectBothArms(&plain), "");
  EXPECT_EQ(plain, "x + y");
  auto dir = harness::TempDir::Create("kevo-select");
  ASSERT_TRUE(dir.ok()) << dir.status();
  const std::string program = absl::StrCat(
      "#include <cmath>\n#include <cstdint>\n#include <cstdio>\n#include <cstring>\n"
      "#include <limits>\n",
      definitions, R"(
static float plain_f(float x, float y) { return (float)()",
      original, R"(); }
static float select_f(float x, float y) { return (float)()",
      expr, R"(); }
static double select_d(double x, double y) { return kevo_select(x < y, x, y); }
int main() {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const float v[] = {nan, -inf, -2.5f, -0.0f, 0.0f, 1e-40f, 3.0f, inf};
  constexpr int n = sizeof v / sizeof v[0];
  float a[n * n], b[n * n], got[n * n];
  for (int i = 0; i < n * n; ++i) a[i] = v[i / n], b[i] = v[i % n];
#pragma omp simd
  for (int i = 0; i < n * n; ++i) got[i] = select_f(a[i], b[i]);
  int bad = 0;
  for (int i = 0; i < n * n; ++i) {
    const float want = plain_f(a[i], b[i]);
    const double want_d = (double)a[i] < (double)b[i] ? a[i] : b[i], got_d = select_d(a[i], b[i]);
    if (std::memcmp(&want, &got[i], 4) != 0) std::printf("x=%g y=%g: %g, ?: gives %g\n", a[i], b[i], got[i], want), ++bad;
    if (std::memcmp(&want_d, &got_d, 8) != 0) ++bad;
  }
  return bad;
}
)");
  const std::string path = (*dir)->path() + "/select";
  { std::ofstream(path + ".cc") << program; }
  const std::string build = absl::StrCat("g++ -O3 -march=native -fopenmp -fno-math-errno -o ", path, " ", path, ".cc");
  ASSERT_EQ(std::system(build.c_str()), 0) << program;
  EXPECT_EQ(std::system(path.c_str()), 0) << program;
}

// selu's `x > 0 ? x : a * expm1f(x)`: GCC sank the call into a branch and
// left the loop scalar on AVX2 (29 ms against 3.3 ms on a Zen 3 host). Built
// for AVX2 the kernel calls the 8-lane expm1f, and is right.
TEST(RecipeTest, ElementwiseConditionalCallsVectoriseOnAvx2) {
  const v1::Task task = LoadStarterTask("selu");
  const Recipe* recipe = FindRecipe("elementwise");
  ASSERT_TRUE(recipe->Applies(task, "cpu"));
  auto dir = harness::TempDir::Create("kevo-selu-avx2");
  ASSERT_TRUE(dir.ok()) << dir.status();
  Genome g{recipe->name(), recipe->space().Defaults()};
  // The default, `inline`, has its own erff only: expm1f goes through libmvec.
  ASSERT_EQ(g.params["vector_math"], "inline");
  absl::StatusOr<v1::Candidate> c = recipe->Generate(task, g);
  ASSERT_TRUE(c.ok()) << c.status();
  const std::string program =
      WithUnaryCheck(c->source(), "selu",
                     "1.0507009873554805 * (x[i] > 0.0f ? x[i] : 1.6732632423543772 * std::expm1((double)x[i]))", 1e-5);
  const std::string path = (*dir)->path() + "/selu";
  const absl::StatusOr<Avx2Uses> calls = CompileForAvx2(path, program, "call", absl::StrJoin(c->extra_flags(), " "));
  ASSERT_TRUE(calls.ok()) << calls.status();
  std::ifstream in(path + ".s");
  const std::string disassembly((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_THAT(disassembly, ::testing::ContainsRegex("call.*<_ZGVdN8v_expm1f"));
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    EXPECT_EQ(std::system(path.c_str()), 0) << "the AVX2 selu is wrong";
  }
}

// ---------------------------------------------------------- generic source

TEST(GenericSourceTest, AddsRestrictOuterOmpAndInnerUnrollIgnoringComments) {
  const std::string src = R"(#include <cstdint>
// matmul(const float* A) is declared below; for (x) in a comment is ignored.
extern "C" void matmul(const float* A, const float* B, float* C, int64_t M, int64_t N, int64_t K);
extern "C" void matmul(const float* A, const float* B, float* C, int64_t M, int64_t N,
                       int64_t K) {
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      float sum = 0.0f;  /* for (;;) */
      for (int64_t k = 0; k < K; ++k) sum += A[i * K + k] * B[k * N + j];
      C[i * N + j] = sum;
    }
  }
  const char* s = "for (;;) {";
  (void)s;
}
)";
  absl::StatusOr<FunctionSpan> fn = FindFunction(src, "matmul");
  ASSERT_TRUE(fn.ok()) << fn.status();
  std::vector<LoopSpan> loops = FindLoops(src, *fn);
  ASSERT_EQ(loops.size(), 3u);
  EXPECT_TRUE(loops[0].outermost);
  EXPECT_FALSE(loops[0].innermost);
  EXPECT_FALSE(loops[1].outermost);
  EXPECT_FALSE(loops[1].innermost);
  EXPECT_TRUE(loops[2].innermost);

  SourceEdits edits;
  edits.restrict_pointers = true;
  edits.outer_pragma = "#pragma omp parallel for schedule(static)";
  edits.inner_pragma = "#pragma GCC unroll 4";
  absl::StatusOr<EditedSource> edited = EditFunction(src, "matmul", edits);
  ASSERT_TRUE(edited.ok()) << edited.status();
  const std::string* out = &edited->source;
  EXPECT_EQ(edited->shared_loops, 1);
  EXPECT_THAT(*out, HasSubstr("const float* __restrict  A, const float* __restrict  B, "
                              "float* __restrict  C, int64_t M"));
  // The declaration is left alone.
  EXPECT_THAT(*out, HasSubstr("void matmul(const float* A, const float* B, float* C, int64_t M, "
                              "int64_t N, int64_t K);"));
  EXPECT_THAT(*out, HasSubstr("#pragma omp parallel for schedule(static)\nfor (int64_t i = 0;"));
  EXPECT_THAT(*out, HasSubstr("#pragma GCC unroll 4\nfor (int64_t k = 0;"));
  EXPECT_THAT(*out, Not(HasSubstr("#pragma GCC unroll 4\nfor (int64_t j")));
  EXPECT_EQ(FindFunction(src, "softmax").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(FindFunction("void f(int a) { if (a) {", "f").status().code(), absl::StatusCode::kInvalidArgument);
}

// The analysis that decides which outermost loops OpenMP threads may share.
LoopSharing SharingOf(const std::string& src, const std::string& function, int loop = 0) {
  absl::StatusOr<FunctionSpan> fn = FindFunction(src, function);
  EXPECT_TRUE(fn.ok()) << fn.status();
  if (!fn.ok()) return {};
  std::vector<LoopSpan> outer;
  for (const LoopSpan& l : FindLoops(src, *fn)) {
    if (l.outermost) outer.push_back(l);
  }
  EXPECT_GT(outer.size(), static_cast<size_t>(loop));
  if (outer.size() <= static_cast<size_t>(loop)) return {};
  return AnalyseLoop(src, *fn, outer[loop]);
}

TEST(GenericSourceTest, AccumulatedScalarsBecomeReductionsAndOwnElementWritesAreShared) {
  LoopSharing s = SharingOf(R"(
void f(const long* x, int* y, long* bad, long n) {
  const long lo = -5;
  long count = 0;
  double total = 0.0;
  for (long i = 0; i < n; ++i) {
    long v = x[i];
    if (v < lo) { v = lo; ++count; }
    total += 0.5 * v;
    count++;
    y[i] = static_cast<int>(v);
  }
  bad[0] = count + static_cast<long>(total);
})",
                            "f");
  EXPECT_TRUE(s.shareable) << s.reason;
  EXPECT_EQ(s.reductions, (std::vector<std::string>{"count", "total"}));
}

TEST(GenericSourceTest, SharedScratchRunningValuesAndEscapesKeepTheLoopSerial) {
  // Scratch declared before the loop, written at an inner index (bmm's row).
  LoopSharing scratch = SharingOf(R"(
void f(const float* x, float* y, long b, long h) {
  float* row = static_cast<float*>(std::malloc(sizeof(float) * h));
  for (long i = 0; i < b; ++i) {
    for (long k = 0; k < h; ++k) row[k] = x[i * h + k];
    y[i] = row[0];
  }
  std::free(row);
})",
                                  "f");
  EXPECT_FALSE(scratch.shareable);
  EXPECT_THAT(scratch.reason, HasSubstr("`row[k]`"));
  // A running offset that later iterations read (embedding_bag's off).
  LoopSharing running = SharingOf(R"(
void f(const long* len, const float* v, float* out, long b) {
  long off = 0;
  for (long i = 0; i < b; ++i) {
    out[i] = v[off];
    off += len[i];
  }
})",
                                  "f");
  EXPECT_FALSE(running.shareable);
  EXPECT_THAT(running.reason, HasSubstr("running value"));
  // One element every iteration writes; a plain assignment of an outer
  // scalar; a return out of the loop.
  EXPECT_FALSE(SharingOf("void f(float* s, long n) { for (long i = 0; i < n; ++i) s[0] += i; }", "f").shareable);
  EXPECT_FALSE(SharingOf("void f(long* s, long n) { long last = 0;\n"
                         "for (long i = 0; i < n; ++i) last = i; s[0] = last; }",
                         "f")
                   .shareable);
  EXPECT_FALSE(SharingOf("void f(long* s, long n) { for (long i = 0; i < n; ++i) { if (s[i]) "
                         "return; s[i] = 1; } }",
                         "f")
                   .shareable);
  // An inner break is fine; one out of the shared loop is not.
  EXPECT_TRUE(SharingOf("void f(long* s, long n) { for (long i = 0; i < n; ++i) { for (long j = 0; "
                        "j < n; ++j) { if (j > i) break; s[i] += j; } } }",
                        "f")
                  .shareable);
  EXPECT_FALSE(SharingOf("void f(long* s, long n) { for (long i = 0; i < n; ++i) { if (s[i]) "
                         "break; s[i] = 1; } }",
                         "f")
                   .shareable);
  // The second loop of jagged_truncate's shape (its own index) is shareable
  // although the first is not.
  const std::string two = R"(
void f(const long* len, float* out, long b, long l) {
  long off = 0;
  for (long i = 0; i < b; ++i) { out[off] = 1.0f; off += len[i]; }
  for (long t = off; t < b * l; ++t) out[t] = 0.0f;
})";
  EXPECT_FALSE(SharingOf(two, "f", 0).shareable);
  EXPECT_TRUE(SharingOf(two, "f", 1).shareable);
}

TEST(GenericRecipeTest, OmpValuesDoNotApplyWhenNoOuterLoopCanBeShared) {
  v1::Task task = LoadStarterTask("fm_interaction");
  const Recipe* generic = FindRecipe("generic");
  ASSERT_NE(generic, nullptr);
  Genome g{"generic", generic->space().Defaults()};
  ASSERT_EQ(g.params.at("omp"), "parallel_for");
  absl::StatusOr<v1::Candidate> c = generic->Generate(task, g);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition) << c.status();
  EXPECT_THAT(c.status().message(), HasSubstr("`T["));
  g.params["omp"] = "off";
  EXPECT_TRUE(generic->Generate(task, g).ok());
}

// ---------------------------------------------------------------- proposer

ProposeRequest Request(const v1::Task& task, int count, uint64_t seed) {
  ProposeRequest r;
  r.task = &task;
  r.platform = "cpu";
  r.count = count;
  r.seed = seed;
  return r;
}

ParentInfo Parent(const std::string& id, Genome genome) {
  ParentInfo p;
  p.node_id = id;
  p.genome = std::move(genome);
  p.fitness = 2.0;
  return p;
}

void ExpectInSpace(const Proposal& p) {
  const Recipe* recipe = FindRecipe(p.genome.recipe);
  ASSERT_NE(recipe, nullptr) << p.genome.ToString();
  EXPECT_TRUE(recipe->space().Check(p.genome.params).ok()) << p.genome.ToString();
  EXPECT_EQ(p.proposer, "builtin");
  EXPECT_EQ(p.candidate.language(), "c++");
  EXPECT_THAT(p.candidate.source(), HasSubstr(p.genome.ToString()));
}

TEST(BuiltinProposerTest, FirstGenerationStartsWithEachApplicableDefault) {
  const v1::Task task = LoadStarterTask("softmax");
  BuiltinProposer proposer;
  absl::StatusOr<std::vector<Proposal>> out = proposer.Propose(Request(task, 8, 1));
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 8u);
  std::set<std::string> genomes;
  for (size_t i = 0; i < out->size(); ++i) {
    const Proposal& p = (*out)[i];
    ExpectInSpace(p);
    EXPECT_EQ(p.mutation, "seed");
    EXPECT_THAT(p.parent_ids, IsEmpty());
    EXPECT_TRUE(genomes.insert(p.genome.ToString()).second) << "duplicate " << p.genome.ToString();
    if (i < 3) {
      const Recipe* r = FindRecipe(p.genome.recipe);
      EXPECT_EQ(p.genome.params, r->space().Defaults()) << p.genome.ToString();
    }
  }
  EXPECT_EQ((*out)[0].genome.recipe, "softmax_three_pass");
  EXPECT_EQ((*out)[1].genome.recipe, "softmax_online");
  EXPECT_EQ((*out)[2].genome.recipe, "generic");
  // Then each default with its seed overrides: single-threaded variants.
  for (size_t i = 3; i < 6; ++i) {
    const Proposal& p = (*out)[i];
    EXPECT_EQ(p.genome.recipe, (*out)[i - 3].genome.recipe);
    EXPECT_EQ(ChangedParams(p.genome, (*out)[i - 3].genome).size(), 1u) << p.genome.ToString();
  }
  EXPECT_EQ((*out)[3].genome.params.at("threads"), "1");
  EXPECT_EQ((*out)[5].genome.params.at("omp"), "off");
}

TEST(BuiltinProposerTest, ProposalsAreDeterministicForASeed) {
  const v1::Task task = LoadStarterTask("matmul");
  BuiltinProposer proposer;
  auto genomes = [&](uint64_t seed, std::vector<ParentInfo> parents) {
    ProposeRequest r = Request(task, 12, seed);
    r.parents = std::move(parents);
    absl::StatusOr<std::vector<Proposal>> out = proposer.Propose(r);
    EXPECT_TRUE(out.ok()) << out.status();
    std::vector<std::string> g;
    for (const Proposal& p : *out)
      g.push_back(p.genome.ToString() + " " + p.mutation + " " +
                  std::to_string(std::hash<std::string>()(p.candidate.source())));
    return g;
  };
  EXPECT_EQ(genomes(7, {}), genomes(7, {}));
  EXPECT_NE(genomes(7, {}), genomes(8, {}));
  const Recipe* gemm = FindRecipe("gemm_packed");
  ParentInfo parent = Parent("n1", Genome{gemm->name(), gemm->space().Defaults()});
  EXPECT_EQ(genomes(3, {parent}), genomes(3, {parent}));
  EXPECT_NE(genomes(3, {parent}), genomes(4, {parent}));
}

// The job's tried genomes (ProposeRequest::tried) are never proposed again:
// the proposer fills the batch with others, and once a parent's whole
// neighbourhood has been tried it returns none, however many it is asked for
// (a job over-asks after rounds of duplicates).
TEST(BuiltinProposerTest, TriedGenomesAreNotProposedAgain) {
  const v1::Task task = LoadStarterTask("relu");
  const Recipe* elementwise = FindRecipe("elementwise");
  ASSERT_NE(elementwise, nullptr);
  const ParentInfo parent = Parent("p", Genome{elementwise->name(), elementwise->space().Defaults()});
  BuiltinProposer proposer;
  std::unordered_set<std::string> tried;
  for (int round = 0; round < 200; ++round) {
    ProposeRequest r = Request(task, 4, /*seed=*/round);
    r.parents = {parent};
    r.tried = &tried;
    absl::StatusOr<std::vector<Proposal>> out = proposer.Propose(r);
    ASSERT_TRUE(out.ok()) << out.status();
    if (out->empty()) break;
    for (const Proposal& p : *out) {
      EXPECT_TRUE(tried.insert(p.genome.ToString()).second) << "proposed again: " << p.genome.ToString();
    }
  }
  // Every one-parameter change of the parent and every other recipe was
  // proposed once, and then nothing more, even when asked for 512.
  int children = 0;
  for (const ParamSpec& p : elementwise->space().params()) children += static_cast<int>(p.values.size()) - 1;
  EXPECT_GE(static_cast<int>(tried.size()), children);
  ProposeRequest r = Request(task, 512, /*seed=*/1);
  r.parents = {parent};
  r.tried = &tried;
  absl::StatusOr<std::vector<Proposal>> out = proposer.Propose(r);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(*out, IsEmpty());
}

TEST(BuiltinProposerTest, ParamMutationsChangeExactlyOneParameterWithinTheSpace) {
  const v1::Task task = LoadStarterTask("matmul");
  const Recipe* gemm = FindRecipe("gemm_packed");
  Genome parent_genome{gemm->name(), gemm->space().Defaults()};
  BuiltinProposer proposer;
  int param_mutations = 0, neighbours = 0;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    ProposeRequest r = Request(task, 6, seed);
    r.parents = {Parent("p", parent_genome)};
    absl::StatusOr<std::vector<Proposal>> out = proposer.Propose(r);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->size(), 6u);
    for (const Proposal& p : *out) {
      ExpectInSpace(p);
      EXPECT_EQ(p.parent_ids, std::vector<std::string>{"p"});
      if (p.genome.recipe != gemm->name()) {
        EXPECT_EQ(p.mutation, absl::StrCat("variant:gemm_packed->", p.genome.recipe));
        continue;
      }
      ++param_mutations;
      std::vector<std::string> changed = ChangedParams(parent_genome, p.genome);
      ASSERT_EQ(changed.size(), 1u) << p.genome.ToString();
      const std::string& key = changed[0];
      EXPECT_EQ(p.mutation,
                absl::StrCat("param:", key, " ", parent_genome.params.at(key), "->", p.genome.params.at(key)));
      const ParamSpec* spec = gemm->space().Find(key);
      int from = SearchSpace::IndexOf(*spec, parent_genome.params.at(key));
      int to = SearchSpace::IndexOf(*spec, p.genome.params.at(key));
      neighbours += std::abs(from - to) == 1;
    }
  }
  EXPECT_GT(param_mutations, 60);
  // Neighbouring values are favoured (70% + a share of the uniform picks).
  EXPECT_GT(neighbours, param_mutations * 6 / 10);
}

TEST(BuiltinProposerTest, VariantSwitchKeepsSharedParameters) {
  const v1::Task task = LoadStarterTask("softmax");
  const Recipe* three = FindRecipe("softmax_three_pass");
  Genome parent{three->name(), three->space().Defaults()};
  parent.params["exp"] = "cephes";
  parent.params["accumulators"] = "8";
  parent.params["pass3"] = "recompute";
  BuiltinProposer proposer;
  int variants = 0;
  for (uint64_t seed = 0; seed < 30; ++seed) {
    ProposeRequest r = Request(task, 4, seed);
    r.parents = {Parent("p", parent)};
    r.priors = {{"generic", 0.0}};  // only softmax variants
    absl::StatusOr<std::vector<Proposal>> out = proposer.Propose(r);
    ASSERT_TRUE(out.ok()) << out.status();
    for (const Proposal& p : *out) {
      if (p.genome.recipe == three->name()) continue;
      ++variants;
      EXPECT_EQ(p.genome.recipe, "softmax_online");
      EXPECT_EQ(p.mutation, "variant:softmax_three_pass->softmax_online");
      EXPECT_EQ(p.genome.params.at("exp"), "cephes");
      EXPECT_EQ(p.genome.params.at("accumulators"), "8");
      EXPECT_EQ(p.genome.params.count("pass3"), 0u);
      ExpectInSpace(p);
    }
  }
  EXPECT_GT(variants, 0);
}

TEST(BuiltinProposerTest, CrossoverMixesTheParentsParameters) {
  const v1::Task task = LoadStarterTask("matmul");
  const Recipe* gemm = FindRecipe("gemm_packed");
  Genome a{gemm->name(), {}}, b{gemm->name(), {}};
  for (const ParamSpec& p : gemm->space().params()) {
    a.params[p.name] = p.values.front();
    b.params[p.name] = p.values.back();
  }
  ProposeRequest r = Request(task, 8, 11);
  r.parents = {Parent("a", a), Parent("b", b)};
  BuiltinProposer proposer;
  absl::StatusOr<std::vector<Proposal>> out = proposer.Propose(r);
  ASSERT_TRUE(out.ok()) << out.status();
  int crossovers = 0;
  for (const Proposal& p : *out) {
    ExpectInSpace(p);
    if (p.mutation != "crossover") continue;
    ++crossovers;
    EXPECT_EQ(p.parent_ids, (std::vector<std::string>{"a", "b"}));
    int from_a = 0, from_b = 0;
    for (const auto& [k, v] : p.genome.params) {
      ASSERT_TRUE(v == a.params.at(k) || v == b.params.at(k)) << k << "=" << v;
      (v == a.params.at(k) ? from_a : from_b)++;
    }
    EXPECT_GT(from_a, 0) << p.genome.ToString();
    EXPECT_GT(from_b, 0) << p.genome.ToString();
  }
  EXPECT_EQ(crossovers, 4);
}

TEST(BuiltinProposerTest, PriorsOrderAndExcludeRecipes) {
  const v1::Task task = LoadStarterTask("bucketize");
  ProposeRequest r = Request(task, 30, 5);
  r.priors = {{"bucketize_lut", 5.0}, {"generic", 0.0}};
  BuiltinProposer proposer;
  absl::StatusOr<std::vector<Proposal>> out = proposer.Propose(r);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 30u);
  EXPECT_EQ((*out)[0].genome.recipe, "bucketize_lut");
  int lut = 0;
  for (const Proposal& p : *out) {
    EXPECT_NE(p.genome.recipe, "generic");
    lut += p.genome.recipe == "bucketize_lut";
  }
  // 2 fixed seeds of each recipe, then 24 random ones, 5/7 of them expected lut.
  EXPECT_GE(lut, 2 + 24 / 2);
}

TEST(BuiltinProposerTest, NonBuiltinParentGetsGenericMutatorProposals) {
  const v1::Task task = LoadStarterTask("row_sum");
  ParentInfo llm;
  llm.node_id = "llm-node";
  llm.candidate.set_source("// written by a model");
  ProposeRequest r = Request(task, 3, 2);
  r.parents = {llm};
  BuiltinProposer proposer;
  absl::StatusOr<std::vector<Proposal>> out = proposer.Propose(r);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 3u);
  for (const Proposal& p : *out) {
    ExpectInSpace(p);
    EXPECT_EQ(p.genome.recipe, "generic");
    EXPECT_EQ(p.mutation, "generic:generic");
    EXPECT_EQ(p.parent_ids, std::vector<std::string>{"llm-node"});
  }
}

TEST(BuiltinProposerTest, RejectsBadRequestsWithSpecificCodes) {
  BuiltinProposer proposer;
  ProposeRequest null_task;
  EXPECT_EQ(proposer.Propose(null_task).status().code(), absl::StatusCode::kInvalidArgument);
  const v1::Task softmax = LoadStarterTask("softmax");
  EXPECT_EQ(proposer.Propose(Request(softmax, 0, 1)).status().code(), absl::StatusCode::kInvalidArgument);
  v1::Task bare = softmax;
  bare.clear_hints();
  bare.mutable_reference()->set_source("int unrelated() { return 0; }");
  EXPECT_EQ(proposer.Propose(Request(bare, 4, 1)).status().code(), absl::StatusCode::kFailedPrecondition);
  ProposeRequest elsewhere = Request(softmax, 4, 1);
  elsewhere.platform = "tpu";  // no recipe of any kind for this platform
  EXPECT_EQ(proposer.Propose(elsewhere).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(BuiltinProposerTest, ExhaustedSpaceReturnsFewerProposals) {
  // row_reduce has 4*2*2 = 16 points; generic is excluded by its prior.
  const v1::Task task = LoadStarterTask("row_sum");
  ProposeRequest r = Request(task, 40, 3);
  r.priors = {{"generic", 0.0}};
  BuiltinProposer proposer;
  absl::StatusOr<std::vector<Proposal>> out = proposer.Propose(r);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_LE(out->size(), 16u);
  EXPECT_GE(out->size(), 12u);
}

// ------------------------------------------------ generated kernels are right

bool IsStarterTask(const std::string& name) {
  return name == "vector_add" || name == "softmax" || name == "row_sum" || name == "matmul" || name == "bucketize";
}

// The starter tasks, and the tasks that alone reach a recipe's code path:
// log_softmax (the softmax recipes' log-sum-exp pass), matmul_bf16 (the
// gemm_packed recipe's bf16 packing and rounding), conv2d (im2col straight
// into the packed layout: every KC and NC block size) and matmul_at (A
// packed down its columns).
bool SweepsEveryValue(const std::string& name) {
  return IsStarterTask(name) || name == "log_softmax" || name == "matmul_bf16" || name == "layer_norm" ||
         name == "rms_norm" || name == "cross_entropy" || name == "conv2d" || name == "matmul_at";
}

// Every task folder whose task.textproto sets hints, plus the starter tasks.
std::vector<std::string> HintedTasks() {
  std::vector<std::string> out = {"vector_add", "softmax", "row_sum", "matmul", "bucketize"};
  absl::StatusOr<std::vector<std::string>> dirs = task::FindTaskDirs(SourceDir() + "/tasks");
  if (!dirs.ok()) return out;
  for (const std::string& dir : *dirs) {
    const std::string name = dir.substr(dir.find_last_of('/') + 1);
    std::ifstream in(dir + "/task.textproto");
    std::stringstream text;
    text << in.rdbuf();
    if (!IsStarterTask(name) && text.str().find("hints") != std::string::npos) out.push_back(name);
  }
  return out;
}

class RecipeCorrectnessTest : public ::testing::TestWithParam<std::string> {};

TEST_P(RecipeCorrectnessTest, GenomesCoveringTheSpaceMatchTheReference) {
  const v1::Task task = LoadStarterTask(GetParam());
  ASSERT_FALSE(task.name().empty());
  auto dir = harness::TempDir::Create("kevo_recipes_");
  ASSERT_TRUE(dir.ok()) << dir.status();
  auto reference = harness::CompiledKernel::Compile(task.reference().source(), harness::ReferenceFlags(),
                                                    task.signature().function(), (*dir)->path(), "ref");
  ASSERT_TRUE(reference.ok()) << reference.status();

  // Reference outputs per validation binding (seed 1).
  std::vector<std::unique_ptr<harness::TaskCall>> want;
  for (const v1::Binding& b : task.validate()) {
    auto call = harness::MakeTaskCall(task, b, /*seed=*/1);
    ASSERT_TRUE(call.ok()) << call.status();
    (*reference)->Call((*call)->args);
    want.push_back(*std::move(call));
  }

  // Every hinted task gets a pattern recipe besides the generic mutator: on
  // the CPU, or on another platform for patterns only its recipes implement
  // (e.g. layer_norm and bf16 gemm on nvidia). The CPU recipes that apply
  // are checked here.
  const std::vector<const Recipe*> recipes = BuiltinProposer::ApplicableRecipes(task, "cpu");
  if (recipes.size() < 2u) {
    bool elsewhere = false;
    for (const char* platform : {"nvidia", "amd", "mtia-sim"}) {
      elsewhere = elsewhere || !BuiltinProposer::ApplicableRecipes(task, platform).empty();
    }
    EXPECT_TRUE(elsewhere) << "no pattern recipe on any platform";
  }
  ASSERT_GE(recipes.size(), 1u);
  std::mt19937_64 rng(std::hash<std::string>()(task.name()));
  int index = 0;
  for (const Recipe* recipe : recipes) {
    // The generic mutator's OpenMP variants are only right for references
    // whose outer loop has no carried state (the starters'); on others (e.g.
    // embedding_bag's shared scratch) a wrong variant is the evaluator's to
    // reject, as the search does.
    if (recipe->name() == "generic" && !IsStarterTask(task.name())) continue;
    // The default and its seed overrides; for SweepsEveryValue tasks also genomes
    // that together use every value of every parameter (genome i takes value
    // i mod count of each); and one random genome.
    std::vector<Genome> genomes = {Genome{recipe->name(), recipe->space().Defaults()}};
    for (const auto& overrides : recipe->SeedOverrides()) {
      Genome g = genomes[0];
      for (const auto& [k, v] : overrides) g.params[k] = v;
      genomes.push_back(std::move(g));
    }
    size_t widest = 0;
    for (const ParamSpec& p : recipe->space().params()) widest = std::max(widest, p.values.size());
    if (!SweepsEveryValue(task.name())) widest = 0;
    for (size_t i = 0; i < widest; ++i) {
      Genome g{recipe->name(), {}};
      for (const ParamSpec& p : recipe->space().params()) g.params[p.name] = p.values[i % p.values.size()];
      genomes.push_back(std::move(g));
    }
    genomes.push_back(Genome{recipe->name(), recipe->space().Random(rng)});
    for (const Genome& genome : genomes) {
      SCOPED_TRACE(genome.ToString());
      absl::StatusOr<v1::Candidate> candidate = recipe->Generate(task, genome);
      ASSERT_TRUE(candidate.ok()) << candidate.status();
      auto kernel =
          harness::CompiledKernel::Compile(candidate->source(), harness::CandidateFlags(*candidate),
                                           task.signature().function(), (*dir)->path(), absl::StrCat("k", index++));
      ASSERT_TRUE(kernel.ok()) << kernel.status() << "\n" << candidate->source();
      for (int b = 0; b < task.validate_size(); ++b) {
        auto got = harness::MakeTaskCall(task, task.validate(b), /*seed=*/1);
        ASSERT_TRUE(got.ok()) << got.status();
        (*kernel)->Call((*got)->args);
        absl::Status same = harness::CompareOutputs(task, **got, *want[b]);
        EXPECT_TRUE(same.ok()) << "binding " << task.validate(b).name() << ": " << same;
        // Inputs must be left alone.
        auto fresh = harness::MakeTaskCall(task, task.validate(b), /*seed=*/1);
        for (size_t i = 0; i < (*got)->inputs.size(); ++i) {
          EXPECT_EQ(std::memcmp((*got)->inputs[i]->data, (*fresh)->inputs[i]->data, (*got)->inputs[i]->size), 0)
              << "input " << i << " changed";
        }
      }
    }
  }
}

// Compiles `candidate` as the worker does, with `extra_flag` when given,
// and checks it against the task's reference on every validation binding.
void ExpectRightOnValidation(const v1::Task& task, v1::Candidate candidate, const std::string& extra_flag) {
  SCOPED_TRACE(extra_flag.empty() ? "-march=native" : extra_flag);
  auto dir = harness::TempDir::Create("kevo_recipe_right_");
  ASSERT_TRUE(dir.ok()) << dir.status();
  auto reference = harness::CompiledKernel::Compile(task.reference().source(), harness::ReferenceFlags(),
                                                    task.signature().function(), (*dir)->path(), "ref");
  ASSERT_TRUE(reference.ok()) << reference.status();
  if (!extra_flag.empty()) candidate.add_extra_flags(extra_flag);
  auto kernel = harness::CompiledKernel::Compile(candidate.source(), harness::CandidateFlags(candidate),
                                                 task.signature().function(), (*dir)->path(), "candidate");
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  for (const v1::Binding& b : task.validate()) {
    SCOPED_TRACE(b.name());
    auto want = harness::MakeTaskCall(task, b, /*seed=*/3);
    auto got = harness::MakeTaskCall(task, b, /*seed=*/3);
    ASSERT_TRUE(want.ok() && got.ok());
    (*reference)->Call((*want)->args);
    (*kernel)->Call((*got)->args);
    absl::Status same = harness::CompareOutputs(task, **got, **want);
    EXPECT_TRUE(same.ok()) << same;
  }
}

// gemm_bf16_dot on a CPU without AVX512_BF16 (here: compiled with
// -mno-avx512bf16) multiplies its packed bf16 pairs with shifts and FMAs
// instead of vdpbf16ps, and is as right as with it.
TEST(RecipeTest, GemmBf16DotIsRightWithoutAvx512Bf16) {
  const v1::Task task = LoadStarterTask("matmul_bf16");
  ASSERT_FALSE(task.name().empty());
  const Recipe* recipe = FindRecipe("gemm_bf16_dot");
  ASSERT_NE(recipe, nullptr);
  ASSERT_TRUE(recipe->Applies(task, "cpu"));
  EXPECT_FALSE(recipe->Applies(LoadStarterTask("matmul"), "cpu")) << "f32 operands have no pairs";
  Genome genome{recipe->name(), recipe->space().Defaults()};
  genome.params["kc"] = "64";  // several k blocks on the validation shapes
  absl::StatusOr<v1::Candidate> candidate = recipe->Generate(task, genome);
  ASSERT_TRUE(candidate.ok()) << candidate.status();
  EXPECT_NE(candidate->source().find("__AVX512BF16__"), std::string::npos);
  ExpectRightOnValidation(task, *candidate, "-mno-avx512bf16");
}

// gemm_packed on bf16 operands compiles gemm_bf16_dot's pairs where the
// compiler targets AVX512_BF16 and widens the operands to float32 elsewhere:
// one genome, right both ways (here: as -march=native compiles it, and with
// -mno-avx512bf16).
TEST(RecipeTest, GemmPackedTakesBf16DotsWhereCompiledFor) {
  const v1::Task task = LoadStarterTask("matmul_bf16");
  ASSERT_FALSE(task.name().empty());
  const Recipe* recipe = FindRecipe("gemm_packed");
  ASSERT_NE(recipe, nullptr);
  ASSERT_TRUE(recipe->Applies(task, "cpu"));
  Genome genome{recipe->name(), recipe->space().Defaults()};
  genome.params["kc"] = "64";  // several k blocks on the validation shapes
  absl::StatusOr<v1::Candidate> candidate = recipe->Generate(task, genome);
  ASSERT_TRUE(candidate.ok()) << candidate.status();
  const std::string& source = candidate->source();
  const size_t branch = source.find("#if defined(__AVX512BF16__)");
  ASSERT_NE(branch, std::string::npos);
  EXPECT_NE(source.find("_mm512_dpbf16_ps", branch), std::string::npos) << "the pairs' dot products";
  EXPECT_NE(source.find("zero-padded to NR, as float32", branch), std::string::npos) << "the widened operands";
  ExpectRightOnValidation(task, *candidate, "");
  ExpectRightOnValidation(task, *candidate, "-mno-avx512bf16");
}

// row_norm with a residual add (rms_norm_residual: h = x + residual, y =
// rms_norm(h)): the statistics pass stores h, the writing pass reads it back.
// The default and the corners of its space are right on every validation
// shape (odd and narrow rows take the partial tail of h), and the residual
// hints bind only together, on [rows, cols] f32 tensors.
TEST(RecipeTest, RowNormFusesTheResidualAdd) {
  const v1::Task task = LoadStarterTask("rms_norm_residual");
  ASSERT_FALSE(task.name().empty());
  const Recipe* recipe = FindRecipe("row_norm");
  ASSERT_NE(recipe, nullptr);
  ASSERT_TRUE(recipe->Applies(task, "cpu"));
  EXPECT_THAT(RecipeNames(BuiltinProposer::ApplicableRecipes(task, "cpu")), ::testing::Contains("row_norm"));
  std::vector<Genome> genomes = {Genome{recipe->name(), recipe->space().Defaults()}};
  for (const char* store : {"normal", "nontemporal"}) {
    for (const char* acc : {"1", "4"}) {
      for (const char* threads : {"1", "all"}) {
        Genome g = genomes[0];
        g.params["store"] = store;
        g.params["accumulators"] = acc;
        g.params["threads"] = threads;
        g.params["stats"] = std::string(acc) == "1" ? "one_pass" : "two_pass";  // no matter for RMS norm
        genomes.push_back(std::move(g));
      }
    }
  }
  for (const Genome& genome : genomes) {
    SCOPED_TRACE(genome.ToString());
    absl::StatusOr<v1::Candidate> candidate = recipe->Generate(task, genome);
    ASSERT_TRUE(candidate.ok()) << candidate.status();
    EXPECT_THAT(candidate->source(), HasSubstr("kevo_store(x + c"));
    ExpectRightOnValidation(task, *candidate, "");
  }

  // Both hints or neither; the residual of x's shape, its sum an output.
  auto without = [&](const std::string& key) {
    v1::Task t = task;
    t.mutable_hints()->erase(key);
    return t;
  };
  EXPECT_FALSE(recipe->Applies(without("sum_out"), "cpu")) << "h would go unwritten";
  EXPECT_FALSE(recipe->Applies(without("residual"), "cpu"));
  v1::Task swapped = task;
  (*swapped.mutable_hints())["sum_out"] = "residual";
  EXPECT_FALSE(recipe->Applies(swapped, "cpu")) << "sum_out must be an output";
  v1::Task narrow = task;
  for (v1::TensorSpec& in : *narrow.mutable_inputs()) {
    if (in.name() == "residual") in.set_shape(1, "1");
  }
  EXPECT_FALSE(recipe->Applies(narrow, "cpu")) << "a residual of another shape";
}

// The same for layer norm (a task built here from layer_norm's, with a
// residual whose mean is large against x's spread): two-pass statistics
// centre h read back from cache, and one-pass ones shift by h[0] = x[0] +
// residual[0]. cuda_layer_norm, which has no residual add, does not bind it.
TEST(RecipeTest, RowNormFusesTheResidualAddIntoLayerNorm) {
  v1::Task task = LoadStarterTask("layer_norm");
  ASSERT_FALSE(task.name().empty());
  task.set_name("layer_norm_residual");
  task.mutable_signature()->set_function("layer_norm_residual");
  task.mutable_signature()->clear_params();
  for (const char* p : {"x", "residual", "gamma", "beta", "y", "h", "rows", "cols"}) {
    task.mutable_signature()->add_params(p);
  }
  v1::TensorSpec* residual = task.add_inputs();
  *residual = task.inputs(0);
  residual->set_name("residual");
  residual->mutable_distribution()->mutable_normal()->set_mean(50);
  residual->mutable_distribution()->mutable_normal()->set_stddev(1);
  v1::TensorSpec* h = task.add_outputs();
  *h = task.outputs(0);
  h->set_name("h");
  (*task.mutable_hints())["residual"] = "residual";
  (*task.mutable_hints())["sum_out"] = "h";
  task.mutable_reference()->set_source(R"(
#include <cmath>
#include <cstdint>
extern "C" void layer_norm_residual(const float* x, const float* residual, const float* gamma, const float* beta,
                                    float* y, float* h, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    float* hr = h + r * cols;
    double sum = 0.0;
    for (int64_t c = 0; c < cols; ++c) {
      hr[c] = x[r * cols + c] + residual[r * cols + c];
      sum += hr[c];
    }
    const double mean = sum / static_cast<double>(cols);
    double sq = 0.0;
    for (int64_t c = 0; c < cols; ++c) sq += (hr[c] - mean) * (hr[c] - mean);
    const double inv_std = 1.0 / std::sqrt(sq / static_cast<double>(cols) + 1e-5);
    for (int64_t c = 0; c < cols; ++c) y[r * cols + c] = static_cast<float>((hr[c] - mean) * inv_std * gamma[c] + beta[c]);
  }
}
)");
  const Recipe* recipe = FindRecipe("row_norm");
  ASSERT_NE(recipe, nullptr);
  ASSERT_TRUE(recipe->Applies(task, "cpu"));
  EXPECT_THAT(RecipeNames(BuiltinProposer::ApplicableRecipes(LoadStarterTask("layer_norm"), "nvidia")),
              ::testing::Contains("cuda_layer_norm"));
  EXPECT_THAT(RecipeNames(BuiltinProposer::ApplicableRecipes(task, "nvidia")),
              Not(::testing::Contains("cuda_layer_norm")));
  for (const char* stats : {"two_pass", "one_pass"}) {
    for (const char* store : {"normal", "nontemporal"}) {
      Genome genome{recipe->name(), recipe->space().Defaults()};
      genome.params["stats"] = stats;
      genome.params["store"] = store;
      genome.params["accumulators"] = std::string(stats) == "one_pass" ? "2" : "4";
      SCOPED_TRACE(genome.ToString());
      absl::StatusOr<v1::Candidate> candidate = recipe->Generate(task, genome);
      ASSERT_TRUE(candidate.ok()) << candidate.status();
      ExpectRightOnValidation(task, *candidate, "");
    }
  }
}

// The generic mutator's OpenMP variants on references whose outer loops carry
// state (counts, sums, running offsets, scratch): each variant it generates
// matches the reference on every validation binding, bit for bit on a second
// call (the reductions combine in thread order), and the tasks whose only
// outer loop cannot be shared get no OpenMP variant at all.
struct CarriedStateCase {
  std::string task;
  bool shared;     // whether an outer loop can be shared
  bool reduction;  // whether one becomes a per-thread reduction
};

class GenericOmpTest : public ::testing::TestWithParam<CarriedStateCase> {};

TEST_P(GenericOmpTest, VariantsMatchTheReferenceOrAreNotGenerated) {
  const CarriedStateCase& tc = GetParam();
  const v1::Task task = LoadStarterTask(tc.task);
  ASSERT_FALSE(task.name().empty());
  const Recipe* generic = FindRecipe("generic");
  ASSERT_NE(generic, nullptr);
  ASSERT_TRUE(generic->Applies(task, "cpu"));
  Genome genome{"generic", generic->space().Defaults()};
  genome.params["schedule"] = "dynamic";  // reductions must still partition statically
  absl::StatusOr<v1::Candidate> candidate = generic->Generate(task, genome);
  if (!tc.shared) {
    EXPECT_EQ(candidate.status().code(), absl::StatusCode::kFailedPrecondition)
        << candidate.status() << "\n"
        << (candidate.ok() ? candidate->source() : "");
    return;
  }
  ASSERT_TRUE(candidate.ok()) << candidate.status();
  EXPECT_EQ(candidate->source().find("kevo_part_") != std::string::npos, tc.reduction) << candidate->source();
  auto dir = harness::TempDir::Create("kevo_generic_omp_");
  ASSERT_TRUE(dir.ok()) << dir.status();
  auto reference = harness::CompiledKernel::Compile(task.reference().source(), harness::ReferenceFlags(),
                                                    task.signature().function(), (*dir)->path(), "ref");
  ASSERT_TRUE(reference.ok()) << reference.status();
  auto kernel = harness::CompiledKernel::Compile(candidate->source(), harness::CandidateFlags(*candidate),
                                                 task.signature().function(), (*dir)->path(), "omp");
  ASSERT_TRUE(kernel.ok()) << kernel.status() << "\n" << candidate->source();
  for (const v1::Binding& b : task.validate()) {
    SCOPED_TRACE(b.name());
    auto want = harness::MakeTaskCall(task, b, /*seed=*/2);
    auto got = harness::MakeTaskCall(task, b, /*seed=*/2);
    ASSERT_TRUE(want.ok() && got.ok());
    (*reference)->Call((*want)->args);
    (*kernel)->Call((*got)->args);
    EXPECT_TRUE(harness::CompareOutputs(task, **got, **want).ok()) << harness::CompareOutputs(task, **got, **want);
    std::vector<std::string> first;
    for (const auto& o : (*got)->outputs) first.emplace_back(static_cast<const char*>(o->data), o->size);
    (*got)->PoisonOutputs(task);
    (*kernel)->Call((*got)->args);
    for (size_t i = 0; i < first.size(); ++i) {
      EXPECT_EQ(std::memcmp(first[i].data(), (*got)->outputs[i]->data, first[i].size()), 0)
          << "output " << i << " differs between two calls";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(CarriedState, GenericOmpTest,
                         ::testing::Values(CarriedStateCase{"cast_i64_i32", true, true},
                                           CarriedStateCase{"cross_entropy", true, true},
                                           CarriedStateCase{"mse_loss", true, true},
                                           CarriedStateCase{"jagged_truncate", true, false},
                                           CarriedStateCase{"topk_truncate", true, false},
                                           CarriedStateCase{"embedding_bag_sum", false, false},
                                           CarriedStateCase{"bmm_gelu_rmsnorm_bmm", false, false},
                                           CarriedStateCase{"fm_interaction", false, false}),
                         [](const ::testing::TestParamInfo<CarriedStateCase>& info) { return info.param.task; });

INSTANTIATE_TEST_SUITE_P(HintedTasks, RecipeCorrectnessTest, ::testing::ValuesIn(HintedTasks()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

// For a test that calls a recipe's kernels by hand: the task's reference and
// each genome's candidate (first checked right on the validation shapes),
// compiled into a fresh folder; a failure is reported and leaves `kernels`
// short of the genomes.
struct HandCalls {
  std::unique_ptr<harness::TempDir> dir;
  std::unique_ptr<harness::CompiledKernel> reference;
  std::vector<std::unique_ptr<harness::CompiledKernel>> kernels;  // one per genome
};

void CompileForHandCalls(const v1::Task& task, const Recipe& recipe, const std::vector<Genome>& genomes,
                         HandCalls* calls) {
  auto dir = harness::TempDir::Create(absl::StrCat("kevo_", recipe.name(), "_"));
  ASSERT_TRUE(dir.ok()) << dir.status();
  calls->dir = *std::move(dir);
  auto reference = harness::CompiledKernel::Compile(task.reference().source(), harness::ReferenceFlags(),
                                                    task.signature().function(), calls->dir->path(), "ref");
  ASSERT_TRUE(reference.ok()) << reference.status();
  calls->reference = *std::move(reference);
  for (size_t i = 0; i < genomes.size(); ++i) {
    SCOPED_TRACE(genomes[i].ToString());
    absl::StatusOr<v1::Candidate> candidate = recipe.Generate(task, genomes[i]);
    ASSERT_TRUE(candidate.ok()) << candidate.status();
    ExpectRightOnValidation(task, *candidate, "");
    auto kernel =
        harness::CompiledKernel::Compile(candidate->source(), harness::CandidateFlags(*candidate),
                                         task.signature().function(), calls->dir->path(), absl::StrCat("c", i));
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    calls->kernels.push_back(*std::move(kernel));
  }
}

// map_id_lut: a per-call lookup table narrows each id's lower bound to a
// window searched branch-free, a batch of ids a step at a time. The default
// and the corners of its space are right on every validation shape (repeated
// keys, one key, a depth that is not a power of two), and, on keys at the
// ends of int64 (a range of 2^64 - 1, where the table has one cell), exactly
// the reference's answer for ids below, between, on and above the keys.
TEST(RecipeTest, MapIdLutIsTheReferencesLookup) {
  const v1::Task task = LoadStarterTask("map_id");
  ASSERT_FALSE(task.name().empty());
  const Recipe* recipe = FindRecipe("map_id_lut");
  ASSERT_NE(recipe, nullptr);
  EXPECT_THAT(RecipeNames(BuiltinProposer::ApplicableRecipes(task, "cpu")),
              UnorderedElementsAre("map_id_lut", "generic"));
  std::vector<Genome> genomes = {Genome{recipe->name(), recipe->space().Defaults()}};
  for (const char* table : {"none", "nk_div_4", "nk_x4"}) {
    for (const char* batch : {"1", "128"}) {
      Genome g = genomes[0];
      g.params["table"] = table;
      g.params["batch"] = batch;
      g.params["threads"] = std::string(batch) == "1" ? "1" : "all";
      genomes.push_back(std::move(g));
    }
  }
  HandCalls calls;
  CompileForHandCalls(task, *recipe, genomes, &calls);
  ASSERT_EQ(calls.kernels.size(), genomes.size());
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min(), kMax = std::numeric_limits<int64_t>::max();
  const std::vector<int64_t> keys = {kMin, kMin, -5, 0, 7, 7, 7, kMax - 1, kMax};
  const std::vector<int64_t> values = {11, 12, 13, 14, 15, 16, 17, 18, 19};
  const std::vector<int64_t> ids = {kMin, kMin + 1, -6, -5, -1, 0, 1, 6, 7, 8, kMax - 2, kMax - 1, kMax, 7, kMin};
  auto lookup = [&](const harness::CompiledKernel& kernel) {
    std::vector<int64_t> out(ids.size(), -1);
    kernel.Call({reinterpret_cast<intptr_t>(ids.data()), reinterpret_cast<intptr_t>(keys.data()),
                 reinterpret_cast<intptr_t>(values.data()), reinterpret_cast<intptr_t>(out.data()),
                 static_cast<intptr_t>(ids.size()), static_cast<intptr_t>(keys.size())});
    return out;
  };
  const std::vector<int64_t> want = lookup(*calls.reference);
  EXPECT_THAT(want, ElementsAre(11, 0, 0, 13, 0, 14, 0, 0, 15, 0, 0, 18, 19, 15, 11));
  for (size_t i = 0; i < genomes.size(); ++i) {
    SCOPED_TRACE(genomes[i].ToString());
    EXPECT_EQ(lookup(*calls.kernels[i]), want);
  }
}

// elementwise with vector_math=inline (the default) puts kevo's own erff
// approximation in gelu_erf's simd loop instead of libmvec's erff: right on
// the validation shapes, and within 2e-6 of GELU computed in double over a
// fine grid of [-8, 8] and beyond; +inf and NaN go through.
TEST(RecipeTest, ElementwiseInlineErfIsGeluToFloatTolerance) {
  const v1::Task task = LoadStarterTask("gelu_erf");
  ASSERT_FALSE(task.name().empty());
  const Recipe* recipe = FindRecipe("elementwise");
  ASSERT_NE(recipe, nullptr);
  Genome genome{recipe->name(), recipe->space().Defaults()};
  ASSERT_EQ(genome.params["vector_math"], "inline");
  absl::StatusOr<v1::Candidate> candidate = recipe->Generate(task, genome);
  ASSERT_TRUE(candidate.ok()) << candidate.status();
  EXPECT_THAT(candidate->source(), HasSubstr("kevo_erff(x * 0.70710678f)"));
  EXPECT_THAT(candidate->source(), Not(HasSubstr("extern \"C\" float erff")));
  ExpectRightOnValidation(task, *candidate, "");
  genome.params["vector_math"] = "libmvec";
  absl::StatusOr<v1::Candidate> libmvec = recipe->Generate(task, genome);
  ASSERT_TRUE(libmvec.ok()) << libmvec.status();
  EXPECT_THAT(libmvec->source(), Not(HasSubstr("kevo_erff")));

  auto dir = harness::TempDir::Create("kevo_inline_erf_");
  ASSERT_TRUE(dir.ok()) << dir.status();
  auto kernel = harness::CompiledKernel::Compile(candidate->source(), harness::CandidateFlags(*candidate),
                                                 task.signature().function(), (*dir)->path(), "gelu");
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  std::vector<float> x;
  for (int64_t i = -800000; i <= 800000; ++i) x.push_back(static_cast<float>(i) * 1e-5f);
  const float inf = std::numeric_limits<float>::infinity();
  x.insert(x.end(), {inf, std::numeric_limits<float>::quiet_NaN(), 1e-30f, -1e-30f, 30.0f, -30.0f});
  std::vector<float> y(x.size(), 0.0f);
  (*kernel)->Call(
      {reinterpret_cast<intptr_t>(x.data()), reinterpret_cast<intptr_t>(y.data()), static_cast<intptr_t>(x.size())});
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    if (std::isnan(v)) {
      EXPECT_TRUE(std::isnan(y[i]));
      continue;
    }
    if (std::isinf(v)) {
      EXPECT_EQ(y[i], inf);
      continue;
    }
    const double want = 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
    worst = std::max(worst, std::abs(y[i] - want) / (1e-6 + 1e-6 * std::abs(want)));
  }
  EXPECT_LE(worst, 2.0) << "the largest error, in units of 1e-6 + 1e-6 |y|";
}

// topk_rows: its default and the corners of its space right on every
// validation shape, and bit for bit the reference's rows on a hand-made call:
// scores from {-inf, -1, -0, +0, 1, 2, +inf} (many ties, and the zeros
// equal), one row with a NaN (the reference's loop decides its place), 100
// columns (six vectors and a tail), k from 1 to past cols.
TEST(RecipeTest, TopkRowsIsTheReferencesOrder) {
  const v1::Task task = LoadStarterTask("topk_truncate");
  ASSERT_FALSE(task.name().empty());
  const Recipe* recipe = FindRecipe("topk_rows");
  ASSERT_NE(recipe, nullptr);
  EXPECT_THAT(RecipeNames(BuiltinProposer::ApplicableRecipes(task, "cpu")),
              UnorderedElementsAre("topk_rows", "generic"));
  std::vector<Genome> genomes = {Genome{recipe->name(), recipe->space().Defaults()}};
  for (const char* select : {"insert", "rank"}) {
    for (const char* floor_sets : {"0", "1", "4"}) {
      Genome g = genomes[0];
      g.params["select"] = select;
      g.params["floor_sets"] = floor_sets;
      g.params["buffer"] = std::string(floor_sets) == "1" ? "4" : "2";
      g.params["threads"] = std::string(floor_sets) == "0" ? "1" : "all";
      genomes.push_back(std::move(g));
    }
  }
  HandCalls calls;
  CompileForHandCalls(task, *recipe, genomes, &calls);
  ASSERT_EQ(calls.kernels.size(), genomes.size());
  constexpr int64_t kRows = 7, kCols = 100;
  const float kInf = std::numeric_limits<float>::infinity();
  const float values[] = {-kInf, -1.0f, -0.0f, 0.0f, 1.0f, 2.0f, kInf};
  std::mt19937 rng(7);
  std::vector<int64_t> ids(kRows * kCols);
  std::vector<float> scores(kRows * kCols);
  for (int64_t i = 0; i < kRows * kCols; ++i) {
    ids[i] = static_cast<int64_t>(rng() % 1000) * 1000 + i;
    scores[i] = values[rng() % 7];
  }
  scores[3 * kCols + 42] = std::numeric_limits<float>::quiet_NaN();
  // Slots the kernel leaves alone (k > cols) keep the fill, on both sides.
  auto top = [&](const harness::CompiledKernel& kernel, int64_t k) {
    std::vector<int64_t> top_ids(kRows * k, -1);
    std::vector<float> top_scores(kRows * k, -7.0f);
    kernel.Call({reinterpret_cast<intptr_t>(ids.data()), reinterpret_cast<intptr_t>(scores.data()),
                 reinterpret_cast<intptr_t>(top_ids.data()), reinterpret_cast<intptr_t>(top_scores.data()), kRows,
                 kCols, static_cast<intptr_t>(k)});
    std::vector<int64_t> bits = top_ids;
    for (float f : top_scores) {
      uint32_t u;
      std::memcpy(&u, &f, sizeof(u));
      bits.push_back(u);
    }
    return bits;
  };
  const std::vector<int64_t> ks = {1, 5, 20, 33, kCols, kCols + 20};
  std::vector<std::vector<int64_t>> want;
  for (int64_t k : ks) want.push_back(top(*calls.reference, k));
  for (size_t i = 0; i < genomes.size(); ++i) {
    SCOPED_TRACE(genomes[i].ToString());
    for (size_t j = 0; j < ks.size(); ++j) EXPECT_EQ(top(*calls.kernels[i], ks[j]), want[j]) << "k = " << ks[j];
  }
  // Where the compiler has no AVX-512 (a Zen 3 host, say), the scalar path
  // of each select is right too.
  for (size_t i = 0; i < 2; ++i) {
    Genome g = genomes[i == 0 ? 0 : 1];
    SCOPED_TRACE(g.ToString());
    absl::StatusOr<v1::Candidate> candidate = recipe->Generate(task, g);
    ASSERT_TRUE(candidate.ok()) << candidate.status();
    ExpectRightOnValidation(task, *candidate, "-mno-avx512f");
  }
}

// elementwise_rows takes an elementwise task whose inputs include vectors
// along the last dimension (box_cox's per-feature lambda), which
// `elementwise` does not bind: every genome is right on the validation shapes,
// `pow=exp_log` writes powf(x, lmbda) as expf(lmbda * logf(x)), and tasks
// without a broadcast input are left to `elementwise`.
TEST(RecipeTest, ElementwiseRowsBroadcastsPerColumnVectors) {
  const v1::Task task = LoadStarterTask("box_cox");
  ASSERT_FALSE(task.name().empty());
  EXPECT_THAT(RecipeNames(BuiltinProposer::ApplicableRecipes(task, "cpu")),
              UnorderedElementsAre("elementwise_rows", "generic"));
  EXPECT_THAT(RecipeNames(BuiltinProposer::ApplicableRecipes(LoadStarterTask("vector_add"), "cpu")),
              Not(::testing::Contains("elementwise_rows")));
  const Recipe* recipe = FindRecipe("elementwise_rows");
  ASSERT_NE(recipe, nullptr);
  for (const char* pow : {"exp_log", "libm"}) {
    for (const char* math : {"libmvec", "off"}) {
      for (const char* threads : {"1", "all"}) {
        Genome genome{recipe->name(), recipe->space().Defaults()};
        genome.params["pow"] = pow;
        genome.params["vector_math"] = math;
        genome.params["threads"] = threads;
        SCOPED_TRACE(genome.ToString());
        absl::StatusOr<v1::Candidate> candidate = recipe->Generate(task, genome);
        ASSERT_TRUE(candidate.ok()) << candidate.status();
        if (std::string(pow) == "exp_log") {
          EXPECT_THAT(candidate->source(), HasSubstr("expf(( lmbda) * logf(x))"));
          EXPECT_THAT(candidate->source(), Not(HasSubstr("powf(")));
        } else {
          EXPECT_THAT(candidate->source(), HasSubstr("powf(x, lmbda)"));
        }
        EXPECT_THAT(candidate->source(), HasSubstr("lmbda[kevo_c]"));
        ExpectRightOnValidation(task, *candidate, "");
      }
    }
  }
}

// gemm_packed_ex spreads batch entries over the threads only for a batched
// task, at run time only with at least two entries a thread; a single GEMM
// keeps the GEMM's own parallel loop outside any parallel region (an
// `if (false)` region around it left that loop nested, on one thread:
// matmul_bt ran at 0.18x of OpenBLAS). Both right on the validation shapes.
TEST(RecipeTest, GemmPackedExSplitsBatchEntriesOnlyWhenBatched) {
  const Recipe* recipe = FindRecipe("gemm_packed_ex");
  ASSERT_NE(recipe, nullptr);
  const Genome genome{recipe->name(), recipe->space().Defaults()};
  for (const char* name : {"matmul_batched", "matmul_bt"}) {
    SCOPED_TRACE(name);
    const v1::Task task = LoadStarterTask(name);
    absl::StatusOr<v1::Candidate> candidate = recipe->Generate(task, genome);
    ASSERT_TRUE(candidate.ok()) << candidate.status();
    const std::string& source = candidate->source();
    const bool batched = std::string(name) == "matmul_batched";
    EXPECT_EQ(source.find("if (kevo_batch >= 2 * omp_get_max_threads())") != std::string::npos, batched);
    EXPECT_THAT(source, Not(HasSubstr(") if (kevo_batch"))) << "no if clause on a parallel region";
    ExpectRightOnValidation(task, *candidate, "");
  }
}

}  // namespace
}  // namespace kevo::proposer
