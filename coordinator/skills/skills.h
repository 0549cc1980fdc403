// Skill memory: what raised fitness in finished jobs, aggregated across jobs
// in the coordinator's RocksDB (column family `skills`). When a job ends its
// tree is distilled: every evaluated child that beat its parent contributes
// (platform, op family, transformation, gain = child fitness / parent
// fitness, node id). Transformations are the builtin proposer's mutations
// normalised ("recipe:softmax_online", "param:tile_m=64", "flag:-ffast-math")
// or an LLM prompt's mutation label. Skills go into LLM prompts and set the
// builtin proposer's priors (ProposeRequest::priors).
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
namespace kevo::v1 {
class Job;
class Node;
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

  // The store must outlive the SkillStore.
  static absl::StatusOr<std::unique_ptr<SkillStore>> Create(store::Store* store);
};

// Priors for the builtin proposer from skills: transformation -> weight
// (> 1 favours it), e.g. "recipe:softmax_online" -> 2.3.
std::map<std::string, double> PriorsFrom(const std::vector<Skill>& skills);

}  // namespace kevo::skills
