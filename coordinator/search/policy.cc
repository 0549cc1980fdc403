#include "coordinator/search/policy.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"

namespace kevo::search {
namespace {

double Uniform(std::mt19937_64& rng) { return std::uniform_real_distribution<double>(0, 1)(rng); }

// Fit nodes that can still be expanded, best first.
std::vector<const v1::Node*> OpenRanked(const Tree& tree) {
  std::vector<const v1::Node*> open;
  for (const v1::Node* n : tree.Ranked()) {
    if (!tree.Exhausted({n->node_id()})) open.push_back(n);
  }
  return open;
}

// What to return when no expandable node is left: fresh seeds while they
// may still bring something new, else a selection already known to be
// exhausted, which ends the job.
Selection Seeds(const Tree& tree) {
  if (!tree.Exhausted({})) return {};
  auto ranked = tree.Ranked();
  return ranked.empty() ? Selection{} : Selection{{ranked.front()->node_id()}};
}

// Greedy best-first: expand the fittest node, discounted by how often it has
// been expanded already so that one node is not mutated forever; sometimes
// a random node of the top five, sometimes a crossover of the top two.
// Exhausted selections are passed over.
class GreedyPolicy final : public Policy {
 public:
  std::string name() const override { return "greedy"; }
  Selection Select(const Tree& tree, std::mt19937_64& rng) override {
    // The tree keeps its nodes ordered both ways; each pass below stops as
    // soon as it has what it needs, so a selection costs little however
    // large the tree (docs/benchmarks.md, "Control plane").
    std::vector<const v1::Node*> top;
    tree.ForEachRanked([&](const v1::Node* n) {
      top.push_back(n);
      return top.size() < 2;
    });
    if (top.size() >= 2 && Uniform(rng) < 0.15) {
      Selection cross{{top[0]->node_id(), top[1]->node_id()}};
      if (!tree.Exhausted(cross.parents)) return cross;
    }
    auto open = [&](const v1::Node* n) { return !tree.Exhausted({n->node_id()}); };
    bool any_open = false;
    tree.ForEachRanked([&](const v1::Node* n) { return !(any_open = open(n)); });
    if (!any_open) return Seeds(tree);
    if (Uniform(rng) < 0.2) {
      std::vector<const v1::Node*> first;  // the five best open
      tree.ForEachRanked([&](const v1::Node* n) {
        if (open(n)) first.push_back(n);
        return first.size() < 5;
      });
      return {{first[std::uniform_int_distribution<size_t>(0, first.size() - 1)(rng)]->node_id()}};
    }
    // The open node with the highest fitness discounted by how often it was
    // expanded (ties: the fitter, then the older).
    const v1::Node* best = nullptr;
    tree.ForEachByDiscountedFitness([&](const v1::Node* n) {
      if (open(n)) best = n;
      return best == nullptr;
    });
    return {{best->node_id()}};
  }
};

// UCT with progressive widening over the tree (a virtual root above the seed
// generation). A node may have at most ceil(kWiden * visits^kAlpha) children;
// while it may widen, it is expanded; otherwise the walk descends to the child
// maximising value + c * sqrt(ln N / n), value being the subtree's best
// fitness normalised by the job's best.
class UctPolicy final : public Policy {
 public:
  std::string name() const override { return "uct"; }
  Selection Select(const Tree& tree, std::mt19937_64& rng) override {
    const v1::Node* best = tree.Best();
    if (best == nullptr) return {};
    double norm = best->fitness();
    std::string at;  // "" = the virtual root
    if (!tree.SubtreeOpen(at)) return Seeds(tree);
    for (int depth = 0; depth < 64; ++depth) {
      const std::vector<std::string> here = at.empty() ? std::vector<std::string>{} : std::vector<std::string>{at};
      int visits = std::max(1, at.empty() ? tree.evaluated() : tree.SubtreeEvaluations(at));
      const auto& children = tree.Children(at);
      size_t allowed = static_cast<size_t>(std::ceil(kWiden * std::pow(visits, kAlpha)));
      if (children.size() < allowed && !tree.Exhausted(here)) return {here};
      // Descend to the best child whose subtree can still be expanded.
      std::string pick;
      double pick_score = -1;
      for (const auto& c : children) {
        const v1::Node* n = tree.Get(c);
        if (n == nullptr || n->state() != v1::NODE_DONE || n->fitness() <= 0 || !tree.SubtreeOpen(c)) continue;
        int nc = std::max(1, tree.SubtreeEvaluations(c));
        double score = tree.SubtreeBest(c) / norm + kExplore * std::sqrt(std::log(static_cast<double>(visits)) / nc) +
                       1e-9 * Uniform(rng);
        if (score > pick_score) pick_score = score, pick = c;
      }
      // Nothing open below: this node itself is (SubtreeOpen held for it).
      if (pick.empty()) return {here};
      at = pick;
    }
    return {{at}};
  }

