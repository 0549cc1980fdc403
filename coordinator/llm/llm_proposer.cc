#include "coordinator/llm/llm_proposer.h"

#include <algorithm>
#include <deque>
#include <set>
#include <thread>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include <nlohmann/json.hpp>

#include "common/hash.h"
#include "common/log.h"
#include "common/status.h"
#include "coordinator/kb/kb.h"
#include "coordinator/llm/answer_parser.h"
#include "coordinator/llm/call_log.h"
#include "coordinator/llm/metrics.h"
#include "coordinator/skills/skills.h"

namespace kevo::llm {
namespace {

using nlohmann::json;
using proposer::Proposal;

constexpr size_t kMaxLabelBytes = 120;

// What one call needs, copied off the job loop.
struct CallSpec {
  std::string job_id;
  v1::Task task;
  std::string platform;
  std::optional<proposer::ParentInfo> parent;
  uint64_t seed = 0;
  bool use_skills = true;  // ProposeRequest::use_skills
};

// What one call produced, handed back to the job's proposer.
struct CallResult {
  std::string call_id;
  std::string endpoint;
  int64_t tokens = 0;
  std::string parent_id;
  double parent_fitness = 0;
  std::vector<Proposal> proposals;
  absl::Status status;  // not OK: no candidates (the call failed, or no usable code)
};

// Shared by a job's proposer and the calls it started (which may outlive it).
struct Inbox {
  absl::Mutex mu;
  std::deque<CallResult> done ABSL_GUARDED_BY(mu);
  int in_flight ABSL_GUARDED_BY(mu) = 0;
  bool closed ABSL_GUARDED_BY(mu) = false;  // the proposer is gone
};

// Without surrounding whitespace and markdown emphasis (**, `).
std::string TrimLabel(std::string label) {
  auto decoration = [](char c) { return c == '*' || c == '`' || c == '_'; };
  label = std::string(absl::StripAsciiWhitespace(label));
  while (!label.empty() && decoration(label.back())) label.pop_back();
  size_t start = 0;
  while (start < label.size() && decoration(label[start])) ++start;
  label = std::string(absl::StripAsciiWhitespace(label.substr(start)));
  if (label.size() > kMaxLabelBytes) label = label.substr(0, kMaxLabelBytes);
  return std::string(absl::StripAsciiWhitespace(label));
}

// The last "Transformation: ..." line of `text`, without markdown decoration.
std::string LabelIn(std::string_view text) {
  std::string label;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string line = absl::AsciiStrToLower(std::string(text.substr(pos, end - pos)));
    size_t at = line.find("transformation:");
    if (at != std::string::npos) {
      std::string prefix = line.substr(0, at);
      if (std::all_of(prefix.begin(), prefix.end(),
                      [](char c) { return c == ' ' || c == '*' || c == '#' || c == '-' || c == '_' || c == '`'; })) {
        label = TrimLabel(std::string(text.substr(pos + at + 15, end - pos - at - 15)));
      }
    }
    pos = end + 1;
  }
  return label;
}

class ServiceImpl;

class LlmProposer final : public proposer::Proposer {
 public:
  LlmProposer(std::shared_ptr<ServiceImpl> service, const LlmProposerOptions& options)
      : service_(std::move(service)), options_(options), inbox_(std::make_shared<Inbox>()) {}
  ~LlmProposer() override;

  absl::StatusOr<std::vector<Proposal>> Propose(const proposer::ProposeRequest& request) override;
  std::string name() const override { return "llm"; }
  bool Pending() const override {
    absl::MutexLock l(&inbox_->mu);
    return inbox_->in_flight > 0;
  }
  void Observe(const v1::Node& node, const v1::Evaluation* evaluation) override;

 private:
  struct NodeResult {
    std::string node_id;
    std::string source_hash;
    v1::EvalStatus status = v1::EVAL_STATUS_UNSPECIFIED;
    double fitness = 0;
  };
  struct Call {
    std::string job_id;
    std::string endpoint;
    int64_t tokens = 0;
    double parent_fitness = 0;
    int unresolved = 0;  // candidates not yet dropped or evaluated
    int dropped = 0;     // duplicates of sources the job had already seen
    std::vector<NodeResult> nodes;
  };

