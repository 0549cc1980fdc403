// The built-in MTIA recipes through the real mtia-sim evaluation pipeline
// (worker/backends/mtia_sim: sandboxed g++ against mtia.h, import policy,
// kevo-runner-mtia validation on every seed and binding, simulated-time
// profile against the task's reference_mtia.cc): on platform mtia-sim only
// MTIA recipes apply, they propose "mtia-c++" candidates, the first
// default genome and two random points of each applicable recipe evaluate OK
// and beat the task's naive reference_mtia.cc in simulated time (the default
// by 3x or more), and the elementwise expression compiler is correct on the
// tasks that have no MTIA baseline. KEVO_SOURCE_DIR and
// KEVO_BIN_DIR (set by kevo_cc_test) locate the tasks and kevo-runner-mtia.
#include <cstdlib>
#include <filesystem>
#include <map>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

#include "common/task/task_loader.h"
#include "coordinator/proposer/builtin/builtin_proposer.h"
#include "coordinator/proposer/builtin/recipe.h"
#include "worker/backends/mtia_sim/mtia_backend.h"

namespace kevo::proposer {
namespace {

std::string Env(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}

std::string BinDir() {
  return Env("KEVO_BIN_DIR", (std::filesystem::read_symlink("/proc/self/exe").parent_path() / ".." / "bin").string());
}

v1::Task Load(const std::string& name) {
  absl::StatusOr<v1::Task> task = task::LoadTaskDir(absl::StrCat(Env("KEVO_SOURCE_DIR", "."), "/tasks/", name));
  EXPECT_TRUE(task.ok()) << task.status();
  return task.ok() ? *task : v1::Task();
}

// `task` with a smaller timed binding, so that the profile stage (candidate
// and naive baseline simulated at the timed shape) stays quick; validation is
// unchanged. docs/benchmarks.md has the figures at the tasks' own shapes.
void ShrinkTimedShape(v1::Task& task) {
  static const std::map<std::string, std::map<std::string, int64_t>> kSmaller = {
      {"matmul", {{"M", 256}, {"N", 256}, {"K", 256}}},
      {"bucketize", {{"n", 1 << 20}}},
      {"embedding_bag_sum", {{"B", 2048}}},
      {"embedding_bag_mean", {{"B", 2048}}},
  };
  auto it = kSmaller.find(task.name());
  if (it != kSmaller.end()) {
    for (const auto& [k, v] : it->second) (*task.mutable_time()->mutable_values())[k] = v;
  } else if (task.time().values().count("n")) {
    (*task.mutable_time()->mutable_values())["n"] = 1 << 20;  // elementwise
  }
}

// The real mtia-sim backend, with the runner built beside this test.
auto NewBackend() {
  worker::MtiaBackendOptions o;
  o.work_dir = BinDir() + "/../tests/mtia_recipes_backend_test.work";
  o.runner_path = BinDir() + "/kevo-runner-mtia";
  o.memory_limit_bytes = int64_t{4} << 30;
  return worker::CreateMtiaBackend(o);
}

TEST(MtiaRecipesTest, OnlyMtiaRecipesApplyOnMtiaSimAndTheyProposeMtiaCandidates) {
  for (const char* name : {"softmax", "row_sum", "matmul", "bucketize", "embedding_bag_sum", "embedding_bag_mean",
                           // Every elementwise task: the expression compiler lowers each of them.
                           "vector_add", "relu", "leaky_relu", "elu", "selu", "hardtanh", "hardsigmoid", "sigmoid",
                           "silu", "tanh", "softplus", "softsign", "gelu_tanh", "gelu_erf"}) {
    const v1::Task task = Load(name);
    const std::vector<const Recipe*> recipes = BuiltinProposer::ApplicableRecipes(task, "mtia-sim");
    ASSERT_EQ(recipes.size(), 1u) << name;
    EXPECT_EQ(recipes[0]->name().rfind("mtia_", 0), 0u) << recipes[0]->name();
    for (const Recipe* r : BuiltinProposer::ApplicableRecipes(task, "cpu")) {
      EXPECT_NE(r->name().rfind("mtia_", 0), 0u) << r->name() << " applies on cpu";
    }
    BuiltinProposer proposer;
    ProposeRequest req;
    req.task = &task;
    req.platform = "mtia-sim";
    req.count = 6;
    auto proposals = proposer.Propose(req);
    ASSERT_TRUE(proposals.ok()) << proposals.status();
    ASSERT_EQ(proposals->size(), 6u);
    for (const Proposal& p : *proposals) {
      EXPECT_EQ(p.candidate.language(), "mtia-c++");
      EXPECT_NE(p.candidate.source().find("kevo_mtia_launch"), std::string::npos);
    }
  }
}

class MtiaRecipesOnBackendTest : public ::testing::TestWithParam<std::string> {};

TEST_P(MtiaRecipesOnBackendTest, DefaultAndRandomPointsEvaluateOkAndBeatTheBaseline) {
  v1::Task task = Load(GetParam());
  ShrinkTimedShape(task);
  auto backend = NewBackend();
  ASSERT_TRUE(backend.ok()) << backend.status();

  int evaluated = 0;
  std::mt19937_64 rng(7);
  for (const Recipe* recipe : BuiltinProposer::ApplicableRecipes(task, "mtia-sim")) {
    std::vector<Genome> genomes = {Genome{recipe->name(), recipe->space().Defaults()}};
    for (int i = 0; i < 2; ++i) genomes.push_back(Genome{recipe->name(), recipe->space().Random(rng)});
    for (size_t i = 0; i < genomes.size(); ++i) {
      const Genome& genome = genomes[i];
      absl::StatusOr<v1::Candidate> candidate = recipe->Generate(task, genome);
      ASSERT_TRUE(candidate.ok()) << candidate.status();
      v1::Evaluation ev = (*backend)->Evaluate(task, *candidate, nullptr);
      EXPECT_EQ(ev.status(), v1::OK) << genome.ToString() << ": " << v1::EvalStatus_Name(ev.status()) << ": "
                                     << ev.diagnostics().message()
                                     << " | compiler=" << ev.diagnostics().compiler_output().substr(0, 1500);
      // Every point beats the naive single-PE baseline in simulated time; the
      // default genome (64 PEs, double-buffered) by far. Streams whose
      // baseline already moves a third of what DRAM can (vector_add) cannot
      // gain 3x, hence 2x for the tasks that are not row-wise.
      EXPECT_GT(ev.speedup(), 1.0) << genome.ToString();
      const bool rows = GetParam() == "softmax" || GetParam() == "row_sum";
      if (i == 0) {
        EXPECT_GE(ev.speedup(), rows ? 3.0 : 2.0) << genome.ToString();
      }
      ++evaluated;
    }
  }
  EXPECT_GE(evaluated, 3);
}

// The expression compiler on the elementwise tasks without a naive baseline
// that exercise its features (conditionals, nested ones, expm1f, log1pf and
// fmaxf, a conditional inside a division, erff), validated against the task's
// C++ reference on all bindings and seeds. A task without a naive
// reference_mtia.cc gets the candidate itself as its MTIA baseline (speedup
// 1; only correctness is under test here).
class MtiaElementwiseCompilerTest : public ::testing::TestWithParam<std::string> {};

TEST_P(MtiaElementwiseCompilerTest, DefaultGenomeValidates) {
  v1::Task task = Load(GetParam());
  ShrinkTimedShape(task);
  const Recipe* recipe = FindRecipe("mtia_elementwise");
  ASSERT_NE(recipe, nullptr);
  ASSERT_TRUE(recipe->Applies(task, "mtia-sim"));
  absl::StatusOr<v1::Candidate> candidate = recipe->Generate(task, Genome{recipe->name(), recipe->space().Defaults()});
  ASSERT_TRUE(candidate.ok()) << candidate.status();
  bool has_baseline = false;
  for (const v1::Reference& r : task.extra_references()) has_baseline |= r.language() == "mtia-c++";
  if (!has_baseline) {
    v1::Reference* r = task.add_extra_references();
    r->set_language("mtia-c++");
    r->set_file("reference_mtia.cc");
    r->set_source(candidate->source());
  }
  auto backend = NewBackend();
  ASSERT_TRUE(backend.ok()) << backend.status();
  v1::Evaluation ev = (*backend)->Evaluate(task, *candidate, nullptr);
  EXPECT_EQ(ev.status(), v1::OK) << v1::EvalStatus_Name(ev.status()) << ": " << ev.diagnostics().message()
                                 << " | source:\n"
                                 << candidate->source();
}

INSTANTIATE_TEST_SUITE_P(ElementwiseTasks, MtiaElementwiseCompilerTest,
                         ::testing::Values("leaky_relu", "hardsigmoid", "selu", "softplus", "softsign", "gelu_erf"));

INSTANTIATE_TEST_SUITE_P(StarterTasks, MtiaRecipesOnBackendTest,
                         ::testing::Values("softmax", "row_sum", "vector_add", "relu", "gelu_tanh", "silu", "matmul",
                                           "bucketize", "embedding_bag_sum", "embedding_bag_mean"));

}  // namespace
}  // namespace kevo::proposer
