// The built-in MTIA recipes through the real mtia-sim evaluation pipeline
// (worker/backends/mtia_sim: sandboxed g++ against mtia.h, import policy,
// kevo-runner-mtia validation on every seed and binding, simulated-time
// profile against the task's reference_mtia.cc): on platform mtia-sim only
// MTIA recipes apply, they propose "mtia-c++" candidates, the first
// generation (defaults and seed overrides) evaluates OK, and every point of a
// sample of each space generates a correct kernel. KEVO_SOURCE_DIR and
// KEVO_BIN_DIR (set by kevo_cc_test) locate the tasks and kevo-runner-mtia.
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/task/task_loader.h"
#include "coordinator/proposer/builtin/builtin_proposer.h"
#include "coordinator/proposer/builtin/recipe.h"
#include "gtest/gtest.h"
#include "worker/backends/mtia_sim/mtia_backend.h"

namespace kevo::proposer {
namespace {

std::string Env(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}

std::string BinDir() {
  return Env("KEVO_BIN_DIR",
             (std::filesystem::read_symlink("/proc/self/exe").parent_path() / ".." / "bin").string());
}

v1::Task Load(const std::string& name) {
  absl::StatusOr<v1::Task> task = task::LoadTaskDir(absl::StrCat(Env("KEVO_SOURCE_DIR", "."), "/tasks/", name));
  EXPECT_TRUE(task.ok()) << task.status();
  return task.ok() ? *task : v1::Task();
}

TEST(MtiaRecipesTest, OnlyMtiaRecipesApplyOnMtiaSimAndTheyProposeMtiaCandidates) {
  for (const char* name : {"softmax", "row_sum"}) {
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

TEST_P(MtiaRecipesOnBackendTest, FirstGenerationAndRandomPointsEvaluateOk) {
  v1::Task task = Load(GetParam());
  worker::MtiaBackendOptions o;
  o.work_dir = BinDir() + "/../tests/mtia_recipes_backend_test.work";
  o.runner_path = BinDir() + "/kevo-runner-mtia";
  o.memory_limit_bytes = int64_t{4} << 30;
  auto backend = worker::CreateMtiaBackend(o);
  ASSERT_TRUE(backend.ok()) << backend.status();

  int evaluated = 0;
  std::mt19937_64 rng(7);
  for (const Recipe* recipe : BuiltinProposer::ApplicableRecipes(task, "mtia-sim")) {
    std::vector<Genome> genomes = {Genome{recipe->name(), recipe->space().Defaults()}};
    for (const auto& overrides : recipe->SeedOverrides()) {
      Genome g = genomes[0];
      for (const auto& [k, v] : overrides) g.params[k] = v;
      genomes.push_back(g);
    }
    for (int i = 0; i < 3; ++i) genomes.push_back(Genome{recipe->name(), recipe->space().Random(rng)});
    for (size_t i = 0; i < genomes.size(); ++i) {
      const Genome& genome = genomes[i];
      absl::StatusOr<v1::Candidate> candidate = recipe->Generate(task, genome);
      ASSERT_TRUE(candidate.ok()) << candidate.status();
      v1::Evaluation ev = (*backend)->Evaluate(task, *candidate, nullptr);
      EXPECT_EQ(ev.status(), v1::OK)
          << genome.ToString() << ": " << v1::EvalStatus_Name(ev.status()) << ": "
          << ev.diagnostics().message() << " | compiler=" << ev.diagnostics().compiler_output().substr(0, 1500);
      // The default genome (64 PEs, double-buffered) is far faster than the
      // naive single-PE baseline.
      if (i == 0) EXPECT_GE(ev.speedup(), 3.0) << genome.ToString();
      ++evaluated;
    }
  }
  EXPECT_GE(evaluated, 6);
}

INSTANTIATE_TEST_SUITE_P(StarterTasks, MtiaRecipesOnBackendTest, ::testing::Values("softmax", "row_sum"));

}  // namespace
}  // namespace kevo::proposer
