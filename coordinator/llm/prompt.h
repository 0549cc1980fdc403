// Prompts for the LLM proposer: turns (task, platform, parent kernel and what
// its evaluation said, what its other children tried, retrieved knowledge-base
// documents, skills) into chat messages asking for better kernels.
//
// The prompt is a list of named parts. The system message holds what never
// changes within a job and is never trimmed: the role, the constraints (export
// exactly the signature, no vendor-library calls inside the kernel, never
// modify inputs, the answer format) and the platform's instructions (cpu: C++;
// nvidia: CUDA C++; mtia-sim: mtia-c++ against the simulator API; amd: HIP).
// The user message holds the task, the kernel to improve and its feedback,
// siblings, documents and skills. When the estimate (bytes / 4) exceeds the
// token budget, optional parts are dropped least useful first (see
// TrimOrder()) until it fits. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

#include "coordinator/kb/kb.h"
#include "coordinator/llm/chat_client.h"
#include "coordinator/proposer/proposer.h"
#include "coordinator/skills/skills.h"
#include "kevo/v1/task.pb.h"

namespace kevo::llm {

struct PromptInputs {
  const v1::Task* task = nullptr;
  std::string platform;                          // cpu | nvidia | mtia-sim | amd
  const proposer::ParentInfo* parent = nullptr;  // null: first generation (improve the reference)
  std::vector<kb::KbDoc> documents;              // retrieved, best first
  std::vector<skills::Skill> skills;             // best first
  int candidates = 2;                            // how many candidates to ask for
};

struct PromptOptions {
  int64_t token_budget = 12000;  // estimated prompt tokens (bytes / 4), both messages
  int compiler_lines = 30;       // compiler output kept in full before the rest is optional
};

// One named piece of the prompt, as built.
struct PromptPart {
  std::string name;  // "task", "parent", "feedback", "kb:hardware/cpu/simd", ...
  std::string text;
  int drop_rank = 0;  // 0: mandatory; otherwise dropped in increasing rank order
};

struct Prompt {
  std::vector<ChatMessage> messages;  // system, user
  std::vector<std::string> included;  // names of the parts in the prompt, in order
  std::vector<std::string> dropped;   // names of the parts dropped to fit, in the order dropped
  int64_t estimated_tokens = 0;
};

// Builds the prompt. InvalidArgument for a null task or an unknown platform;
// ResourceExhausted when the mandatory parts alone exceed the budget (the
// message gives both numbers).
absl::StatusOr<Prompt> BuildPrompt(const PromptInputs& inputs, const PromptOptions& options = {});

// The kinds of optional part in the order they are dropped (least useful
// first); within a kind, the lower-ranked instance goes first (the
// lowest-scored document, the weakest skill, the oldest sibling):
//   profile (raw counters), kb (documents), skills, siblings,
//   reference (when a parent exists), compiler_rest (compiler output past
//   the first PromptOptions::compiler_lines lines).
const std::vector<std::string>& TrimOrder();

// The candidate language a platform's workers take ("c++", "cuda",
// "mtia-c++", "hip"), and the fence languages accepted in answers for it
// (answer_parser.h names). InvalidArgument for an unknown platform.
absl::StatusOr<std::string> CandidateLanguage(const std::string& platform);
std::vector<std::string> AnswerLanguages(const std::string& platform);

// A short label for what limits the kernel, from its evaluation and the
// task: "compile", "wrong-answer", "nan", "crash", "timeout", "memory",
// "compute" or "latency" ("" when unknown). The knowledge base filters on it.
std::string BottleneckLabel(const v1::Task& task, const v1::Evaluation& evaluation);

// The knowledge-base query the LLM proposer makes for a call on `task` and
// `platform`: the task's name and op family, the parent's bottleneck label
// and its evaluation's diagnostic message as text, the task's description as
// context (it weighs less), and the platform, op family and bottleneck as
// filters. kb_retrieval_test measures
// retrieval with exactly these queries.
kb::KbQuery KnowledgeQuery(const v1::Task& task, const std::string& platform, const std::string& bottleneck,
                           const std::string& diagnostics, int limit);

}  // namespace kevo::llm
