// The record of every LLM call the proposer makes, kept in the coordinator's
// RocksDB (column family `llm_calls`, key "<job id>/<call id>", value JSON):
// the prompt, the answer, the endpoint and model, tokens, latency, cost, the
// outcome, and the nodes its candidates became with their results. `kevo
// llm-log JOB` prints them. API keys are never part of a record (the client
// never hands them out, and redacts them from error messages).
//
// Fields (docs/llm.md lists them with their meaning): call_id, job_id,
// endpoint, model, platform, parent_id, parent_fitness, started_unix_micros,
// latency_s, attempts, http_status, prompt_tokens, completion_tokens,
// tokens_estimated, cost_usd, finish_reason, outcome, error, candidates,
// prompt (list of {role, content}), prompt_included, prompt_dropped,
// kb_documents, skills, bottleneck, answer, nodes (list of {node_id,
// source_hash, status, fitness}), settled, gain.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include <nlohmann/json.hpp>

namespace kevo::store {
class Store;
}

namespace kevo::llm {

// A new call id, unique within the process and sorting by start time.
std::string NewCallId();

// Writes `record` (which must hold "job_id" and "call_id"). `sync`: durable
// before returning. Returns the store's error. Thread-safe.
absl::Status PutCall(store::Store* store, const nlohmann::json& record, bool sync);

// The record of one call; NotFound when absent, DataLoss when unreadable.
absl::StatusOr<nlohmann::json> GetCall(store::Store* store, const std::string& job_id, const std::string& call_id);

// Every call of `job_id`, oldest first. Unreadable records are skipped (and
// logged). Returns the store's error.
absl::StatusOr<std::vector<nlohmann::json>> ListCalls(store::Store* store, const std::string& job_id);

// One page of ListCalls: at most `limit` (> 0) calls of `job_id` whose call
// id sorts after `after_call_id` (empty: from the first), oldest first.
// `*more` is set when calls remain past the page. Returns the store's error.
absl::StatusOr<std::vector<nlohmann::json>> ListCallsAfter(store::Store* store, const std::string& job_id,
                                                           const std::string& after_call_id, size_t limit, bool* more);

}  // namespace kevo::llm
