#include "coordinator/search/tree.h"

#include <algorithm>

namespace kevo::search {

void Tree::Upsert(const v1::Node& node) {
  auto it = nodes_.find(node.node_id());
  if (it == nodes_.end()) {
    // The first parent is the tree parent; a crossover's second parent is
    // provenance only, so the structure stays a tree.
    children_[node.parent_ids().empty() ? "" : node.parent_ids(0)].push_back(node.node_id());
    if (node.state() == v1::NODE_DONE) ++evaluated_;
    nodes_[node.node_id()] = node;
    return;
  }
  if (it->second.state() != v1::NODE_DONE && node.state() == v1::NODE_DONE) ++evaluated_;
  it->second = node;
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
  for (const auto& [id, n] : nodes_) {
    if (n.state() == v1::NODE_DONE && n.fitness() > 0) out.push_back(&n);
  }
  std::stable_sort(out.begin(), out.end(), [](const v1::Node* a, const v1::Node* b) {
    if (a->fitness() != b->fitness()) return a->fitness() > b->fitness();
    return a->sequence() < b->sequence();
  });
  return out;
}

const v1::Node* Tree::Best() const {
  auto ranked = Ranked();
  return ranked.empty() ? nullptr : ranked.front();
}

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