 private:
  static constexpr double kWiden = 1.5;
  static constexpr double kAlpha = 0.5;
  static constexpr double kExplore = 0.7;
};

// An evolutionary population split into islands. Seeds are dealt to islands
// in turn; children live on their first parent's island. Each selection
// visits the next island and runs a tournament among its fittest members;
// some selections cross two members; every kMigrateEvery selections the
// island's tournament winner is crossed with another island's best.
// Exhausted members take no part.
class EvolutionPolicy final : public Policy {
 public:
  std::string name() const override { return "evolution"; }
  Selection Select(const Tree& tree, std::mt19937_64& rng) override {
    auto ranked = OpenRanked(tree);
    if (ranked.empty()) return Seeds(tree);
    std::map<int, std::vector<const v1::Node*>> islands;
    for (const v1::Node* n : ranked) islands[IslandOf(tree, *n)].push_back(n);
    int island = static_cast<int>(selections_++ % kIslands);
    if (!islands.contains(island)) {
      // Fill an empty island with a fresh seed, or once seeds bring nothing
      // new, visit an island that can still be expanded.
      if (!tree.Exhausted({})) return {};
      island = islands.begin()->first;
    }
    auto& members = islands[island];
    if (members.size() > kPopulation) members.resize(kPopulation);
    auto tournament = [&]() {
      const v1::Node* winner = nullptr;
      for (int i = 0; i < 3; ++i) {
        const v1::Node* c = members[std::uniform_int_distribution<size_t>(0, members.size() - 1)(rng)];
        if (winner == nullptr || c->fitness() > winner->fitness()) winner = c;
      }
      return winner;
    };
    const v1::Node* a = tournament();
    if (selections_ % kMigrateEvery == 0 && islands.size() > 1) {
      for (const auto& [other, others] : islands) {
        Selection cross{{a->node_id(), others.front()->node_id()}};
        if (other != island && !tree.Exhausted(cross.parents)) return cross;
      }
    }
    if (members.size() >= 2 && Uniform(rng) < 0.3) {
      const v1::Node* b = tournament();
      Selection cross{{a->node_id(), b->node_id()}};
      if (b != a && !tree.Exhausted(cross.parents)) return cross;
    }
    return {{a->node_id()}};
  }

 private:
  static int IslandOf(const Tree& tree, const v1::Node& node) {
    const v1::Node* n = &node;
    while (!n->parent_ids().empty()) {
      const v1::Node* p = tree.Get(n->parent_ids(0));
      if (p == nullptr) break;
      n = p;
    }
    return n->sequence() % kIslands;
  }

  static constexpr int kIslands = 3;
  static constexpr size_t kPopulation = 6;
  static constexpr uint64_t kMigrateEvery = 7;
  uint64_t selections_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Policy>> CreatePolicy(const std::string& name) {
  std::string n = name.empty() ? kDefaultPolicy : name;
  if (n == "greedy") return std::unique_ptr<Policy>(new GreedyPolicy());
  if (n == "uct") return std::unique_ptr<Policy>(new UctPolicy());
  if (n == "evolution") return std::unique_ptr<Policy>(new EvolutionPolicy());
  return absl::InvalidArgumentError(absl::StrCat("unknown search policy '", n, "' (known: greedy, uct, evolution)"));
}

}  // namespace kevo::search
