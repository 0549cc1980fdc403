// The LLM proposer: a proposer::Proposer that asks language models for better
// kernels. Per call it picks an endpoint with the EndpointSelector (a bandit
// over measured yield), retrieves knowledge-base documents for the parent's
// platform, op family and bottleneck, takes the skills for (platform,
// family), builds the prompt (prompt.h), calls the endpoint's ChatClient,
// extracts the candidates from the answer (several per answer), and stores
// the call (call_log.h). When the candidates' evaluations finish, the fitness
// they gained over their parent (and the tokens spent) is reported back to the
// selector.
//
// The job loop calls Propose() and must not block on a model: calls run on
// the LlmService's own threads. Propose() hands out the candidates of calls
// that have finished, starts new calls for what is still wanted, and returns
// at once; Pending() says calls are in flight. A call that failed (after the
// client's retries) or whose answer held no usable code is stored, counted,
// and surfaces as one Propose() error (the job loop counts proposer errors),
// never as a crash.
//
// LlmService is per coordinator: the clients, the selector (so yield is
// learnt across jobs), the thread pool. Proposers are per job and are used
// from the job loop thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

#include "coordinator/llm/answer_parser.h"
#include "coordinator/llm/chat_client.h"
#include "coordinator/llm/endpoint_selector.h"
#include "coordinator/llm/prompt.h"
#include "coordinator/proposer/proposer.h"

namespace prometheus {
class Registry;
}
namespace kevo::store {
class Store;
}

namespace kevo::llm {

struct LlmProposerOptions {
  int max_calls_per_job = 2;    // LLM calls in flight for one job
  int candidates_per_call = 2;  // asked for in the prompt (an answer may hold more or fewer)
  int kb_documents = 4;         // retrieved per prompt
  int skills = 6;               // per prompt
  PromptOptions prompt;
  int max_tokens = 0;  // answer limit; 0: the endpoint's default
  std::optional<double> temperature = 0.7;
  SelectorOptions selector;
  int threads = 0;  // call threads; 0: the endpoints' max_concurrency summed, at most 16
};

class LlmService {
 public:
  // Makes one ChatClient per endpoint (ChatClient::Create's errors: a bad
  // URL, a missing key variable or file, ...) and the selector
  // (InvalidArgument: no endpoint enabled). `store` must outlive the service;
  // `kb` and `skills` may be null (prompts then go without them) and must
  // outlive it too. `registry` may be null (no metrics).
  static absl::StatusOr<std::shared_ptr<LlmService>> Create(const std::vector<EndpointConfig>& endpoints,
                                                            store::Store* store, const kb::KnowledgeBase* kb,
                                                            const skills::SkillStore* skills,
                                                            std::shared_ptr<prometheus::Registry> registry,
                                                            LlmProposerOptions options = {});
  // The same with clients already made (tests inject them); their names are
  // the endpoints' names.
  static absl::StatusOr<std::shared_ptr<LlmService>> CreateWithClients(std::vector<std::unique_ptr<ChatClient>> clients,
                                                                       store::Store* store, const kb::KnowledgeBase* kb,
                                                                       const skills::SkillStore* skills,
                                                                       std::shared_ptr<prometheus::Registry> registry,
                                                                       LlmProposerOptions options = {});

  virtual ~LlmService() = default;

  // A proposer for one job. Thread-safe.
  virtual std::unique_ptr<proposer::Proposer> NewProposer() = 0;
  // The selector's view of each endpoint (calls, gain, tokens). Thread-safe.
  virtual std::vector<EndpointStats> Stats() const = 0;
  // Waits for the calls in flight (each bounded by its client's timeouts and
  // retries) and stops the threads; later calls fail with Cancelled. Called by
  // the destructor; idempotent.
  virtual void Shutdown() = 0;
};

// "llm+builtin": candidates from `llm` when it has some ready, the rest of
// each request from `builtin`, so the workers stay busy while the model
// thinks. Observe() reaches both; name() is "llm+builtin".
std::unique_ptr<proposer::Proposer> MakeMixedProposer(std::unique_ptr<proposer::Proposer> llm,
                                                      std::unique_ptr<proposer::Proposer> builtin);

// A candidate found in an answer.
struct AnswerCandidate {
  std::string label;  // the `Transformation:` line before its block; "" when none
  std::string source;
};
// The usable candidates of `answer` for `platform`, in order, with the
// outcome (answer_parser.h). Never fails.
std::vector<AnswerCandidate> ParseCandidates(const std::string& answer, const std::string& platform,
                                             AnswerOutcome* outcome);

}  // namespace kevo::llm
