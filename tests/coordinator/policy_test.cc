// The selection policies on hand-built trees: each passes over selections
// the job loop marked exhausted, and once nothing else is left returns an
// exhausted selection (which ends the job) instead of cycling on it.
#include "coordinator/search/policy.h"

#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "gtest/gtest.h"

#include "coordinator/search/tree.h"

namespace kevo::search {
namespace {

void Add(Tree& tree, int seq, double fitness, const std::string& parent = "") {
  v1::Node n;
  n.set_node_id(absl::StrFormat("n%05d", seq));
  n.set_sequence(seq);
  if (!parent.empty()) n.add_parent_ids(parent);
  n.set_state(v1::NODE_DONE);
  n.set_fitness(fitness);
  tree.Upsert(n);
}

// Five seeds (enough that UCT's root may not widen); n00001 is the best and
// has two children of its own.
Tree SmallTree() {
  Tree tree;
  Add(tree, 0, 1.0);
  Add(tree, 1, 3.0);
  Add(tree, 2, 0.5);
  Add(tree, 3, 0.8);
  Add(tree, 4, 0.7);
  Add(tree, 5, 2.0, "n00001");
  Add(tree, 6, 2.5, "n00001");
  return tree;
}

std::set<std::vector<std::string>> Selections(Policy& policy, const Tree& tree, int n) {
  std::mt19937_64 rng(7);
  std::set<std::vector<std::string>> seen;
  for (int i = 0; i < n; ++i) seen.insert(policy.Select(tree, rng).parents);
  return seen;
}

class PolicyTest : public ::testing::TestWithParam<std::string> {
 protected:
  std::unique_ptr<Policy> Make() {
    auto p = CreatePolicy(GetParam());
    EXPECT_TRUE(p.ok()) << p.status();
    return std::move(*p);
  }
};

TEST_P(PolicyTest, ExpandsTheBestNodeWhileItIsOpen) {
  Tree tree = SmallTree();
  auto seen = Selections(*Make(), tree, 200);
  bool best_alone = seen.contains({"n00001"});
  bool in_its_subtree = seen.contains({"n00005"}) || seen.contains({"n00006"});
  EXPECT_TRUE(best_alone || in_its_subtree) << GetParam();
}

TEST_P(PolicyTest, PassesOverExhaustedNodes) {
  Tree tree = SmallTree();
  tree.MarkExhausted({"n00001"});
  tree.MarkExhausted({"n00006"});
  auto seen = Selections(*Make(), tree, 300);
  EXPECT_FALSE(seen.contains({"n00001"})) << GetParam();
  EXPECT_FALSE(seen.contains({"n00006"})) << GetParam();
  for (const auto& sel : seen) EXPECT_FALSE(tree.Exhausted(sel)) << GetParam() << " chose an exhausted selection";
}

TEST_P(PolicyTest, ReturnsAnExhaustedSelectionOnlyWhenNothingIsLeft) {
  Tree tree = SmallTree();
  tree.MarkExhausted({});
  for (int i = 0; i < 7; ++i) {
    if (i != 2) tree.MarkExhausted({absl::StrFormat("n%05d", i)});
  }
  // One node left: every policy finds it (a crossover of two exhausted
  // nodes is a new selection too, and may be tried).
  auto seen = Selections(*Make(), tree, 200);
  EXPECT_TRUE(seen.contains({"n00002"})) << GetParam();
  for (const auto& sel : seen) EXPECT_FALSE(tree.Exhausted(sel)) << GetParam();

  tree.MarkExhausted({"n00002"});
  tree.MarkExhausted({"n00001", "n00006"});
  tree.MarkExhausted({"n00001", "n00000"});
  std::mt19937_64 rng(3);
  bool ended = false;
  for (int i = 0; i < 200 && !ended; ++i) {
    Selection sel = Make()->Select(tree, rng);
    if (tree.Exhausted(sel.parents))
      ended = true;
    else
      tree.MarkExhausted(sel.parents);  // as the job loop would, after asking
  }
  EXPECT_TRUE(ended) << GetParam() << " kept offering new selections of an exhausted tree";
}

TEST(TreeTest, SubtreeOpenFollowsExhaustionDownTheTree) {
  Tree tree = SmallTree();
  EXPECT_TRUE(tree.SubtreeOpen("n00001"));
  tree.MarkExhausted({"n00001"});
  EXPECT_TRUE(tree.SubtreeOpen("n00001"));  // its children are open
  tree.MarkExhausted({"n00005"});
  tree.MarkExhausted({"n00006"});
  EXPECT_FALSE(tree.SubtreeOpen("n00001"));
  EXPECT_TRUE(tree.SubtreeOpen(""));  // the seed generation is open
  tree.MarkExhausted({});
  EXPECT_TRUE(tree.SubtreeOpen(""));  // the other seeds are
  for (const char* seed : {"n00000", "n00002", "n00003", "n00004"}) tree.MarkExhausted({seed});
  EXPECT_FALSE(tree.SubtreeOpen(""));
}

INSTANTIATE_TEST_SUITE_P(AllPolicies, PolicyTest, ::testing::Values("greedy", "uct", "evolution"));

}  // namespace
}  // namespace kevo::search
