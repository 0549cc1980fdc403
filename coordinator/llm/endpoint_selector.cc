#include "coordinator/llm/endpoint_selector.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"

namespace kevo::llm {

absl::StatusOr<std::unique_ptr<EndpointSelector>> EndpointSelector::Create(const std::vector<EndpointConfig>& endpoints,
                                                                           SelectorOptions options) {
  if (endpoints.empty()) return absl::InvalidArgumentError("no LLM endpoints to select from");
  std::set<std::string> names;
  std::vector<EndpointStats> arms;
  bool any_enabled = false;
  for (const EndpointConfig& e : endpoints) {
    if (e.name.empty()) return absl::InvalidArgumentError("an LLM endpoint has no name");
    if (!names.insert(e.name).second) {
      return absl::InvalidArgumentError(absl::StrCat("duplicate LLM endpoint name ", e.name));
    }
    if (e.weight < 0 || !std::isfinite(e.weight)) {
      return absl::InvalidArgumentError(absl::StrCat("LLM endpoint ", e.name, " has a negative weight"));
    }
    any_enabled |= e.weight > 0;
    EndpointStats arm;
    arm.name = e.name;
    arm.weight = e.weight;
    arms.push_back(std::move(arm));
  }
  if (!any_enabled) return absl::InvalidArgumentError("every LLM endpoint has weight 0");
  return std::unique_ptr<EndpointSelector>(new EndpointSelector(std::move(arms), options));
}

EndpointSelector::EndpointSelector(std::vector<EndpointStats> arms, SelectorOptions options)
    : options_(options), arms_(std::move(arms)), rng_(options.seed) {}

double EndpointSelector::Mean(const EndpointStats& arm) const {
  return options_.objective == SelectorOptions::Objective::kGainPerKiloToken ? arm.gain_per_ktok()
                                                                             : arm.gain_per_call();
}

std::string EndpointSelector::Select() {
  absl::MutexLock l(&mu_);
  // Tie-break noise, drawn for every arm on every call so that the sequence
  // depends only on the seed and the calls made.
  std::uniform_real_distribution<double> tiny(0, 1e-9);
  std::vector<double> noise(arms_.size());
  for (double& n : noise) n = tiny(rng_);

  double weight_sum = 0;
  int enabled = 0;
  for (const EndpointStats& arm : arms_) {
    if (arm.weight > 0) {
      weight_sum += arm.weight;
      ++enabled;
    }
  }
  const double mean_weight = weight_sum / enabled;

  // Unmeasured endpoints first (no outcome yet and not already handed out),
  // heaviest first.
  int best = -1;
  for (size_t i = 0; i < arms_.size(); ++i) {
    const EndpointStats& arm = arms_[i];
    if (arm.weight <= 0 || arm.calls > 0 || arm.selections > 0) continue;
    if (best < 0 || arm.weight + noise[i] > arms_[best].weight + noise[best]) best = static_cast<int>(i);
  }
  if (best < 0) {
    // UCB1 over the measured ones. N counts outcomes; an endpoint handed out
    // but not yet measured counts as one call of mean 0 (so that concurrent
    // callers spread out instead of piling onto it).
    int64_t total = 0;
    for (const EndpointStats& arm : arms_) {
      if (arm.weight > 0) total += std::max<int64_t>(arm.calls, 1);
    }
    const double scale = max_reward_ > 0 ? max_reward_ : 1.0;
    double best_index = -1;
    for (size_t i = 0; i < arms_.size(); ++i) {
      const EndpointStats& arm = arms_[i];
      if (arm.weight <= 0) continue;
      const double n = static_cast<double>(std::max<int64_t>(arm.calls, 1));
      const double bonus = options_.exploration * scale * std::sqrt(arm.weight / mean_weight) *
                           std::sqrt(2.0 * std::log(static_cast<double>(total)) / n);
      const double index = Mean(arm) + bonus + noise[i];
      if (best < 0 || index > best_index) {
        best = static_cast<int>(i);
        best_index = index;
      }
    }
  }
  ++arms_[best].selections;
  return arms_[best].name;
}

absl::Status EndpointSelector::RecordOutcome(const std::string& endpoint, double fitness_gain, int64_t tokens) {
  absl::MutexLock l(&mu_);
  for (EndpointStats& arm : arms_) {
    if (arm.name != endpoint) continue;
    const double gain = std::isfinite(fitness_gain) ? std::max(0.0, fitness_gain) : 0.0;
    ++arm.calls;
    arm.total_gain += gain;
    arm.total_tokens += std::max<int64_t>(0, tokens);
    const double reward = options_.objective == SelectorOptions::Objective::kGainPerKiloToken
                              ? (tokens > 0 ? gain * 1000.0 / static_cast<double>(tokens) : 0.0)
                              : gain;
    max_reward_ = std::max(max_reward_, reward);
    return absl::OkStatus();
  }
  return absl::NotFoundError(absl::StrCat("unknown LLM endpoint ", endpoint));
}

std::vector<EndpointStats> EndpointSelector::Stats() const {
  absl::MutexLock l(&mu_);
  return arms_;
}

}  // namespace kevo::llm