  absl::Status Drain();
  void SettleHandedOut();
  void MaybeFinish(const std::string& call_id);
  void Finish(const std::string& call_id, Call& call);

  const std::shared_ptr<ServiceImpl> service_;
  const LlmProposerOptions options_;
  const std::shared_ptr<Inbox> inbox_;
  std::string job_id_;
  std::deque<Proposal> ready_;
  std::map<std::string, std::string> call_by_hash_;  // source hash -> call id
  std::map<std::string, std::string> call_by_node_;  // node id -> call id
  std::vector<Proposal> handed_out_;                 // returned by the last Propose(), not yet taken
  std::map<std::string, int> offers_;                // source hash -> times handed out
  std::map<std::string, Call> calls_;                // calls whose candidates are not all settled
};

class ServiceImpl final : public LlmService, public std::enable_shared_from_this<ServiceImpl> {
 public:
  ServiceImpl(std::map<std::string, std::unique_ptr<ChatClient>> clients, std::unique_ptr<EndpointSelector> selector,
              store::Store* store, const kb::KnowledgeBase* kb, const skills::SkillStore* skills,
              std::shared_ptr<prometheus::Registry> registry, LlmProposerOptions options)
      : clients_(std::move(clients)),
        selector_(std::move(selector)),
        store_(store),
        kb_(kb),
        skills_(skills),
        metrics_(std::move(registry)),
        options_(std::move(options)) {
    int threads = options_.threads;
    if (threads <= 0) {
      threads = 0;
      for (const auto& [name, client] : clients_) threads += client->config().max_concurrency;
      threads = std::clamp(threads, 1, 16);
    }
    for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Work(); });
  }
  ~ServiceImpl() override { Shutdown(); }

  std::unique_ptr<proposer::Proposer> NewProposer() override {
    return std::make_unique<LlmProposer>(shared_from_this(), options_);
  }

  std::vector<EndpointStats> Stats() const override { return selector_->Stats(); }

  void Shutdown() override {
    std::deque<std::function<void(bool)>> dropped;
    {
      absl::MutexLock l(&mu_);
      if (stopping_) return;
      stopping_ = true;
      dropped.swap(queue_);
    }
    for (auto& call : dropped) call(/*run=*/false);  // queued calls end as Cancelled
    for (auto& t : threads_) t.join();
  }

  // Queues one call; its result lands in `inbox`.
  void Submit(std::shared_ptr<Inbox> inbox, CallSpec spec) {
    {
      absl::MutexLock l(&inbox->mu);
      ++inbox->in_flight;
    }
    auto shared_spec = std::make_shared<CallSpec>(std::move(spec));
    absl::MutexLock l(&mu_);
    if (stopping_) {
      Deliver(*inbox, CancelledResult());
      return;
    }
    // Run by a call thread, or cancelled by Shutdown() when never started.
    queue_.push_back(
        [this, inbox, shared_spec](bool run) { Deliver(*inbox, run ? Run(*shared_spec) : CancelledResult()); });
  }

  // Reports a finished call's yield to the selector and the metrics.
  void RecordYield(const std::string& endpoint, double gain, int64_t tokens) {
    absl::Status s = selector_->RecordOutcome(endpoint, gain, tokens);
    if (!s.ok()) LogWarning("llm: ", s.ToString());
    metrics_.RecordYield(endpoint, gain);
  }

  store::Store* store() const { return store_; }

 private:
  static CallResult CancelledResult() {
    CallResult r;
    r.status = absl::CancelledError("the coordinator is shutting down; LLM call not made");
    return r;
  }

  // Hands a result to its proposer, or settles it here when the proposer is
  // gone (the job ended while the call ran).
  void Deliver(Inbox& inbox, CallResult result) {
    bool closed;
    {
      absl::MutexLock l(&inbox.mu);
      --inbox.in_flight;
      closed = inbox.closed;
      if (!closed) inbox.done.push_back(result);
    }
    if (closed && !result.endpoint.empty()) RecordYield(result.endpoint, 0, result.tokens);
  }

  void Work() {
    while (true) {
      std::function<void(bool)> call;
      {
        absl::MutexLock l(&mu_);
        auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || !queue_.empty(); };
        mu_.Await(absl::Condition(&ready));
        if (queue_.empty()) return;  // stopping, nothing left
        call = std::move(queue_.front());
        queue_.pop_front();
      }
      call(/*run=*/true);
    }
  }

  CallResult Run(const CallSpec& spec);

  std::map<std::string, std::unique_ptr<ChatClient>> clients_;
  std::unique_ptr<EndpointSelector> selector_;
  store::Store* const store_;
  const kb::KnowledgeBase* const kb_;
  const skills::SkillStore* const skills_;
  LlmMetrics metrics_;
  const LlmProposerOptions options_;

  absl::Mutex mu_;
  std::deque<std::function<void(bool run)>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

