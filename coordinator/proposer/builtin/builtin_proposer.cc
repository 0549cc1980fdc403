#include "coordinator/proposer/builtin/builtin_proposer.h"

#include <algorithm>
#include <random>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include "common/status.h"

namespace kevo::proposer {
namespace {

// Attempts per wanted proposal before giving up on finding new genomes.
constexpr int kAttemptsPerProposal = 30;
// Probability that a mutation switches the algorithm variant.
constexpr double kVariantProbability = 0.2;
// The same from a pytorch_rewrite parent of a KernelBench task whose bridge
// recipes apply.
constexpr double kBridgeProbability = 0.6;
// Probability that a parameter mutation moves to a neighbouring value.
constexpr double kNeighbourProbability = 0.7;

double Prior(const ProposeRequest& request, const Recipe& recipe) {
  auto it = request.priors.find(recipe.name());
  return it == request.priors.end() ? 1.0 : std::max(0.0, it->second);
}

std::string ParamPriorKey(const std::string& name, const std::string& value) {
  return absl::StrCat("param:", name, "=", value);
}

double ParamPrior(const ProposeRequest& request, const std::string& name, const std::string& value) {
  auto it = request.priors.find(ParamPriorKey(name, value));
  return it == request.priors.end() ? 1.0 : std::max(0.0, it->second);
}

// Whether any parameter of `space` has a value with a prior.
bool HasParamPriors(const ProposeRequest& request, const SearchSpace& space) {
  for (const ParamSpec& p : space.params()) {
    for (const std::string& v : p.values) {
      if (request.priors.contains(ParamPriorKey(p.name, v))) return true;
    }
  }
  return false;
}

// Picks an index with probability proportional to `weights`; -1 when all are 0.
int PickWeighted(const std::vector<double>& weights, std::mt19937_64& rng) {
  double total = 0;
  for (double w : weights) total += w;
  if (total <= 0) return -1;
  double x = std::uniform_real_distribution<double>(0, total)(rng);
  for (size_t i = 0; i < weights.size(); ++i) {
    if (x < weights[i]) return static_cast<int>(i);
    x -= weights[i];
  }
  for (size_t i = weights.size(); i-- > 0;) {
    if (weights[i] > 0) return static_cast<int>(i);
  }
  return -1;
}

// `params` brought into `space`: unknown keys dropped, missing or disallowed
// values replaced by the default. Shared parameters keep their values.
std::map<std::string, std::string> Repair(const SearchSpace& space, const std::map<std::string, std::string>& params) {
  std::map<std::string, std::string> out = space.Defaults();
  for (const ParamSpec& p : space.params()) {
    auto it = params.find(p.name);
    if (it != params.end() && SearchSpace::IndexOf(p, it->second) >= 0) out[p.name] = it->second;
  }
  return out;
}

class Batch {
 public:
  Batch(const ProposeRequest& request, std::set<std::string> seen) : request_(request), seen_(std::move(seen)) {}

  bool full() const { return static_cast<int>(out_.size()) >= request_.count; }

  // Adds the proposal unless its genome was seen, the job tried it already,
  // or it fails to generate.
  bool Add(const Recipe& recipe, Genome genome, std::string mutation, std::vector<std::string> parent_ids) {
    if (full()) return false;
    auto [at, added] = seen_.insert(genome.ToString());
    if (!added || (request_.tried != nullptr && request_.tried->contains(*at))) return false;
    absl::StatusOr<v1::Candidate> candidate = recipe.Generate(*request_.task, genome);
    if (!candidate.ok()) return false;
    Proposal p;
    p.candidate = *std::move(candidate);
    p.genome = std::move(genome);
    p.mutation = std::move(mutation);
    p.parent_ids = std::move(parent_ids);
    p.proposer = "builtin";
    out_.push_back(std::move(p));
    return true;
  }

  std::vector<Proposal> Take() { return std::move(out_); }

