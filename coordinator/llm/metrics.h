// Prometheus metrics of the LLM client, shared by every ChatClient made with
// the same registry:
//   kevo_llm_requests_total{endpoint,outcome}   Complete() calls by final outcome
//                                               (ok, unavailable, deadline_exceeded,
//                                               invalid_argument, data_loss, ...)
//   kevo_llm_retries_total{endpoint}            retried attempts
//   kevo_llm_tokens_total{endpoint,kind}        kind = prompt | completion
//   kevo_llm_cost_usd_total{endpoint}           from the endpoint's prices
//   kevo_llm_request_seconds{endpoint}          histogram, one sample per HTTP attempt
//   kevo_llm_answers_total{endpoint,outcome}    parsed answers: ok | no_code | empty
// and of the LLM proposer (llm_proposer.h):
//   kevo_llm_calls_total{endpoint,outcome}      proposer calls: ok | no_code | empty |
//                                               unterminated | error:<code> | prompt_error
//   kevo_llm_call_seconds{endpoint}             histogram: a whole call, retries included
//   kevo_llm_candidates_total{endpoint}         candidates extracted from answers
//   kevo_llm_fitness_gain_total{endpoint}       fitness the calls' candidates gained (yield)
//   kevo_llm_prompt_parts_dropped_total{kind}   prompt parts dropped to fit the token budget
// All methods are no-ops when made with a null registry. Thread-safe.
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"

namespace prometheus {
class Registry;
}

namespace kevo::llm {

class LlmMetrics {
 public:
  explicit LlmMetrics(std::shared_ptr<prometheus::Registry> registry);

  void RecordRequest(const std::string& endpoint, const absl::Status& outcome);
  void RecordRetry(const std::string& endpoint);
  void RecordTokens(const std::string& endpoint, int64_t prompt, int64_t completion);
  void RecordCost(const std::string& endpoint, double usd);
  void RecordAttemptSeconds(const std::string& endpoint, double seconds);
  // `outcome`: "ok", "no_code", "empty" (see answer_parser.h).
  void RecordAnswer(const std::string& endpoint, const std::string& outcome);
  void RecordCall(const std::string& endpoint, const std::string& outcome, double seconds);
  void RecordCandidates(const std::string& endpoint, int64_t count);
  void RecordYield(const std::string& endpoint, double gain);
  // `kind`: a prompt part's kind (prompt.h TrimOrder()).
  void RecordPromptDropped(const std::string& kind);

  // "ok", "unavailable", "deadline_exceeded", ... for a status code.
  static std::string OutcomeLabel(const absl::Status& status);

 private:
  std::shared_ptr<prometheus::Registry> registry_;
};

}  // namespace kevo::llm
