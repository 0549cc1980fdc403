// The frame most built-in recipes share: a recipe of one platform whose name,
// family, description and search space are data, that applies to a task when
// the task's hints bind (Bind), and that writes its candidate from that
// binding (Write). A recipe derives from BoundRecipe<ItsBinding> and says
// only what is its own; the genome checks and the binding of Generate are
// written here once. Internal to kevo_builtin_proposer; const and thread-safe
// like every Recipe.
#pragma once

#include <string>
#include <string_view>
#include <utility>

#include "absl/status/statusor.h"

#include "common/status.h"
#include "coordinator/proposer/builtin/codegen.h"
#include "coordinator/proposer/builtin/recipe.h"

namespace kevo::proposer {

// What names a recipe and where it runs.
struct RecipeInfo {
  std::string name;         // Recipe::name()
  std::string family;       // Recipe::family()
  std::string platform;     // the one platform it applies to: "cpu", "nvidia", ...
  std::string description;  // Recipe::description()
};

template <typename Binding>
class BoundRecipe : public Recipe {
 public:
  BoundRecipe(RecipeInfo info, SearchSpace space) : info_(std::move(info)), space_(std::move(space)) {}

  std::string name() const final { return info_.name; }
  std::string family() const final { return info_.family; }
  std::string description() const final { return info_.description; }
  const SearchSpace& space() const final { return space_; }

  bool Applies(const v1::Task& task, std::string_view platform) const final {
    Binding b;
    return platform == info_.platform && Bind(task, &b);
  }

  // InvalidArgument for a genome of another recipe or outside the space,
  // FailedPrecondition when the recipe does not apply (CheckGenerate); else
  // what Write returns for the task's binding.
  absl::StatusOr<v1::Candidate> Generate(const v1::Task& task, const Genome& genome) const final {
    KEVO_RETURN_IF_ERROR(CheckGenerate(*this, task, genome, info_.platform));
    Binding b;
    Bind(task, &b);  // binds: CheckGenerate asked Applies
    return Write(task, genome, b);
  }

 protected:
  // Binds the task's hints into `*b`; false when the recipe does not apply to
  // `task` (then `*b` may be partly filled).
  virtual bool Bind(const v1::Task& task, Binding* b) const = 0;

  // The candidate for `genome`, which lies in the space, and a task that
  // binds to `b`. An error when the task's signature cannot be written.
  virtual absl::StatusOr<v1::Candidate> Write(const v1::Task& task, const Genome& genome, const Binding& b) const = 0;

 private:
  RecipeInfo info_;
  SearchSpace space_;
};

}  // namespace kevo::proposer
