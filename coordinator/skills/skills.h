// Skill memory: what raised fitness in finished jobs, aggregated across jobs
// in the coordinator's RocksDB (column family `skills`). When a job ends its
// tree is distilled into (platform, op family, transformation, gain, evidence
// node ids):
//   - every evaluated child that beat its parent by at least 3% contributes
//     each of its transformations (Transformations()) with gain = child
//     fitness / parent fitness;
//   - every first-generation node that beat the job's own first seed (the
//     proposer's, not a skill's) contributes the transformations from that
//     seed's genome to its own;
//   - the job's best built-in kernel contributes "genome:<recipe{k=v,...}>"
//     with gain = best fitness / the job's own first seed's fitness.
// A skill's gain is the geometric mean over its evidence; beside it each
// skill keeps how many jobs gave evidence, how fast its evidence nodes were
// against the production baseline, and how the jobs it seeded went (hits and
// misses, see Distil). Skills go into LLM prompts, and those with enough
// evidence set the builtin proposer's priors (PriorWeight, PriorsFrom).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kevo::store {
class Store;
}
namespace prometheus {
class Registry;
}
namespace kevo::v1 {
class Job;
class Node;
class Task;
}  // namespace kevo::v1

namespace kevo::skills {

struct Skill {
  std::string platform, family, transformation, summary;
  double mean_gain = 0;    // geometric mean of child/parent fitness over the evidence (> 1)
  int evidence_count = 0;  // how many improving steps, across jobs
  int jobs = 0;            // how many distinct jobs gave that evidence
  // Geometric mean of the evidence nodes' speedup over the task's production
  // baseline; 0 when none of them measured one.
  double vs_production = 0;
  // Jobs this skill seeded (a "seed:skill" node carrying its key) whose seed
  // led to the job's best and was at least as fast as the job's own seeds
  // (hits), or did not (misses).
  int hits = 0;
  int misses = 0;
  std::vector<std::string> node_ids;  // "job_id/node_id", most recent first, capped
};

class SkillStore {
 public:
  virtual ~SkillStore() = default;

  // Distils the finished `job`'s tree (`nodes`) into skills and merges them
  // with what is stored, and judges the skills that seeded it: for each key
  // on a done "seed:skill" node (proposer::SkillSeedKeys), a hit when one of
  // its seeds is the job's best or an ancestor of it and was at least as fast
  // as every own seed of the job (mutation "seed") that finished, a miss
  // otherwise (a seed that failed is always a miss; with no own seed finished
  // a correct seed is not judged). A job already distilled is skipped
  // (idempotent). Returns the store's error. Thread-safe.
  virtual absl::Status Distil(const v1::Job& job, const std::vector<v1::Node>& nodes) = 0;

  // Skills for (platform, family), best first (by evidence-weighted gain), at
  // most `limit`. An empty platform or family matches any. Returns the
  // store's error. Thread-safe.
  virtual absl::StatusOr<std::vector<Skill>> SkillsFor(const std::string& platform, const std::string& family,
                                                       int limit) const = 0;

  // The store (and the registry, when given) must outlive the SkillStore.
  // Registers kevo_skills_* metrics in `registry` when it is not null.
  static absl::StatusOr<std::unique_ptr<SkillStore>> Create(store::Store* store,
                                                            prometheus::Registry* registry = nullptr);
};

// The op family skills of `task` are filed under: its op_family, else its
// "pattern" hint, else "generic".
std::string SkillFamily(const v1::Task& task);

// What changed from `parent` to `child` as skill transformations: for two
// built-in genomes "recipe:<name>" when the recipe changed and
// "param:<name>=<value>" for each parameter whose value changed; otherwise
// the child's mutation label (an LLM prompt's label), or nothing.
std::vector<std::string> Transformations(const v1::Node& parent, const v1::Node& child);

// The prior weight `skill` earns, or 0 when it must not steer a new job:
//   - a recipe, parameter or genome (an LLM's label is for prompts only);
//   - evidence: from at least 2 distinct jobs, or at least 3 improving steps;
//   - its evidence nodes, where they measured the production baseline, beat
//     it by at least 3% on the geometric mean;
//   - no more misses than hits.
// The weight is gain^min(evidence, 4), capped at 8, halved for each miss;
// 0 when that leaves it at 1 or less.
double PriorWeight(const Skill& skill);

// Why `skill` earns no prior (PriorWeight() is 0), e.g. "evidence from 1 job
// and 1 step (needs 2 jobs or 3 steps)"; empty when it earns one.
std::string WhyNoPrior(const Skill& skill);

// Priors for the builtin proposer (ProposeRequest::priors) from the skills
// with a positive PriorWeight(): "recipe:<name>" becomes the recipe name,
// "param:k=v" and "genome:<genome>" keep their keys; other transformations
// (LLM labels) are not priors and are left out.
std::map<std::string, double> PriorsFrom(const std::vector<Skill>& skills);

}  // namespace kevo::skills