CallResult ServiceImpl::Run(const CallSpec& spec) {
  CallResult result;
  result.call_id = NewCallId();
  const absl::Time start = absl::Now();
  json rec;
  rec["call_id"] = result.call_id;
  rec["job_id"] = spec.job_id;
  rec["platform"] = spec.platform;
  rec["started_unix_micros"] = absl::ToUnixMicros(start);
  rec["parent_id"] = spec.parent ? spec.parent->node_id : "";
  rec["parent_fitness"] = spec.parent ? spec.parent->fitness : 0.0;
  result.parent_id = rec["parent_id"];
  result.parent_fitness = rec["parent_fitness"];

  // Retrieval: documents for the platform, the op family and what limits
  // the parent; skills for (platform, family).
  PromptInputs in;
  in.task = &spec.task;
  in.platform = spec.platform;
  in.parent = spec.parent ? &*spec.parent : nullptr;
  in.candidates = options_.candidates_per_call;
  std::string bottleneck;
  if (spec.parent && spec.parent->evaluation.status() != v1::EVAL_STATUS_UNSPECIFIED) {
    bottleneck = BottleneckLabel(spec.task, spec.parent->evaluation);
  }
  rec["bottleneck"] = bottleneck;
  if (kb_ != nullptr && options_.kb_documents > 0) {
    auto docs = kb_->Search(KnowledgeQuery(spec.task, spec.platform, bottleneck,
                                           spec.parent ? spec.parent->evaluation.diagnostics().message() : "",
                                           options_.kb_documents));
    if (docs.ok()) {
      in.documents = *std::move(docs);
    } else {
      LogWarning("llm call ", result.call_id, ": knowledge-base search: ", docs.status().ToString());
    }
  }
  if (skills_ != nullptr && options_.skills > 0 && spec.use_skills) {
    auto found = skills_->SkillsFor(spec.platform, skills::SkillFamily(spec.task), options_.skills);
    if (found.ok()) {
      in.skills = *std::move(found);
    } else {
      LogWarning("llm call ", result.call_id, ": skills: ", found.status().ToString());
    }
  }
  json doc_ids = json::array(), skill_names = json::array();
  for (const auto& d : in.documents) doc_ids.push_back(d.id);
  for (const auto& s : in.skills) skill_names.push_back(s.transformation);
  rec["kb_documents"] = doc_ids;
  rec["skills"] = skill_names;

  auto store_record = [&](const std::string& outcome) {
    rec["outcome"] = outcome;
    rec["candidates"] = result.proposals.size();
    rec["settled"] = result.proposals.empty();
    rec["nodes"] = json::array();
    absl::Status s = PutCall(store_, rec, /*sync=*/true);
    if (!s.ok()) LogError("llm call ", result.call_id, ": store: ", s.ToString());
  };

  auto prompt = BuildPrompt(in, options_.prompt);
  if (!prompt.ok()) {
    result.status = prompt.status();
    rec["error"] = std::string(prompt.status().message());
    store_record("prompt_error");
    metrics_.RecordCall("", "prompt_error", 0);
    LogWarning("llm call ", result.call_id, " job ", spec.job_id, ": ", prompt.status().ToString());
    return result;
  }
  json messages = json::array();
  for (const auto& m : prompt->messages) messages.push_back({{"role", m.role}, {"content", m.content}});
  rec["prompt"] = messages;
  rec["prompt_included"] = prompt->included;
  rec["prompt_dropped"] = prompt->dropped;
  rec["prompt_tokens_estimated"] = prompt->estimated_tokens;
  for (const auto& part : prompt->dropped) metrics_.RecordPromptDropped(part.substr(0, part.find(':')));

  result.endpoint = selector_->Select();
  ChatClient& client = *clients_.at(result.endpoint);
  rec["endpoint"] = result.endpoint;
  rec["model"] = client.config().model;
  ChatRequest request;
  request.messages = prompt->messages;
  request.max_tokens = options_.max_tokens;
  request.temperature = options_.temperature;
  request.seed = static_cast<int64_t>(spec.seed & 0x7FFFFFFF);
  auto response = client.Complete(request);
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  rec["latency_s"] = seconds;

  if (!response.ok()) {
    result.status = response.status();
    rec["error"] = std::string(response.status().message());
    if (auto partial = PartialContent(response.status())) rec["answer"] = *partial;
    const std::string outcome = absl::StrCat("error:", LlmMetrics::OutcomeLabel(response.status()));
    store_record(outcome);
    metrics_.RecordCall(result.endpoint, outcome, seconds);
    RecordYield(result.endpoint, 0, 0);
    LogWarning("llm call ", result.call_id, " job ", spec.job_id, " endpoint=", result.endpoint,
               " failed: ", response.status().ToString());
    return result;
  }
  result.tokens = response->usage.total();
  rec["model"] = response->model;
  rec["attempts"] = response->attempts;
  rec["http_status"] = response->http_status;
  rec["prompt_tokens"] = response->usage.prompt_tokens;
  rec["completion_tokens"] = response->usage.completion_tokens;
  rec["tokens_estimated"] = response->usage.estimated;
  rec["cost_usd"] = response->cost_usd;
  rec["finish_reason"] = response->finish_reason;
  rec["answer"] = response->content;

  AnswerOutcome outcome = AnswerOutcome::kOk;
  std::vector<AnswerCandidate> found = ParseCandidates(response->content, spec.platform, &outcome);
  metrics_.RecordAnswer(result.endpoint, AnswerOutcomeName(outcome));
  const std::string language = *CandidateLanguage(spec.platform);
  for (AnswerCandidate& c : found) {
    Proposal p;
    p.candidate.set_language(language);
    p.candidate.set_source(std::move(c.source));
    p.mutation = absl::StrCat("llm: ", c.label.empty() ? "rewrite" : c.label);
    if (spec.parent) p.parent_ids.push_back(spec.parent->node_id);
    p.proposer = absl::StrCat("llm:", response->model);
    result.proposals.push_back(std::move(p));
  }
  metrics_.RecordCandidates(result.endpoint, static_cast<int64_t>(result.proposals.size()));
  metrics_.RecordCall(result.endpoint, AnswerOutcomeName(outcome), seconds);
  store_record(AnswerOutcomeName(outcome));
  if (result.proposals.empty()) {
    result.status = absl::NotFoundError(absl::StrCat("LLM call ", result.call_id, " (endpoint ", result.endpoint,
                                                     "): the answer held no usable ", language, " code (",
                                                     AnswerOutcomeName(outcome), "); stored for `kevo llm-log`"));
    RecordYield(result.endpoint, 0, result.tokens);
  }
  LogInfo("llm call ", result.call_id, " job ", spec.job_id, " endpoint=", result.endpoint, " tokens=", result.tokens,
          " latency=", absl::StrFormat("%.2fs", seconds), " outcome=", AnswerOutcomeName(outcome),
          " candidates=", result.proposals.size());
  return result;
}

