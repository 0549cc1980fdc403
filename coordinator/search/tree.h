// The in-memory view of one job's search tree, rebuilt from RocksDB on
// recovery: nodes by id, parent -> children edges, and the best node. The
// durable copy lives in the store (coordinator/jobs writes it); this class
// only indexes. Not thread-safe: owned by the job loop.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "kevo/v1/job.pb.h"

namespace kevo::search {

class Tree {
 public:
  // Adds a node or replaces the node with the same id.
  void Upsert(const v1::Node& node);
  const v1::Node* Get(const std::string& node_id) const;
  // Children of `node_id`; "" gives the roots (nodes without parents).
  const std::vector<std::string>& Children(const std::string& node_id) const;
  // Evaluated nodes with fitness > 0, best first (ties: the older first).
  std::vector<const v1::Node*> Ranked() const;
  // Calls `fn` on Ranked()'s nodes in its order until `fn` returns false,
  // without building the list (kept ranked as nodes are upserted).
  void ForEachRanked(const std::function<bool(const v1::Node*)>& fn) const;
  // The evaluated node with the highest fitness, or null.
  const v1::Node* Best() const;
  // Calls `fn` on the same nodes best first by fitness * kChildDiscount^(its
  // number of children), ties in Ranked()'s order, until `fn` returns false
  // (the greedy policy's score, kept ordered as nodes are upserted).
  static constexpr double kChildDiscount = 0.93;
  static double DiscountedFitness(double fitness, size_t children);
  void ForEachByDiscountedFitness(const std::function<bool(const v1::Node*)>& fn) const;
  // Evaluated nodes (any status) in the subtree of `node_id`, itself included.
  int SubtreeEvaluations(const std::string& node_id) const;
  // Highest fitness in the subtree of `node_id`, itself included.
  double SubtreeBest(const std::string& node_id) const;
  // A selection (no parents = a fresh seed generation; one = mutate it; two
  // = cross them) whose proposals all came back already evaluated, even when
  // the proposer was asked for many: the policies pass it over, and a job
  // whose policy has nothing else left has exhausted its search space.
  // In memory only: after a restart it is found again in a few rounds.
  void MarkExhausted(const std::vector<std::string>& parents);
  bool Exhausted(const std::vector<std::string>& parents) const;
  // True while `node_id` or a fit node below it can still be expanded.
  bool SubtreeOpen(const std::string& node_id) const;
  size_t size() const { return nodes_.size(); }
  int evaluated() const { return evaluated_; }
  const std::map<std::string, v1::Node>& nodes() const { return nodes_; }

 private:
  // Ranked() as an ordered index: (-fitness, sequence) of fit evaluated
  // nodes, pointing into nodes_ (whose elements never move).
  using RankKey = std::pair<std::pair<double, int>, const v1::Node*>;
  static std::optional<RankKey> RankOf(const v1::Node& node);

  // (-discounted fitness, -fitness, sequence) of the same nodes.
  using ScoreKey = std::pair<std::tuple<double, double, int>, const v1::Node*>;
  std::optional<ScoreKey> ScoreOf(const v1::Node& node) const;
  // Removes `node_id`'s index entries before a change to it or its children
  // (Unindex), and puts them back after (Index).
  void Unindex(const std::string& node_id);
  void Index(const std::string& node_id);

  std::map<std::string, v1::Node> nodes_;
  std::set<RankKey> ranked_;
  std::set<ScoreKey> scored_;
  std::map<std::string, std::vector<std::string>> children_;
  std::set<std::vector<std::string>> exhausted_;
  int evaluated_ = 0;
};

}  // namespace kevo::search
