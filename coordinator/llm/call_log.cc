#include "coordinator/llm/call_log.h"

#include <atomic>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"

#include "common/log.h"
#include "coordinator/store/store.h"

namespace kevo::llm {
namespace {

std::string CallKey(const std::string& job_id, const std::string& call_id) {
  return absl::StrCat(job_id, "/", call_id);
}

}  // namespace

std::string NewCallId() {
  static std::atomic<uint32_t> counter{0};
  return absl::StrFormat("c%016d-%04x", absl::ToUnixMicros(absl::Now()), counter.fetch_add(1) & 0xFFFF);
}

absl::Status PutCall(store::Store* store, const nlohmann::json& record, bool sync) {
  const std::string job_id = record.value("job_id", "");
  const std::string call_id = record.value("call_id", "");
  if (job_id.empty() || call_id.empty()) {
    return absl::InvalidArgumentError("an LLM call record needs job_id and call_id");
  }
  // Answers are model output: replace invalid UTF-8 instead of throwing.
  return store->Put(store::Family::kLlmCalls, CallKey(job_id, call_id),
                    record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), sync);
}

absl::StatusOr<nlohmann::json> GetCall(store::Store* store, const std::string& job_id, const std::string& call_id) {
  auto value = store->Get(store::Family::kLlmCalls, CallKey(job_id, call_id));
  if (!value.ok()) return value.status();
  if (!value->has_value()) {
    return absl::NotFoundError(absl::StrCat("no LLM call ", call_id, " in job ", job_id));
  }
  auto parsed = nlohmann::json::parse(**value, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) {
    return absl::DataLossError(absl::StrCat("LLM call ", call_id, " of job ", job_id, " is unreadable"));
  }
  return parsed;
}

absl::StatusOr<std::vector<nlohmann::json>> ListCalls(store::Store* store, const std::string& job_id) {
  bool more = false;
  return ListCallsAfter(store, job_id, "", std::numeric_limits<size_t>::max(), &more);
}

absl::StatusOr<std::vector<nlohmann::json>> ListCallsAfter(store::Store* store, const std::string& job_id,
                                                           const std::string& after_call_id, size_t limit, bool* more) {
  std::vector<nlohmann::json> calls;
  *more = false;
  const std::string after = after_call_id.empty() ? "" : CallKey(job_id, after_call_id);
  absl::Status s = store->Scan(store::Family::kLlmCalls, absl::StrCat(job_id, "/"),
                               [&](std::string_view key, std::string_view value) {
                                 if (key <= after) return true;  // before the page
                                 if (calls.size() >= limit) {
                                   *more = true;
                                   return false;
                                 }
                                 auto parsed = nlohmann::json::parse(value, nullptr, false);
                                 if (parsed.is_discarded() || !parsed.is_object()) {
                                   LogWarning("llm call record ", std::string(key), " is unreadable; skipped");
                                 } else {
                                   calls.push_back(std::move(parsed));
                                 }
                                 return true;
                               });
  if (!s.ok()) return s;
  return calls;
}

}  // namespace kevo::llm