LlmProposer::~LlmProposer() {
  std::deque<CallResult> left;
  {
    absl::MutexLock l(&inbox_->mu);
    inbox_->closed = true;
    left.swap(inbox_->done);
  }
  // Calls whose candidates never came back: their yield is what is known.
  for (const CallResult& r : left) {
    if (r.status.ok()) service_->RecordYield(r.endpoint, 0, r.tokens);
  }
  for (auto& [id, call] : calls_) Finish(id, call);
}

absl::Status LlmProposer::Drain() {
  std::deque<CallResult> done;
  {
    absl::MutexLock l(&inbox_->mu);
    done.swap(inbox_->done);
  }
  absl::Status failure;
  for (CallResult& r : done) {
    if (!r.status.ok()) {
      if (failure.ok()) failure = r.status;
      continue;
    }
    Call& call = calls_[r.call_id];
    call.job_id = job_id_;
    call.endpoint = r.endpoint;
    call.tokens = r.tokens;
    call.parent_fitness = r.parent_fitness;
    for (Proposal& p : r.proposals) {
      const std::string hash = Sha256Hex(DeterministicBytes(p.candidate));
      if (call_by_hash_.contains(hash)) {  // the same source twice in flight
        ++call.dropped;
        continue;
      }
      call_by_hash_[hash] = r.call_id;
      ++call.unresolved;
      ready_.push_back(std::move(p));
    }
    MaybeFinish(r.call_id);
  }
  return failure;
}

