#include "coordinator/llm/metrics.h"

#include "absl/strings/ascii.h"
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

namespace kevo::llm {

// Families are looked up on each call: the registry merges families of the
// same name (InsertBehavior::Merge, its default) and returns the existing
// metric for the same labels, so every client sharing a registry shares the
// series. LLM calls take seconds; the lookups cost nothing in comparison.

LlmMetrics::LlmMetrics(std::shared_ptr<prometheus::Registry> registry) : registry_(std::move(registry)) {}

void LlmMetrics::RecordRequest(const std::string& endpoint, const absl::Status& outcome) {
  if (!registry_) return;
  prometheus::BuildCounter()
      .Name("kevo_llm_requests_total")
      .Help("LLM chat requests by final outcome")
      .Register(*registry_)
      .Add({{"endpoint", endpoint}, {"outcome", OutcomeLabel(outcome)}})
      .Increment();
}

void LlmMetrics::RecordRetry(const std::string& endpoint) {
  if (!registry_) return;
  prometheus::BuildCounter()
      .Name("kevo_llm_retries_total")
      .Help("LLM HTTP attempts that were retried")
      .Register(*registry_)
      .Add({{"endpoint", endpoint}})
      .Increment();
}

void LlmMetrics::RecordTokens(const std::string& endpoint, int64_t prompt, int64_t completion) {
  if (!registry_) return;
  auto& family = prometheus::BuildCounter()
                     .Name("kevo_llm_tokens_total")
                     .Help("LLM tokens by kind (prompt, completion)")
                     .Register(*registry_);
  family.Add({{"endpoint", endpoint}, {"kind", "prompt"}}).Increment(static_cast<double>(prompt));
  family.Add({{"endpoint", endpoint}, {"kind", "completion"}}).Increment(static_cast<double>(completion));
}

void LlmMetrics::RecordCost(const std::string& endpoint, double usd) {
  if (!registry_) return;
  prometheus::BuildCounter()
      .Name("kevo_llm_cost_usd_total")
      .Help("LLM cost in USD at the configured prices")
      .Register(*registry_)
      .Add({{"endpoint", endpoint}})
      .Increment(usd);
}

void LlmMetrics::RecordAttemptSeconds(const std::string& endpoint, double seconds) {
  if (!registry_) return;
  prometheus::BuildHistogram()
      .Name("kevo_llm_request_seconds")
      .Help("Duration of one LLM HTTP attempt")
      .Register(*registry_)
      .Add({{"endpoint", endpoint}},
           prometheus::Histogram::BucketBoundaries{0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600})
      .Observe(seconds);
}

void LlmMetrics::RecordAnswer(const std::string& endpoint, const std::string& outcome) {
  if (!registry_) return;
  prometheus::BuildCounter()
      .Name("kevo_llm_answers_total")
      .Help("Parsed LLM answers by outcome (ok, no_code, empty)")
      .Register(*registry_)
      .Add({{"endpoint", endpoint}, {"outcome", outcome}})
      .Increment();
}

void LlmMetrics::RecordCall(const std::string& endpoint, const std::string& outcome, double seconds) {
  if (!registry_) return;
  prometheus::BuildCounter()
      .Name("kevo_llm_calls_total")
      .Help("LLM proposer calls by outcome")
      .Register(*registry_)
      .Add({{"endpoint", endpoint}, {"outcome", outcome}})
      .Increment();
  if (endpoint.empty()) return;  // never reached an endpoint
  prometheus::BuildHistogram()
      .Name("kevo_llm_call_seconds")
      .Help("Duration of one LLM proposer call, retries included")
      .Register(*registry_)
      .Add({{"endpoint", endpoint}},
           prometheus::Histogram::BucketBoundaries{0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800})
      .Observe(seconds);
}

void LlmMetrics::RecordCandidates(const std::string& endpoint, int64_t count) {
  if (!registry_) return;
  prometheus::BuildCounter()
      .Name("kevo_llm_candidates_total")
      .Help("Candidate kernels extracted from LLM answers")
      .Register(*registry_)
      .Add({{"endpoint", endpoint}})
      .Increment(static_cast<double>(count));
}

void LlmMetrics::RecordYield(const std::string& endpoint, double gain) {
  if (!registry_) return;
  prometheus::BuildCounter()
      .Name("kevo_llm_fitness_gain_total")
      .Help("Fitness gained over their parents by the candidates of LLM calls")
      .Register(*registry_)
      .Add({{"endpoint", endpoint}})
      .Increment(gain > 0 ? gain : 0);
}

void LlmMetrics::RecordPromptDropped(const std::string& kind) {
  if (!registry_) return;
  prometheus::BuildCounter()
      .Name("kevo_llm_prompt_parts_dropped_total")
      .Help("Prompt parts dropped to fit the token budget, by kind")
      .Register(*registry_)
      .Add({{"kind", kind}})
      .Increment();
}

std::string LlmMetrics::OutcomeLabel(const absl::Status& status) {
  if (status.ok()) return "ok";
  return absl::AsciiStrToLower(absl::StatusCodeToString(status.code()));
}

}  // namespace kevo::llm
