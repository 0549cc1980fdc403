// Selection policies: which node of a job's tree to expand next. All share
// one interface so a job can name its policy (greedy | uct | evolution).
// Not thread-safe: a policy belongs to one job and is called from the job loop.
#pragma once

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

#include "coordinator/search/tree.h"

namespace kevo::search {

// What to expand: no parents = propose a fresh seed generation; one parent =
// mutate it; two = cross them.
struct Selection {
  std::vector<std::string> parents;
};

class Policy {
 public:
  virtual ~Policy() = default;
  virtual std::string name() const = 0;
  virtual Selection Select(const Tree& tree, std::mt19937_64& rng) = 0;
};

// The policy used when a job names none (chosen by measurement; see
// docs/search.md and docs/benchmarks.md).
inline constexpr char kDefaultPolicy[] = "greedy";

// greedy | uct | evolution. InvalidArgument names the known policies.
absl::StatusOr<std::unique_ptr<Policy>> CreatePolicy(const std::string& name);

}  // namespace kevo::search
