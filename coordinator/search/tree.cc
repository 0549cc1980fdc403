#include "coordinator/search/tree.h"

#include <algorithm>
#include <cmath>

namespace kevo::search {

std::optional<Tree::RankKey> Tree::RankOf(const v1::Node& node) {
  if (node.state() != v1::NODE_DONE || node.fitness() <= 0) return std::nullopt;
  return RankKey{{-node.fitness(), node.sequence()}, &node};
}

double Tree::DiscountedFitness(double fitness, size_t children) {
  return fitness * std::pow(kChildDiscount, static_cast<double>(children));
}

std::optional<Tree::ScoreKey> Tree::ScoreOf(const v1::Node& node) const {
  if (node.state() != v1::NODE_DONE || node.fitness() <= 0) return std::nullopt;
  const double score = DiscountedFitness(node.fitness(), Children(node.node_id()).size());
  return ScoreKey{{-score, -node.fitness(), node.sequence()}, &node};
}

void Tree::Unindex(const std::string& node_id) {
  auto it = nodes_.find(node_id);
  if (it == nodes_.end()) return;
  if (auto key = RankOf(it->second)) ranked_.erase(*key);
  if (auto key = ScoreOf(it->second)) scored_.erase(*key);
}

void Tree::Index(const std::string& node_id) {
  auto it = nodes_.find(node_id);
  if (it == nodes_.end()) return;
  if (auto key = RankOf(it->second)) ranked_.insert(*key);
  if (auto key = ScoreOf(it->second)) scored_.insert(*key);
}

void Tree::Upsert(const v1::Node& node) {
  auto it = nodes_.find(node.node_id());
  if (it == nodes_.end()) {
    // The first parent is the tree parent; a crossover's second parent is
    // provenance only, so the structure stays a tree.
    const std::string parent = node.parent_ids().empty() ? "" : node.parent_ids(0);
    Unindex(parent);  // its child count changes
    children_[parent].push_back(node.node_id());
    Index(parent);
    if (node.state() == v1::NODE_DONE) ++evaluated_;
    nodes_[node.node_id()] = node;
    Index(node.node_id());
    return;
  }
  if (it->second.state() != v1::NODE_DONE && node.state() == v1::NODE_DONE) ++evaluated_;
  Unindex(node.node_id());
  it->second = node;
  Index(node.node_id());
}

const v1::Node* Tree::Get(const std::string& node_id) const {
  auto it = nodes_.find(node_id);
  return it == nodes_.end() ? nullptr : &it->second;
}

const std::vector<std::string>& Tree::Children(const std::string& node_id) const {
  static const std::vector<std::string> kNone;
  auto it = children_.find(node_id);
  return it == children_.end() ? kNone : it->second;
}

std::vector<const v1::Node*> Tree::Ranked() const {
  std::vector<const v1::Node*> out;
  out.reserve(ranked_.size());
  for (const RankKey& k : ranked_) out.push_back(k.second);
  return out;
}

void Tree::ForEachByDiscountedFitness(const std::function<bool(const v1::Node*)>& fn) const {
  for (const ScoreKey& k : scored_) {
    if (!fn(k.second)) return;
  }
}

void Tree::ForEachRanked(const std::function<bool(const v1::Node*)>& fn) const {
  for (const RankKey& k : ranked_) {
    if (!fn(k.second)) return;
  }
}

const v1::Node* Tree::Best() const { return ranked_.empty() ? nullptr : ranked_.begin()->second; }

int Tree::SubtreeEvaluations(const std::string& node_id) const {
  const v1::Node* n = Get(node_id);
  int count = n != nullptr && n->state() == v1::NODE_DONE ? 1 : 0;
  for (const auto& c : Children(node_id)) count += SubtreeEvaluations(c);
  return count;
}

double Tree::SubtreeBest(const std::string& node_id) const {
  const v1::Node* n = Get(node_id);
  double best = n != nullptr && n->state() == v1::NODE_DONE ? n->fitness() : 0;
  for (const auto& c : Children(node_id)) best = std::max(best, SubtreeBest(c));
  return best;
}

void Tree::MarkExhausted(const std::vector<std::string>& parents) { exhausted_.insert(parents); }

bool Tree::Exhausted(const std::vector<std::string>& parents) const { return exhausted_.contains(parents); }

bool Tree::SubtreeOpen(const std::string& node_id) const {
  if (!Exhausted(node_id.empty() ? std::vector<std::string>{} : std::vector<std::string>{node_id})) return true;
  for (const auto& c : Children(node_id)) {
    const v1::Node* n = Get(c);
    if (n != nullptr && n->state() == v1::NODE_DONE && n->fitness() > 0 && SubtreeOpen(c)) return true;
  }
  return false;
}

}  // namespace kevo::search
