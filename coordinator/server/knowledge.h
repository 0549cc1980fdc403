// The answers to JobService's knowledge RPCs — ListLlmCalls, SearchKnowledge
// and ListSkills — from the coordinator's store, knowledge base and skill
// memory, and the conversions to their messages that the CLI shares for its
// offline (--db) mode. The RPC functions block on RocksDB scans and the
// Xapian index: JobServiceImpl runs them on its executor, never on a gRPC
// thread. Thread-safe.
#pragma once

#include "absl/status/statusor.h"

#include "coordinator/jobs/manager.h"
#include "coordinator/kb/kb.h"
#include "coordinator/skills/skills.h"
#include "coordinator/store/store.h"
#include "kevo/v1/job.pb.h"

namespace kevo::coordinator {

// What the knowledge RPCs read. All must outlive the calls; a null kb or
// skills answers Unavailable.
struct KnowledgeSources {
  store::Store* store = nullptr;     // the llm_calls family
  jobs::JobManager* jobs = nullptr;  // which jobs exist
  const kb::KnowledgeBase* kb = nullptr;
  const skills::SkillStore* skills = nullptr;
};

// A page of the job's LLM calls, oldest first; records lose "prompt" and
// "answer" unless request.include_text. NotFound for an unknown job;
// InvalidArgument for an empty job id, a page size outside [0, 500] or a
// malformed page token. Pages stop early past 2 MiB of records (at least one
// record per page).
absl::StatusOr<v1::ListLlmCallsResponse> ListLlmCalls(const KnowledgeSources& sources,
                                                      const v1::ListLlmCallsRequest& request);

// Ranked knowledge-base documents. InvalidArgument for a limit outside
// [0, 100] and as kb::KnowledgeBase::Search (no text and no filter, an
// unknown platform or bottleneck).
absl::StatusOr<v1::SearchKnowledgeResponse> SearchKnowledge(const KnowledgeSources& sources,
                                                            const v1::SearchKnowledgeRequest& request);

// Skills, best first. InvalidArgument for a limit outside [0, 1000].
absl::StatusOr<v1::ListSkillsResponse> ListSkills(const KnowledgeSources& sources,
                                                  const v1::ListSkillsRequest& request);

v1::KbDocument ToProto(const kb::KbDoc& doc);
v1::Skill ToProto(const skills::Skill& skill);

}  // namespace kevo::coordinator