 private:
  const ProposeRequest& request_;
  std::set<std::string> seen_;
  std::vector<Proposal> out_;
};

// A first-generation point waiting to be proposed.
struct SeedPoint {
  const Recipe* recipe;
  Genome genome;
  std::string mutation;
};

// The first generation's points that skill memory suggests, best first, each
// labelled with the keys of the skills behind it (SkillSeedLabel): genomes
// that won earlier jobs ("genome:" priors, repaired into the recipe's current
// space); for each recipe with parameter priors its default with every such
// parameter at its most favoured value; the defaults of favoured recipes.
std::vector<SeedPoint> SkillSeeds(const ProposeRequest& request, const std::vector<const Recipe*>& recipes) {
  std::vector<SeedPoint> out;
  std::vector<std::pair<double, std::string>> genomes;
  for (const auto& [key, weight] : request.priors) {
    if (key.starts_with("genome:") && weight > 1) genomes.emplace_back(weight, key);
  }
  std::stable_sort(genomes.begin(), genomes.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (const auto& [weight, key] : genomes) {
    auto g = Genome::FromString(key.substr(7));
    if (!g.ok()) continue;
    for (const Recipe* r : recipes) {
      if (r->name() != g->recipe || Prior(request, *r) <= 0) continue;
      out.push_back({r, Genome{r->name(), Repair(r->space(), g->params)}, SkillSeedLabel({key})});
    }
  }
  for (const Recipe* r : recipes) {
    if (Prior(request, *r) <= 0 || !HasParamPriors(request, r->space())) continue;
    Genome g{r->name(), r->space().Defaults()};
    std::vector<std::string> keys;
    for (const ParamSpec& p : r->space().params()) {
      double best = 1;
      for (const std::string& v : p.values) {
        const double w = ParamPrior(request, p.name, v);
        if (w > best) {
          best = w;
          g.params[p.name] = v;
        }
      }
      if (best > 1) keys.push_back(ParamPriorKey(p.name, g.params[p.name]));
    }
    if (!keys.empty()) out.push_back({r, std::move(g), SkillSeedLabel(keys)});
  }
  std::vector<const Recipe*> favoured;
  for (const Recipe* r : recipes) {
    if (Prior(request, *r) > 1) favoured.push_back(r);
  }
  std::stable_sort(favoured.begin(), favoured.end(),
                   [&](const Recipe* a, const Recipe* b) { return Prior(request, *a) > Prior(request, *b); });
  for (const Recipe* r : favoured) {
    out.push_back({r, Genome{r->name(), r->space().Defaults()}, SkillSeedLabel({absl::StrCat("recipe:", r->name())})});
  }
  return out;
}

// The proposer's own first points, as a job without skills gets them: each
// recipe's default in recipe order, then each recipe's seed overrides of it.
std::vector<SeedPoint> OwnSeeds(const ProposeRequest& request, const std::vector<const Recipe*>& recipes) {
  std::vector<SeedPoint> out;
  for (const Recipe* r : recipes) {
    if (Prior(request, *r) <= 0) continue;
    out.push_back({r, Genome{r->name(), r->space().Defaults()}, "seed"});
  }
  for (const Recipe* r : recipes) {
    if (Prior(request, *r) <= 0) continue;
    for (const auto& overrides : r->SeedOverridesOn(request.platform)) {
      Genome g{r->name(), r->space().Defaults()};
      for (const auto& [k, v] : overrides) g.params[k] = v;
      if (r->space().Check(g.params).ok()) out.push_back({r, std::move(g), "seed"});
    }
  }
  return out;
}

void ProposeSeeds(const ProposeRequest& request, const std::vector<const Recipe*>& recipes, std::mt19937_64& rng,
                  Batch& batch) {
  // Skill seeds and own seeds take turns, a skill's first: a skill that
  // misleads costs every other seed, never a short budget's own seeds.
  std::vector<SeedPoint> skill = SkillSeeds(request, recipes);
  std::vector<SeedPoint> own = OwnSeeds(request, recipes);
  size_t next_skill = 0, next_own = 0;
  bool skill_turn = true;
  while ((next_skill < skill.size() || next_own < own.size()) && !batch.full()) {
    if (skill_turn ? next_skill >= skill.size() : next_own >= own.size()) skill_turn = !skill_turn;
    SeedPoint& p = skill_turn ? skill[next_skill++] : own[next_own++];
    if (batch.Add(*p.recipe, std::move(p.genome), std::move(p.mutation), {})) {
      skill_turn = !skill_turn;
    }
  }
  std::vector<double> weights;
  for (const Recipe* r : recipes) weights.push_back(Prior(request, *r));
  for (int attempt = 0; attempt < kAttemptsPerProposal * request.count && !batch.full(); ++attempt) {
    int i = PickWeighted(weights, rng);
    if (i < 0) break;
    batch.Add(*recipes[i], Genome{recipes[i]->name(), recipes[i]->space().Random(rng)}, "seed", {});
  }
}

// One parameter of `genome` changed, the move picked with probability
// proportional to its prior times the unweighted move's probability (a
// neighbouring value kNeighbourProbability of the time); false when no move
// has a positive weight.
bool MutateParamWithPriors(const ProposeRequest& request, const SearchSpace& space, Genome& genome,
                           std::mt19937_64& rng, std::string* mutation) {
  std::vector<std::pair<const ParamSpec*, int>> moves;
  std::vector<double> weights;
  for (const ParamSpec& p : space.params()) {
    const int n = static_cast<int>(p.values.size());
    if (n < 2) continue;
    const int at = SearchSpace::IndexOf(p, genome.params[p.name]);
    const int neighbours = (at > 0) + (at < n - 1);
    for (int i = 0; i < n; ++i) {
      if (i == at) continue;
      const bool neighbour = i == at - 1 || i == at + 1;
      // Unweighted: a neighbour with kNeighbourProbability, else any other value.
      const double base = neighbour ? kNeighbourProbability / neighbours + (1 - kNeighbourProbability) / (n - 1)
                                    : (1 - kNeighbourProbability) / (n - 1);
      moves.emplace_back(&p, i);
      weights.push_back(base * ParamPrior(request, p.name, p.values[i]));
    }
  }
  const int pick = PickWeighted(weights, rng);
  if (pick < 0) return false;
  const auto [p, i] = moves[pick];
  const std::string old = genome.params[p->name];
  genome.params[p->name] = p->values[i];
  *mutation = absl::StrCat("param:", p->name, " ", old, "->", p->values[i]);
  return true;
}

// One parameter of `genome` changed; false when the space has no parameter
// with two values.
bool MutateParam(const SearchSpace& space, Genome& genome, std::mt19937_64& rng, std::string* mutation) {
  std::vector<const ParamSpec*> mutable_params;
  for (const ParamSpec& p : space.params()) {
    if (p.values.size() > 1) mutable_params.push_back(&p);
  }
  if (mutable_params.empty()) return false;
  const ParamSpec& p = *mutable_params[std::uniform_int_distribution<size_t>(0, mutable_params.size() - 1)(rng)];
  const std::string old = genome.params[p.name];
  const int at = SearchSpace::IndexOf(p, old);
  const int n = static_cast<int>(p.values.size());
  int next;
  if (std::uniform_real_distribution<double>(0, 1)(rng) < kNeighbourProbability) {
    if (at <= 0) {
      next = 1;
    } else if (at >= n - 1) {
      next = n - 2;
    } else {
      next = std::uniform_int_distribution<int>(0, 1)(rng) ? at + 1 : at - 1;
    }
  } else {
    next = std::uniform_int_distribution<int>(0, n - 2)(rng);
    if (next >= at) ++next;  // any value but the current one
  }
  genome.params[p.name] = p.values[next];
  *mutation = absl::StrCat("param:", p.name, " ", old, "->", p.values[next]);
  return true;
}

void ProposeMutations(const ProposeRequest& request, const std::vector<const Recipe*>& recipes,
                      const ParentInfo& parent, const Recipe& recipe, const Genome& genome, std::mt19937_64& rng,
                      Batch& batch) {
  std::vector<double> variant_weights;
  bool has_variant = false;
  // A KernelBench parent that only reruns PyTorch (pytorch_rewrite) leans to
  // the bridges (kb_*), once the Model's graph lets them apply: they run
  // kevo's kernels, which is where speed comes from.
  const bool to_bridges = recipe.family() == "pytorch";
  bool bridges = false;
  for (const Recipe* r : recipes) {
    const bool bridge = to_bridges && absl::StartsWith(r->family(), "kb_");
    double w = r == &recipe ? 0 : Prior(request, *r) * (r->family() == recipe.family() || bridge ? 4 : 1);
    variant_weights.push_back(w);
    has_variant |= w > 0;
    bridges |= bridge;
  }
  const double variant_probability = bridges ? kBridgeProbability : kVariantProbability;
  // First what the task makes promising (a parent has one slot in flight on
  // a one-GPU worker, so a point left to chance may never come): bridges
  // that remove work, then the recipe's own directed children.
  for (const Recipe* r : recipes) {
    if (!to_bridges || r == &recipe || !absl::StartsWith(r->family(), "kb_") ||
        !r->DirectedVariant(*request.task, request.platform)) {
      continue;
    }
    batch.Add(*r, Genome{r->name(), r->space().Defaults()},
              absl::StrCat("directed:variant:", recipe.name(), "->", r->name()), {parent.node_id});
  }
  for (const auto& overrides : recipe.DirectedMutations(*request.task, request.platform, genome)) {
    Genome child = genome;
    std::vector<std::string> changed;
    for (const auto& [k, v] : overrides) {
      changed.push_back(absl::StrCat(k, " ", child.params[k], "->", v));
      child.params[k] = v;
    }
    const std::string mutation = absl::StrCat("directed:", absl::StrJoin(changed, ","));
    if (std::none_of(parent.children.begin(), parent.children.end(),
                     [&](const ChildInfo& c) { return c.mutation == mutation; })) {
      batch.Add(recipe, std::move(child), mutation, {parent.node_id});
    }
  }
  const bool param_priors = HasParamPriors(request, recipe.space());
  // A parent has at most this many distinct children (one parameter changed,
  // or another recipe): asked for more (a job over-asking after rounds of
  // duplicates), the attempts stay bounded by it, for random draws would only
  // find the same children again (docs/benchmarks.md, "Control plane").
  int children = 0;
  for (const ParamSpec& p : recipe.space().params()) children += std::max<int>(0, p.values.size() - 1);
  for (const double w : variant_weights) children += w > 0;
  const int wanted = std::min(request.count, std::max(1, children));
  for (int attempt = 0; attempt < kAttemptsPerProposal * wanted && !batch.full(); ++attempt) {
    if (has_variant && std::uniform_real_distribution<double>(0, 1)(rng) < variant_probability) {
      const Recipe& to = *recipes[PickWeighted(variant_weights, rng)];
      Genome child{to.name(), Repair(to.space(), genome.params)};
      batch.Add(to, std::move(child), absl::StrCat("variant:", recipe.name(), "->", to.name()), {parent.node_id});
      continue;
    }
    Genome child = genome;
    std::string mutation;
    // Without parameter priors the unweighted mutation, so that a job without
    // skills searches exactly as before.
    if (!(param_priors ? MutateParamWithPriors(request, recipe.space(), child, rng, &mutation)
                       : MutateParam(recipe.space(), child, rng, &mutation))) {
      continue;
    }
    batch.Add(recipe, std::move(child), std::move(mutation), {parent.node_id});
  }
}

void ProposeCrossovers(const ProposeRequest& request, const Recipe& recipe, const Genome& a, const Genome& b,
                       int wanted, std::mt19937_64& rng, Batch& batch) {
  int made = 0;
  for (int attempt = 0; attempt < kAttemptsPerProposal * wanted && made < wanted && !batch.full(); ++attempt) {
    Genome child{recipe.name(), {}};
    for (const ParamSpec& p : recipe.space().params()) {
      const bool from_a = std::uniform_int_distribution<int>(0, 1)(rng) == 0;
      child.params[p.name] = (from_a ? a : b).params.at(p.name);
    }
    made += batch.Add(recipe, std::move(child), "crossover", {request.parents[0].node_id, request.parents[1].node_id});
  }
}

}  // namespace

std::vector<const Recipe*> BuiltinProposer::ApplicableRecipes(const v1::Task& task, std::string_view platform) {
  std::vector<const Recipe*> out;
  for (const auto& r : AllRecipes()) {
    if (r->Applies(task, platform)) out.push_back(r.get());
  }
  return out;
}

absl::StatusOr<std::vector<Proposal>> BuiltinProposer::Propose(const ProposeRequest& request) {
  if (request.task == nullptr) return absl::InvalidArgumentError("ProposeRequest.task is null");
  if (request.count < 1) {
    return absl::InvalidArgumentError(absl::StrCat("ProposeRequest.count is ", request.count, "; want at least 1"));
  }
  const std::vector<const Recipe*> recipes = ApplicableRecipes(*request.task, request.platform);
  if (recipes.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("no built-in recipe applies to task '", request.task->name(), "' on '", request.platform,
                     "': give the task hints (docs/search.md) or a C++ reference defining '",
                     request.task->signature().function(), "'"));
  }
  std::mt19937_64 rng(request.seed ^ 0x6b65766f2d627569ULL);  // "kevo-bui"

