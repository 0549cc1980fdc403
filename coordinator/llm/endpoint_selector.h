// Picks which endpoint (model) the next LLM call goes to, by measured yield:
// a UCB1 bandit over the configured endpoints whose reward is the fitness a
// call's candidates gained, per call or per 1000 tokens. Deterministic for a
// seed (the only randomness breaks ties). Thread-safe.
//
// Weights (EndpointConfig::weight) are priors: endpoints are tried first in
// order of weight, and an endpoint's exploration bonus scales with
// sqrt(weight / mean weight), so a heavier endpoint gets more traffic while
// the measurements are close. Weight 0 disables an endpoint. Measured yield
// dominates as calls accumulate.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

#include "coordinator/llm/chat_client.h"

namespace kevo::llm {

struct SelectorOptions {
  enum class Objective {
    kGainPerCall,       // mean fitness gain per call
    kGainPerKiloToken,  // fitness gain per 1000 tokens (prompt + completion)
  };
  Objective objective = Objective::kGainPerCall;
  uint64_t seed = 1;
  double exploration = 1.0;  // multiplies UCB1's sqrt(2 ln N / n) bonus
};

struct EndpointStats {
  std::string name;
  double weight = 0;
  int64_t selections = 0;  // Select() returned it
  int64_t calls = 0;       // RecordOutcome() calls
  double total_gain = 0;   // negative gains count as 0
  int64_t total_tokens = 0;
  double gain_per_call() const { return calls == 0 ? 0 : total_gain / calls; }
  double gain_per_ktok() const {
    return total_tokens == 0 ? 0 : total_gain * 1000.0 / static_cast<double>(total_tokens);
  }
};

class EndpointSelector {
 public:
  // InvalidArgument: no endpoints, a duplicate or empty name, a negative
  // weight, or every weight 0.
  static absl::StatusOr<std::unique_ptr<EndpointSelector>> Create(const std::vector<EndpointConfig>& endpoints,
                                                                  SelectorOptions options = {});

  // The name of the endpoint to call next.
  std::string Select();

  // Records what a call to `endpoint` yielded: the fitness its candidates
  // gained over their parent (0 when they failed; negative counts as 0) and
  // the tokens it used. NotFound for an unknown endpoint.
  absl::Status RecordOutcome(const std::string& endpoint, double fitness_gain, int64_t tokens);

  std::vector<EndpointStats> Stats() const;

 private:
  EndpointSelector(std::vector<EndpointStats> arms, SelectorOptions options);
  double Mean(const EndpointStats& arm) const;

  const SelectorOptions options_;
  mutable absl::Mutex mu_;
  std::vector<EndpointStats> arms_ ABSL_GUARDED_BY(mu_);
  double max_reward_ ABSL_GUARDED_BY(mu_) = 0;  // largest per-call reward seen (the scale)
  std::mt19937_64 rng_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kevo::llm
