// Proposers turn a node of a job's search tree (its kernel, how it was made,
// what its evaluation said) into new candidate kernels. Two implementations:
// the built-in recipe proposer (coordinator/proposer/builtin) and the LLM
// proposer (coordinator/llm). The search engine (coordinator/search) decides
// which node to expand and calls Propose().
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "absl/status/statusor.h"

#include "kevo/v1/evaluation.pb.h"
#include "kevo/v1/job.pb.h"
#include "kevo/v1/task.pb.h"

namespace kevo::proposer {

// How a candidate was made, as the built-in proposer understands it: a recipe
// and a value for each parameter of the recipe's search space. Stored in the
// node's provenance so that later mutations and crossovers can start from it.
struct Genome {
  std::string recipe;  // e.g. "softmax_online", "generic" (the reference, mutated)
  std::map<std::string, std::string> params;

  // "recipe{k=v,k=v}" — stable, sorted by key.
  std::string ToString() const;
  static absl::StatusOr<Genome> FromString(const std::string& text);
};

// The mutation label of a first-generation node that skill memory suggested:
// "seed:skill " and the keys of the skills behind it ("genome:<genome>",
// "param:<name>=<value>", "recipe:<name>", as coordinator/skills files them)
// joined by "; ", so that the job's end can judge each one.
std::string SkillSeedLabel(const std::vector<std::string>& skill_keys);
// The skill keys in a SkillSeedLabel() label; empty for any other label
// (including a bare "seed:skill" of nodes made before seeds named them).
std::vector<std::string> SkillSeedKeys(const std::string& mutation);

// One child of a parent, as the proposer sees it: what was tried from that
// parent and how its evaluation ended (the siblings of the next proposals).
struct ChildInfo {
  std::string node_id;
  std::string proposer;  // "builtin", "llm:<model>", ...
  std::string mutation;
  v1::EvalStatus status = v1::EVAL_STATUS_UNSPECIFIED;  // unspecified: still evaluating
  double fitness = 0;
  std::string message;  // the evaluation's one-line diagnostic, if any
};

// A parent as the proposer sees it.
struct ParentInfo {
  std::string node_id;
  Genome genome;  // empty recipe when the parent was not built-in
  v1::Candidate candidate;
  v1::Evaluation evaluation;        // may be empty when not yet evaluated
  double fitness = 0;               // baseline median / candidate median; 0 when failed
  std::vector<ChildInfo> children;  // its most recent children (at most 8), oldest first
};

struct ProposeRequest {
  const v1::Task* task = nullptr;
  std::string platform;  // cpu | nvidia | amd | mtia-sim
  // Empty: propose the first generation (seeds). One: mutate it. Two: the
  // first may be crossed with the second.
  std::vector<ParentInfo> parents;
  int count = 1;      // how many proposals are wanted (at most)
  uint64_t seed = 0;  // for the proposer's random choices
  // Priors from skill memory (coordinator/skills), each a weight (> 1
  // favours it): "<recipe name>" for a recipe, "param:<name>=<value>" for a
  // parameter value, "genome:<Genome::ToString()>" for a whole point to seed.
  std::map<std::string, double> priors;
  // False when the job's spec says no_skills: the proposer must not use skill
  // memory at all (the LLM proposer leaves skills out of its prompts).
  bool use_skills = true;
  std::string job_id;  // the job asking (for proposers that keep per-job records)
  // The genomes (Genome::ToString()) of the job's nodes so far, evaluated or
  // in flight: proposing one again would only be dropped as a duplicate, so
  // a proposer may pass over them without generating their code. Null: none
  // known. Owned by the caller, valid during Propose().
  const std::unordered_set<std::string>* tried = nullptr;
};

struct Proposal {
  v1::Candidate candidate;
  Genome genome;
  std::string mutation;  // "seed", "param:tile_m 32->64", "variant:a->b", "crossover"
  std::vector<std::string> parent_ids;
  std::string proposer;  // "builtin", "llm:<model>"
};

class Proposer {
 public:
  virtual ~Proposer() = default;
  // Returns up to request.count proposals (possibly fewer, or none when the
  // search space around the parents is exhausted; duplicates of sources
  // already evaluated are filtered by the search engine). InvalidArgument for
  // a task the proposer cannot handle at all.
  virtual absl::StatusOr<std::vector<Proposal>> Propose(const ProposeRequest& request) = 0;
  virtual std::string name() const = 0;

  // True while the proposer works in the background (LLM calls in flight)
  // and will have proposals later: when Propose() returns none, the job loop
  // then waits for its next tick instead of counting an empty round.
  virtual bool Pending() const { return false; }

  // False when Propose() reads only the parents' node ids, genomes and
  // fitness: the job loop then leaves ParentInfo's candidate, evaluation and
  // children empty instead of reading them from the store for every
  // proposal (docs/benchmarks.md, "Control plane"). Default: true.
  virtual bool NeedsParentDetails() const { return true; }

  // Called on the job loop when a node made from one of this proposer's
  // proposals is created (state NODE_EVALUATING, `evaluation` null), and when
  // the result of any node of the job is recorded (NODE_DONE, with its
  // evaluation). Must be quick. Default: ignored.
  virtual void Observe(const v1::Node& /*node*/, const v1::Evaluation* /*evaluation*/) {}
};

}  // namespace kevo::proposer
