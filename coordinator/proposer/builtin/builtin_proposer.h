// The built-in recipe proposer: kevo's default proposer when no LLM is
// configured. It searches the declared spaces of the recipes that apply to a
// task (recipe.h, docs/search.md):
//   - no parent: the default genome of each applicable recipe, then each
//     recipe's seed overrides of it (e.g. single-threaded), then random
//     points of their spaces ("seed");
//   - one built-in parent: mutations that change exactly one parameter, a
//     neighbouring value more likely ("param:mr 8->16"), or switch to another
//     applicable recipe keeping the shared parameters ("variant:a->b");
//   - two parents of the same recipe: uniform crossover ("crossover"), plus
//     mutations of the first;
//   - a parent that was not built-in (empty genome): proposals of the generic
//     mutator, which transforms the task's reference.
// Priors from skill memory (request.priors) weight the choice of recipes and
// of parameter moves, and add the points they favour to the first generation
// ("seed:skill <keys>", SkillSeedLabel), taking turns with the proposer's own
// seeds, a skill's first, so that the second proposal is always the
// proposer's own. Proposals are a pure function of the request
// (deterministic for request.seed) and every genome lies in its recipe's
// space.
//
// Thread-safe: Propose() keeps no state between calls.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

#include "coordinator/proposer/builtin/recipe.h"
#include "coordinator/proposer/proposer.h"

namespace kevo::proposer {

class BuiltinProposer final : public Proposer {
 public:
  BuiltinProposer() = default;

  // Returns up to request.count proposals, fewer when the space around the
  // parents is exhausted. InvalidArgument when request.task is null or
  // request.count < 1, FailedPrecondition when no recipe applies to the task
  // on request.platform.
  absl::StatusOr<std::vector<Proposal>> Propose(const ProposeRequest& request) override;
  std::string name() const override { return "builtin"; }
  bool NeedsParentDetails() const override { return false; }  // genomes only

  // The recipes that apply to `task` on `platform`, in AllRecipes() order.
  static std::vector<const Recipe*> ApplicableRecipes(const v1::Task& task, std::string_view platform);
};

}  // namespace kevo::proposer