  std::set<std::string> seen;
  for (const ParentInfo& p : request.parents) {
    if (!p.genome.recipe.empty()) seen.insert(p.genome.ToString());
  }
  Batch batch(request, std::move(seen));
  if (request.parents.empty()) {
    ProposeSeeds(request, recipes, rng, batch);
    return batch.Take();
  }

  const ParentInfo& first = request.parents[0];
  const Recipe* recipe = nullptr;
  for (const Recipe* r : recipes) {
    if (r->name() == first.genome.recipe) recipe = r;
  }
  if (recipe == nullptr) {
    // Not built-in (or a recipe that no longer applies): the generic mutator's
    // seeds, else the seeds of every applicable recipe.
    std::vector<const Recipe*> generic;
    for (const Recipe* r : recipes) {
      if (r->family() == "generic") generic.push_back(r);
    }
    ProposeSeeds(request, generic.empty() ? recipes : generic, rng, batch);
    std::vector<Proposal> out = batch.Take();
    for (Proposal& p : out) {
      p.mutation = absl::StrCat("generic:", p.genome.recipe);
      p.parent_ids = {first.node_id};
    }
    return out;
  }
  const Genome genome{recipe->name(), Repair(recipe->space(), first.genome.params)};
  if (request.parents.size() >= 2 && request.parents[1].genome.recipe == recipe->name()) {
    const Genome other{recipe->name(), Repair(recipe->space(), request.parents[1].genome.params)};
    ProposeCrossovers(request, *recipe, genome, other, (request.count + 1) / 2, rng, batch);
  }
  ProposeMutations(request, recipes, first, *recipe, genome, rng, batch);
  return batch.Take();
}

}  // namespace kevo::proposer
