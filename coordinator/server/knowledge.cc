#include "coordinator/server/knowledge.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include <nlohmann/json.hpp>

#include "common/status.h"
#include "coordinator/llm/call_log.h"

namespace kevo::coordinator {
namespace {

constexpr int kDefaultCallsPage = 50;
constexpr int kMaxCallsPage = 500;
// Pages stay under gRPC's default 4 MiB message limit (one record past it
// still goes, alone: the CLI accepts 64 MiB).
constexpr size_t kMaxPageBytes = 2 << 20;
constexpr int kDefaultDocuments = 5;
constexpr int kMaxDocuments = 100;
constexpr int kDefaultSkills = 20;
constexpr int kMaxSkills = 1000;

// `requested`, or `fallback` when 0; InvalidArgument outside [0, max].
absl::StatusOr<int> Limit(const char* field, int requested, int fallback, int max) {
  if (requested < 0 || requested > max) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " must be between 0 (the default, ", fallback, ") and ", max, "; got ", requested));
  }
  return requested == 0 ? fallback : requested;
}

}  // namespace

absl::StatusOr<v1::ListLlmCallsResponse> ListLlmCalls(const KnowledgeSources& sources,
                                                      const v1::ListLlmCallsRequest& request) {
  if (request.job_id().empty()) {
    return absl::InvalidArgumentError("ListLlmCallsRequest.job_id is empty");
  }
  KEVO_ASSIGN_OR_RETURN(int page_size,
                        Limit("ListLlmCallsRequest.page_size", request.page_size(), kDefaultCallsPage, kMaxCallsPage));
  // A token is the last call id of the previous page; a '/' would reach
  // into another job's keys.
  if (absl::StrContains(request.page_token(), '/')) {
    return absl::InvalidArgumentError(
        absl::StrCat("ListLlmCallsRequest.page_token '", request.page_token(), "' is not one this server handed out"));
  }
  KEVO_RETURN_IF_ERROR(sources.jobs->Get(request.job_id()).status());
  bool more = false;
  KEVO_ASSIGN_OR_RETURN(std::vector<nlohmann::json> calls,
                        llm::ListCallsAfter(sources.store, request.job_id(), request.page_token(),
                                            static_cast<size_t>(page_size), &more));
  v1::ListLlmCallsResponse out;
  size_t bytes = 0;
  for (size_t i = 0; i < calls.size(); ++i) {
    nlohmann::json& c = calls[i];
    if (!request.include_text()) {
      c.erase("prompt");
      c.erase("answer");
    }
    std::string text = c.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    if (i > 0 && bytes + text.size() > kMaxPageBytes) {
      more = true;
      break;
    }
    bytes += text.size();
    v1::LlmCall* call = out.add_calls();
    call->set_call_id(c.value("call_id", ""));
    call->set_record_json(std::move(text));
  }
  if (more && out.calls_size() > 0) {
    out.set_next_page_token(out.calls(out.calls_size() - 1).call_id());
  }
  return out;
}

absl::StatusOr<v1::SearchKnowledgeResponse> SearchKnowledge(const KnowledgeSources& sources,
                                                            const v1::SearchKnowledgeRequest& request) {
  if (sources.kb == nullptr) return absl::UnavailableError("this coordinator has no knowledge base");
  KEVO_ASSIGN_OR_RETURN(int limit,
                        Limit("SearchKnowledgeRequest.limit", request.limit(), kDefaultDocuments, kMaxDocuments));
  kb::KbQuery q;
  q.text = request.query();
  q.platform = request.platform();
  q.family = request.family();
  q.bottleneck = request.bottleneck();
  q.limit = limit;
  KEVO_ASSIGN_OR_RETURN(std::vector<kb::KbDoc> docs, sources.kb->Search(q));
  v1::SearchKnowledgeResponse out;
  for (const kb::KbDoc& d : docs) *out.add_documents() = ToProto(d);
  return out;
}

absl::StatusOr<v1::ListSkillsResponse> ListSkills(const KnowledgeSources& sources,
                                                  const v1::ListSkillsRequest& request) {
  if (sources.skills == nullptr) return absl::UnavailableError("this coordinator has no skill memory");
  KEVO_ASSIGN_OR_RETURN(int limit, Limit("ListSkillsRequest.limit", request.limit(), kDefaultSkills, kMaxSkills));
  KEVO_ASSIGN_OR_RETURN(std::vector<skills::Skill> found,
                        sources.skills->SkillsFor(request.platform(), request.family(), limit));
  v1::ListSkillsResponse out;
  for (const skills::Skill& s : found) *out.add_skills() = ToProto(s);
  return out;
}

v1::KbDocument ToProto(const kb::KbDoc& doc) {
  v1::KbDocument out;
  out.set_id(doc.id);
  out.set_title(doc.title);
  out.set_path(doc.path);
  out.set_score(doc.score);
  out.set_snippet(kb::Snippet(doc));
  out.set_text(doc.text);
  return out;
}

v1::Skill ToProto(const skills::Skill& skill) {
  v1::Skill out;
  out.set_platform(skill.platform);
  out.set_family(skill.family);
  out.set_transformation(skill.transformation);
  out.set_mean_gain(skill.mean_gain);
  out.set_evidence_count(skill.evidence_count);
  for (const std::string& id : skill.node_ids) out.add_node_ids(id);
  out.set_summary(skill.summary);
  return out;
}

}  // namespace kevo::coordinator