void LlmProposer::SettleHandedOut() {
  // The job loop creates nodes for the proposals it takes right after
  // Propose() returns. One it did not take was a duplicate of a source it had
  // seen, or came after its slots filled up: offered once more, then settled
  // as dropped.
  std::vector<Proposal> left;
  left.swap(handed_out_);
  for (auto p = left.rbegin(); p != left.rend(); ++p) {
    const std::string hash = Sha256Hex(DeterministicBytes(p->candidate));
    if (offers_[hash] < 2) {
      ready_.push_front(std::move(*p));
      continue;
    }
    offers_.erase(hash);
    auto it = call_by_hash_.find(hash);
    if (it == call_by_hash_.end()) continue;
    const std::string call_id = it->second;
    call_by_hash_.erase(it);
    auto c = calls_.find(call_id);
    if (c == calls_.end()) continue;
    ++c->second.dropped;
    --c->second.unresolved;
    MaybeFinish(call_id);
  }
}

absl::StatusOr<std::vector<Proposal>> LlmProposer::Propose(const proposer::ProposeRequest& request) {
  if (request.task == nullptr) return absl::InvalidArgumentError("llm proposer: no task");
  if (request.count < 1) return absl::InvalidArgumentError("llm proposer: count must be at least 1");
  KEVO_RETURN_IF_ERROR(CandidateLanguage(request.platform).status());
  job_id_ = request.job_id;
  SettleHandedOut();
  absl::Status failure = Drain();

  std::vector<Proposal> out;
  while (!ready_.empty() && static_cast<int>(out.size()) < request.count) {
    ++offers_[Sha256Hex(DeterministicBytes(ready_.front().candidate))];
    handed_out_.push_back(ready_.front());
    out.push_back(std::move(ready_.front()));
    ready_.pop_front();
  }
  // Start calls for what is still wanted, within the job's share.
  const int wanted = request.count - static_cast<int>(out.size()) - static_cast<int>(ready_.size());
  if (wanted > 0) {
    int in_flight;
    {
      absl::MutexLock l(&inbox_->mu);
      in_flight = inbox_->in_flight;
    }
    // Calls in flight will deliver too: start only what they will not cover.
    const int per_call = std::max(1, options_.candidates_per_call);
    const int calls = std::min((wanted + per_call - 1) / per_call, options_.max_calls_per_job) - in_flight;
    for (int i = 0; i < calls; ++i) {
      CallSpec spec;
      spec.job_id = job_id_;
      spec.task = *request.task;
      spec.platform = request.platform;
      if (!request.parents.empty()) spec.parent = request.parents.front();
      spec.seed = request.seed + static_cast<uint64_t>(i);
      spec.use_skills = request.use_skills;
      service_->Submit(inbox_, std::move(spec));
    }
  }
  if (out.empty() && !failure.ok()) return failure;
  return out;
}

