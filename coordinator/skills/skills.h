// Skill memory: what raised fitness in finished jobs, aggregated across jobs
// in the coordinator's RocksDB (column family `skills`). When a job ends its
// tree is distilled into (platform, op family, transformation, gain, evidence
// node ids):
//   - every evaluated child that beat its parent by at least 3% contributes
//     each of its transformations (Transformations()) with gain = child
//     fitness / parent fitness;
//   - every first-generation node that beat the job's first seed contributes
//     the transformations from that seed's genome to its own;
//   - the job's best built-in kernel contributes "genome:<recipe{k=v,...}>"
//     with gain = best fitness / first seed's fitness.
// A skill's gain is the geometric mean over its evidence. Skills go into LLM
// prompts and set the builtin proposer's priors (ProposeRequest::priors).
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
  double mean_gain = 0;             // geometric mean of child/parent fitness over the evidence (> 1)
  int evidence_count = 0;           // how many improving steps, across jobs
  std::vector<std::string> node_ids;  // "job_id/node_id", most recent first, capped
};

class SkillStore {
 public:
  virtual ~SkillStore() = default;

  // Distils the finished `job`'s tree (`nodes`) into skills and merges them
  // with what is stored. A job already distilled is skipped (idempotent).
  // Returns the store's error. Thread-safe.
  virtual absl::Status Distil(const v1::Job& job, const std::vector<v1::Node>& nodes) = 0;

  // Skills for (platform, family), best first (by evidence-weighted gain), at
  // most `limit`. An empty platform or family matches any. Returns the
  // store's error. Thread-safe.
  virtual absl::StatusOr<std::vector<Skill>> SkillsFor(const std::string& platform,
                                                       const std::string& family,
                                                       int limit) const = 0;

  // The store (and the registry, when given) must outlive the SkillStore.
  // Registers kevo_skills_* metrics in `registry` when it is not null.
  static absl::StatusOr<std::unique_ptr<SkillStore>> Create(
      store::Store* store, prometheus::Registry* registry = nullptr);
};

// The op family skills of `task` are filed under: its op_family, else its
// "pattern" hint, else "generic".
std::string SkillFamily(const v1::Task& task);

// What changed from `parent` to `child` as skill transformations: for two
// built-in genomes "recipe:<name>" when the recipe changed and
// "param:<name>=<value>" for each parameter whose value changed; otherwise
// the child's mutation label (an LLM prompt's label), or nothing.
std::vector<std::string> Transformations(const v1::Node& parent, const v1::Node& child);

// Priors for the builtin proposer (ProposeRequest::priors) from skills, each
// weight > 1 and growing with gain and evidence: "recipe:<name>" becomes the
// recipe name, "param:k=v" and "genome:<genome>" keep their keys; other
// transformations (LLM labels) are not priors and are left out.
std::map<std::string, double> PriorsFrom(const std::vector<Skill>& skills);

}  // namespace kevo::skills
