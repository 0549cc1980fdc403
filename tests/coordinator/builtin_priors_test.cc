// Skill priors change the builtin proposer's choices (ProposeRequest::priors):
// a winning genome is seeded first, favoured parameter values are seeded and
// chosen more often by mutations, skill seeds name their skills and take turns
// with the proposer's own seeds, and without priors nothing changes.
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "common/task/task_loader.h"
#include "coordinator/proposer/builtin/builtin_proposer.h"

namespace kevo::proposer {
namespace {

std::string SourceDir() {
  const char* dir = std::getenv("KEVO_SOURCE_DIR");
  return dir != nullptr && *dir ? dir : ".";
}

class BuiltinPriorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto task = task::LoadTaskDir(absl::StrCat(SourceDir(), "/tasks/gelu_erf"));
    ASSERT_TRUE(task.ok()) << task.status();
    task_ = *std::move(task);
  }

  std::vector<Proposal> Propose(std::map<std::string, double> priors, int count, std::vector<ParentInfo> parents = {},
                                uint64_t seed = 1) {
    ProposeRequest req;
    req.task = &task_;
    req.platform = "cpu";
    req.count = count;
    req.seed = seed;
    req.priors = std::move(priors);
    req.parents = std::move(parents);
    auto out = BuiltinProposer().Propose(req);
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? *out : std::vector<Proposal>{};
  }

  // How many of `n` single mutations of the default genome set fast_math=on.
  int FastMathMoves(const std::map<std::string, double>& priors, int n) {
    const Recipe* recipe = FindRecipe("elementwise");
    ParentInfo parent;
    parent.node_id = "n0";
    parent.genome = Genome{"elementwise", recipe->space().Defaults()};
    parent.fitness = 1;
    int hits = 0;
    for (int seed = 0; seed < n; ++seed) {
      for (const Proposal& p : Propose(priors, 1, {parent}, seed)) {
        hits += p.genome.recipe == "elementwise" && p.genome.params.at("fast_math") == "on";
      }
    }
    return hits;
  }

  v1::Task task_;
};

TEST_F(BuiltinPriorsTest, WinningGenomeIsSeededFirst) {
  const Recipe* recipe = FindRecipe("elementwise");
  ASSERT_NE(recipe, nullptr);
  Genome won{"elementwise", recipe->space().Defaults()};
  won.params["fast_math"] = "on";
  won.params["threads"] = "1";
  won.params["unroll"] = "8";
  std::vector<Proposal> with = Propose({{"genome:" + won.ToString(), 3.0}}, 3);
  ASSERT_FALSE(with.empty());
  EXPECT_EQ(with.front().genome.ToString(), won.ToString());
  EXPECT_EQ(with.front().mutation, SkillSeedLabel({"genome:" + won.ToString()}));

  std::vector<Proposal> without = Propose({}, 3);
  ASSERT_FALSE(without.empty());
  EXPECT_EQ(without.front().genome.ToString(), (Genome{"elementwise", recipe->space().Defaults()}).ToString());
  EXPECT_EQ(without.front().mutation, "seed");
}

TEST_F(BuiltinPriorsTest, FavouredParameterValuesAreSeeded) {
  std::vector<Proposal> with = Propose({{"param:fast_math=on", 2.0}, {"param:threads=1", 1.5}}, 2);
  ASSERT_FALSE(with.empty());
  EXPECT_THAT(SkillSeedKeys(with.front().mutation),
              ::testing::UnorderedElementsAre("param:fast_math=on", "param:threads=1"));
  EXPECT_EQ(with.front().genome.params.at("fast_math"), "on");
  EXPECT_EQ(with.front().genome.params.at("threads"), "1");
}

TEST_F(BuiltinPriorsTest, OwnSeedsKeepTheirTurnsUnderStrongPriors) {
  const Recipe* recipe = FindRecipe("elementwise");
  ASSERT_NE(recipe, nullptr);
  // Strong priors for two winning genomes, two parameter values and every
  // recipe: more skill seeds than a short budget has evaluations.
  std::map<std::string, double> priors = {{"param:fast_math=on", 8.0}, {"param:unroll=8", 8.0}};
  for (const char* threads : {"1", "all"}) {
    Genome g{"elementwise", recipe->space().Defaults()};
    g.params["threads"] = threads;
    g.params["fast_math"] = "on";
    priors["genome:" + g.ToString()] = 8.0;
  }
  for (const Recipe* r : BuiltinProposer::ApplicableRecipes(task_, "cpu")) priors[r->name()] = 8.0;
  const std::vector<Proposal> own = Propose({}, 6);
  const std::vector<Proposal> with = Propose(priors, 6);
  ASSERT_GE(own.size(), 2u);
  ASSERT_EQ(with.size(), 6u);

  // Skill seeds first and every other one after; the others are the own
  // seeds, in the order a job without skills gets them.
  std::vector<std::string> own_seeds;
  for (size_t i = 0; i < with.size(); ++i) {
    SCOPED_TRACE(absl::StrCat("proposal ", i, ": ", with[i].mutation));
    if (i % 2 == 0) {
      EXPECT_FALSE(SkillSeedKeys(with[i].mutation).empty());
    } else {
      EXPECT_EQ(with[i].mutation, "seed");
      own_seeds.push_back(with[i].genome.ToString());
    }
  }
  EXPECT_EQ(own_seeds[0], own[0].genome.ToString());  // the second proposal: the recipe default
  EXPECT_EQ(own_seeds[1], own[1].genome.ToString());
}

TEST_F(BuiltinPriorsTest, MutationsPreferFavouredParameterValues) {
  constexpr int kTrials = 120;
  const int without = FastMathMoves({}, kTrials);
  const int with = FastMathMoves({{"param:fast_math=on", 8.0}}, kTrials);
  // Unweighted: one parameter of seven with two or more values, about 1/7 of
  // the 80% of proposals that are parameter moves (the rest switch recipe).
  // With a prior of 8 the move to fast_math=on weighs 8 against 6 for all the
  // others: about 0.8 * 8/14 = 46%.
  EXPECT_LT(without, kTrials * 2 / 10);
  EXPECT_GT(with, kTrials * 35 / 100);
  EXPECT_GT(with, 2 * without);
}

TEST_F(BuiltinPriorsTest, NoPriorsProposeExactlyAsBefore) {
  // An unrelated prior (another recipe's parameter) must not perturb the search.
  const Recipe* recipe = FindRecipe("elementwise");
  ParentInfo parent;
  parent.node_id = "n0";
  parent.genome = Genome{"elementwise", recipe->space().Defaults()};
  for (uint64_t seed = 0; seed < 10; ++seed) {
    std::vector<Proposal> a = Propose({}, 4, {parent}, seed);
    std::vector<Proposal> b = Propose({{"param:no_such_param=1", 4.0}}, 4, {parent}, seed);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].genome.ToString(), b[i].genome.ToString());
  }
}

}  // namespace
}  // namespace kevo::proposer
