// End-to-end check of the built-in recipes through the real CPU evaluation
// pipeline (worker/backends/cpu: sandboxed compile, imported-symbol policy,
// kevo-runner-cpu validation on every seed and binding, determinism and
// input checks, profile): the first-generation genomes of every recipe that
// applies to each starter task (defaults and their seed overrides) must
// evaluate OK. KEVO_SOURCE_DIR and KEVO_BIN_DIR (set by kevo_cc_test) locate
// the tasks and kevo-runner-cpu.
#include <cstdlib>
#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/task/task_loader.h"
#include "coordinator/proposer/builtin/builtin_proposer.h"
#include "coordinator/proposer/builtin/recipe.h"
#include "gtest/gtest.h"
#include "worker/backends/cpu/cpu_backend.h"

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

class RecipesOnCpuBackendTest : public ::testing::TestWithParam<std::string> {};

TEST_P(RecipesOnCpuBackendTest, FirstGenerationEvaluatesOk) {
  absl::StatusOr<v1::Task> task =
      task::LoadTaskDir(absl::StrCat(Env("KEVO_SOURCE_DIR", "."), "/tasks/", GetParam()));
  ASSERT_TRUE(task.ok()) << task.status();
  // The reference is only the baseline here; shrink the timed binding so that
  // a slow reference (matmul: seconds) does not dominate the test.
  v1::Binding timed = task->validate(0);
  timed.set_name("timed");
  *task->mutable_time() = timed;

  worker::CpuBackendOptions o;
  o.work_dir = BinDir() + "/../tests/builtin_recipes_backend_test.work";
  o.runner_path = BinDir() + "/kevo-runner-cpu";
  o.run_timeout = absl::Seconds(20);
  o.memory_limit_bytes = int64_t{4} << 30;
  o.profile_time_cap_s = 0.2;
  o.calibrate = false;
  auto backend = worker::CreateCpuBackend(o);
  ASSERT_TRUE(backend.ok()) << backend.status();

  int evaluated = 0;
  for (const Recipe* recipe : BuiltinProposer::ApplicableRecipes(*task, "cpu")) {
    std::vector<Genome> genomes = {Genome{recipe->name(), recipe->space().Defaults()}};
    for (const auto& overrides : recipe->SeedOverrides()) {
      Genome g = genomes[0];
      for (const auto& [k, v] : overrides) g.params[k] = v;
      genomes.push_back(g);
    }
    for (const Genome& genome : genomes) {
      absl::StatusOr<v1::Candidate> candidate = recipe->Generate(*task, genome);
      ASSERT_TRUE(candidate.ok()) << candidate.status();
      v1::Evaluation ev = (*backend)->Evaluate(*task, *candidate, nullptr);
      EXPECT_EQ(ev.status(), v1::OK)
          << genome.ToString() << ": " << v1::EvalStatus_Name(ev.status()) << ": "
          << ev.diagnostics().message() << " | violation=" << ev.diagnostics().violation()
          << " | compiler=" << ev.diagnostics().compiler_output().substr(0, 800);
      EXPECT_GT(ev.speedup(), 0) << genome.ToString();
      ++evaluated;
    }
  }
  EXPECT_GE(evaluated, 4);
}

INSTANTIATE_TEST_SUITE_P(StarterTasks, RecipesOnCpuBackendTest,
                         ::testing::Values("vector_add", "softmax", "row_sum", "matmul",
                                           "bucketize"));

}  // namespace
}  // namespace kevo::proposer