void LlmProposer::Observe(const v1::Node& node, const v1::Evaluation* evaluation) {
  if (evaluation == nullptr) {
    auto it = call_by_hash_.find(node.source_hash());
    if (it == call_by_hash_.end()) return;
    const std::string call_id = it->second;
    call_by_hash_.erase(it);
    offers_.erase(node.source_hash());
    handed_out_.erase(std::remove_if(handed_out_.begin(), handed_out_.end(),
                                     [&](const Proposal& p) {
                                       return Sha256Hex(DeterministicBytes(p.candidate)) == node.source_hash();
                                     }),
                      handed_out_.end());
    auto c = calls_.find(call_id);
    if (c == calls_.end()) return;
    c->second.nodes.push_back(NodeResult{node.node_id(), node.source_hash()});
    call_by_node_[node.node_id()] = call_id;
    return;
  }
  auto it = call_by_node_.find(node.node_id());
  if (it == call_by_node_.end()) return;
  const std::string call_id = it->second;
  call_by_node_.erase(it);
  auto c = calls_.find(call_id);
  if (c == calls_.end()) return;
  for (NodeResult& n : c->second.nodes) {
    if (n.node_id != node.node_id()) continue;
    n.status = node.status();
    n.fitness = node.fitness();
  }
  --c->second.unresolved;
  MaybeFinish(call_id);
}

void LlmProposer::MaybeFinish(const std::string& call_id) {
  auto c = calls_.find(call_id);
  if (c == calls_.end() || c->second.unresolved > 0) return;
  Finish(call_id, c->second);
  calls_.erase(c);
}

void LlmProposer::Finish(const std::string& call_id, Call& call) {
  double best = 0;
  json nodes = json::array();
  for (const NodeResult& n : call.nodes) {
    best = std::max(best, n.fitness);
    nodes.push_back(
        {{"node_id", n.node_id},
         {"source_hash", n.source_hash},
         {"status", n.status == v1::EVAL_STATUS_UNSPECIFIED ? "NOT_EVALUATED" : v1::EvalStatus_Name(n.status)},
         {"fitness", n.fitness}});
  }
  const double gain = std::max(0.0, best - call.parent_fitness);
  service_->RecordYield(call.endpoint, gain, call.tokens);
  auto rec = GetCall(service_->store(), call.job_id, call_id);
  if (!rec.ok()) {
    LogWarning("llm call ", call_id, ": cannot update its record: ", rec.status().ToString());
    return;
  }
  (*rec)["nodes"] = nodes;
  (*rec)["dropped_duplicates"] = call.dropped;
  (*rec)["gain"] = gain;
  (*rec)["settled"] = true;
  absl::Status s = PutCall(service_->store(), *rec, /*sync=*/false);
  if (!s.ok()) LogWarning("llm call ", call_id, ": cannot update its record: ", s.ToString());
}

class MixedProposer final : public proposer::Proposer {
 public:
  MixedProposer(std::unique_ptr<proposer::Proposer> llm, std::unique_ptr<proposer::Proposer> builtin)
      : llm_(std::move(llm)), builtin_(std::move(builtin)) {}

  absl::StatusOr<std::vector<Proposal>> Propose(const proposer::ProposeRequest& request) override {
    std::vector<Proposal> out;
    absl::Status llm_error;
    auto from_llm = llm_->Propose(request);
    if (from_llm.ok()) {
      out = *std::move(from_llm);
    } else {
      llm_error = from_llm.status();
      LogWarning("job ", request.job_id, ": llm part of llm+builtin: ", llm_error.ToString());
    }
    if (static_cast<int>(out.size()) >= request.count) return out;
    proposer::ProposeRequest rest = request;
    rest.count = request.count - static_cast<int>(out.size());
    auto from_builtin = builtin_->Propose(rest);
    if (from_builtin.ok()) {
      for (Proposal& p : *from_builtin) out.push_back(std::move(p));
      return out;
    }
    // Neither has anything: an error only when the LLM part is not about to
    // deliver either.
    if (!out.empty() || (llm_error.ok() && llm_->Pending())) return out;
    return llm_error.ok() ? from_builtin.status() : llm_error;
  }
  std::string name() const override { return "llm+builtin"; }
  bool Pending() const override { return llm_->Pending(); }
  void Observe(const v1::Node& node, const v1::Evaluation* evaluation) override {
    llm_->Observe(node, evaluation);
    builtin_->Observe(node, evaluation);
  }

 private:
  std::unique_ptr<proposer::Proposer> llm_;
  std::unique_ptr<proposer::Proposer> builtin_;
};

}  // namespace

std::vector<AnswerCandidate> ParseCandidates(const std::string& answer, const std::string& platform,
                                             AnswerOutcome* outcome) {
  ExtractedCode extracted = ClassifyAnswer(answer, AnswerLanguages(platform));
  if (outcome != nullptr) *outcome = extracted.outcome;
  std::vector<AnswerCandidate> out;
  size_t searched = 0;
  for (CodeBlock& block : extracted.blocks) {
    // The label is the last `Transformation:` line between the previous
    // block and this one.
    size_t at = answer.find(block.code, searched);
    std::string label;
    if (at != std::string::npos) {
      label = LabelIn(std::string_view(answer).substr(searched, at - searched));
      searched = at + block.code.size();
    }
    out.push_back(AnswerCandidate{std::move(label), std::move(block.code)});
  }
  return out;
}

std::unique_ptr<proposer::Proposer> MakeMixedProposer(std::unique_ptr<proposer::Proposer> llm,
                                                      std::unique_ptr<proposer::Proposer> builtin) {
  return std::make_unique<MixedProposer>(std::move(llm), std::move(builtin));
}

absl::StatusOr<std::shared_ptr<LlmService>> LlmService::CreateWithClients(
    std::vector<std::unique_ptr<ChatClient>> clients, store::Store* store, const kb::KnowledgeBase* kb,
    const skills::SkillStore* skills, std::shared_ptr<prometheus::Registry> registry, LlmProposerOptions options) {
  if (store == nullptr) return absl::InvalidArgumentError("the LLM proposer needs a store");
  std::vector<EndpointConfig> configs;
  std::map<std::string, std::unique_ptr<ChatClient>> by_name;
  for (auto& c : clients) {
    configs.push_back(c->config());
    by_name[c->config().name] = std::move(c);
  }
  KEVO_ASSIGN_OR_RETURN(auto selector, EndpointSelector::Create(configs, options.selector));
  if (options.max_calls_per_job < 1) {
    return absl::InvalidArgumentError("max_calls_per_job must be at least 1");
  }
  return std::shared_ptr<LlmService>(std::make_shared<ServiceImpl>(std::move(by_name), std::move(selector), store, kb,
                                                                   skills, std::move(registry), std::move(options)));
}

absl::StatusOr<std::shared_ptr<LlmService>> LlmService::Create(const std::vector<EndpointConfig>& endpoints,
                                                               store::Store* store, const kb::KnowledgeBase* kb,
                                                               const skills::SkillStore* skills,
                                                               std::shared_ptr<prometheus::Registry> registry,
                                                               LlmProposerOptions options) {
  std::vector<std::unique_ptr<ChatClient>> clients;
  for (const EndpointConfig& e : endpoints) {
    ClientOptions co;
    co.registry = registry;
    KEVO_ASSIGN_OR_RETURN(auto client, ChatClient::Create(e, co));
    clients.push_back(std::move(client));
  }
  for (const EndpointConfig& e : endpoints) {
    LogInfo("llm endpoint ", e.name, ": ", e.base_url, " model=", e.model, " weight=", e.weight,
            e.api_key_env.empty() && e.api_key_file.empty() ? " (no key)" : " (key loaded)");
  }
  return CreateWithClients(std::move(clients), store, kb, skills, std::move(registry), std::move(options));
}

}  // namespace kevo::llm
