// The LLM proposer against the fake OpenAI-compatible server over real HTTP
// on 127.0.0.1, with a RocksDB store in a temporary folder: answers become
// proposals (several per answer) without blocking the caller, every call is
// stored, garbage and failed calls are stored, counted and reported as
// errors (never a crash), 429 / 5xx are retried by the client, yield goes
// back to the endpoint selector once the candidates are evaluated, and
// llm+builtin fills from the built-in proposer while the model thinks.
#include "coordinator/llm/llm_proposer.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <prometheus/registry.h>

#include "common/hash.h"
#include "common/task/task_loader.h"
#include "coordinator/llm/call_log.h"
#include "coordinator/store/store.h"
#include "tests/llm/fake_openai_server.h"

namespace kevo::llm {
namespace {

using testing::FakeOpenAiServer;
using testing::FakeReply;
using ::testing::HasSubstr;

constexpr char kTwoCandidates[] =
    "Two ideas.\n\nTransformation: vectorise rows with AVX2\n```cpp\n// CANDIDATE-ONE\n"
    "extern \"C\" void softmax(const float* x, float* y, long rows, long cols) {}\n```\n\n"
    "**Transformation:** fuse max and sum passes\n```c++\n// CANDIDATE-TWO\n"
    "extern \"C\" void softmax(const float* x, float* y, long rows, long cols) {}\n```\n";

class FakeKb final : public kb::KnowledgeBase {
 public:
  absl::StatusOr<std::vector<kb::KbDoc>> Search(const kb::KbQuery& query) const override {
    last_query = query;
    kb::KbDoc d;
    d.id = "hardware/cpu/fake";
    d.title = "Fake CPU notes";
    d.text = "DOC-FROM-FAKE-KB: stream rows through the cache.";
    d.score = 1;
    return std::vector<kb::KbDoc>{d};
  }
  mutable kb::KbQuery last_query;
};

class FakeSkills final : public skills::SkillStore {
 public:
  absl::Status Distil(const v1::Job&, const std::vector<v1::Node>&) override { return absl::OkStatus(); }
  absl::StatusOr<std::vector<skills::Skill>> SkillsFor(const std::string& platform, const std::string& family,
                                                       int limit) const override {
    skills::Skill s;
    s.platform = platform;
    s.family = family;
    s.transformation = "SKILL-FROM-MEMORY";
    s.mean_gain = 1.7;
    s.evidence_count = 2;
    return std::vector<skills::Skill>{s};
  }
};

// Always proposes one fresh "builtin" candidate per wanted slot.
class StubBuiltin final : public proposer::Proposer {
 public:
  absl::StatusOr<std::vector<proposer::Proposal>> Propose(const proposer::ProposeRequest& request) override {
    std::vector<proposer::Proposal> out;
    for (int i = 0; i < request.count; ++i) {
      proposer::Proposal p;
      p.candidate.set_language("c++");
      p.candidate.set_source(absl::StrCat("// builtin ", n_++, "\n"));
      p.proposer = "builtin";
      out.push_back(p);
    }
    return out;
  }
  std::string name() const override { return "builtin"; }

 private:
  int n_ = 0;
};

double MetricValue(prometheus::Registry& registry, const std::string& name,
                   const std::map<std::string, std::string>& labels) {
  for (const prometheus::MetricFamily& family : registry.Collect()) {
    if (family.name != name) continue;
    for (const prometheus::ClientMetric& metric : family.metric) {
      std::map<std::string, std::string> have;
      for (const auto& label : metric.label) have[label.name] = label.value;
      bool match = true;
      for (const auto& [k, v] : labels) match = match && have[k] == v;
      if (match) return metric.counter.value;
    }
  }
  return 0;
}

class LlmProposerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* src = std::getenv("KEVO_SOURCE_DIR");
    auto task = task::LoadTaskDir(absl::StrCat(src == nullptr ? "." : src, "/tasks/softmax"));
    ASSERT_TRUE(task.ok()) << task.status();
    task_ = *task;
    dir_ = (std::filesystem::path(::testing::TempDir()) /
            absl::StrCat("kevo_llm_proposer_", ::testing::UnitTest::GetInstance()->current_test_info()->name(), "_",
                         getpid()))
               .string();
    std::filesystem::remove_all(dir_);
    auto store = store::Store::Open(dir_);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    auto server = FakeOpenAiServer::Start();
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    registry_ = std::make_shared<prometheus::Registry>();
  }

  void TearDown() override {
    service_.reset();
    server_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  void MakeService(LlmProposerOptions options = {}) {
    EndpointConfig e;
    e.name = "fake";
    e.base_url = server_->base_url();
    e.model = "fake-coder";
    e.max_retries = 3;
    e.timeouts.total = absl::Seconds(20);
    ClientOptions co;
    co.registry = registry_;
    co.sleep = [](absl::Duration) {};  // retries without waiting
    auto client = ChatClient::Create(e, co);
    ASSERT_TRUE(client.ok()) << client.status();
    std::vector<std::unique_ptr<ChatClient>> clients;
    clients.push_back(*std::move(client));
    auto service = LlmService::CreateWithClients(std::move(clients), store_.get(), &kb_, &skills_, registry_, options);
    ASSERT_TRUE(service.ok()) << service.status();
    service_ = *std::move(service);
  }

  proposer::ProposeRequest Request(int count) {
    proposer::ProposeRequest req;
    req.task = &task_;
    req.platform = "cpu";
    req.count = count;
    req.job_id = "j-test";
    proposer::ParentInfo parent;
    parent.node_id = "n00001";
    parent.fitness = 1.25;
    parent.candidate.set_language("c++");
    parent.candidate.set_source("// PARENT-SOURCE\n");
    parent.evaluation.set_status(v1::OK);
    parent.evaluation.set_speedup(1.25);
    parent.evaluation.mutable_timing()->set_median_s(0.004);
    parent.evaluation.mutable_baseline()->set_median_s(0.005);
    req.parents.push_back(parent);
    return req;
  }

  // Waits (with a deadline) until no call is in flight.
  static void AwaitIdle(const proposer::Proposer& p) {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (p.Pending() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(5));
    ASSERT_FALSE(p.Pending()) << "LLM call still in flight after 30s";
  }

  std::vector<nlohmann::json> Calls() {
    auto calls = ListCalls(store_.get(), "j-test");
    EXPECT_TRUE(calls.ok()) << calls.status();
    return calls.ok() ? *calls : std::vector<nlohmann::json>{};
  }

  // Serves kTwoCandidates and returns a proposer whose first call's two
  // proposals are in `got`.
  std::unique_ptr<proposer::Proposer> ProposerWithTwoReady(std::vector<proposer::Proposal>* got) {
    FakeReply reply;
    reply.content = kTwoCandidates;
    server_->SetDefault(reply);
    MakeService();
    auto proposer = service_->NewProposer();
    EXPECT_TRUE(proposer->Propose(Request(2)).ok());
    AwaitIdle(*proposer);
    auto first = proposer->Propose(Request(2));
    EXPECT_TRUE(first.ok()) << first.status();
    if (first.ok()) *got = *std::move(first);
    return proposer;
  }

  static v1::Node NodeFor(const std::string& id, const proposer::Proposal& p) {
    v1::Node n;
    n.set_node_id(id);
    n.set_job_id("j-test");
    n.set_source_hash(Sha256Hex(DeterministicBytes(p.candidate)));
    n.set_state(v1::NODE_EVALUATING);
    return n;
  }

  v1::Task task_;
  std::string dir_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<FakeOpenAiServer> server_;
  std::shared_ptr<prometheus::Registry> registry_;
  FakeKb kb_;
  FakeSkills skills_;
  std::shared_ptr<LlmService> service_;
};

TEST_F(LlmProposerTest, GoodAnswerBecomesProposalsAndTheCallIsStored) {
  FakeReply reply;
  reply.content = kTwoCandidates;
  server_->SetDefault(reply);
  MakeService();
  auto proposer = service_->NewProposer();
  EXPECT_EQ(proposer->name(), "llm");

  // The first call returns at once: the model is asked in the background.
  auto first = proposer->Propose(Request(2));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->empty());
  AwaitIdle(*proposer);
  auto got = proposer->Propose(Request(2));
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 2u);
  EXPECT_THAT((*got)[0].candidate.source(), HasSubstr("CANDIDATE-ONE"));
  EXPECT_THAT((*got)[1].candidate.source(), HasSubstr("CANDIDATE-TWO"));
  EXPECT_EQ((*got)[0].candidate.language(), "c++");
  EXPECT_EQ((*got)[0].mutation, "llm: vectorise rows with AVX2");
  EXPECT_EQ((*got)[1].mutation, "llm: fuse max and sum passes");
  EXPECT_EQ((*got)[0].proposer, "llm:fake-coder");
  EXPECT_THAT((*got)[0].parent_ids, ::testing::ElementsAre("n00001"));
  EXPECT_EQ(server_->requests().size(), 1u);

  // What went to the model: the parent, its feedback, the documents and the
  // skills; the knowledge base was asked for the parent's bottleneck.
  const std::string body = server_->requests()[0].body;
  EXPECT_THAT(body, HasSubstr("PARENT-SOURCE"));
  EXPECT_THAT(body, HasSubstr("speedup 1.25x"));
  EXPECT_THAT(body, HasSubstr("DOC-FROM-FAKE-KB"));
  EXPECT_THAT(body, HasSubstr("SKILL-FROM-MEMORY"));
  EXPECT_EQ(kb_.last_query.platform, "cpu");
  EXPECT_EQ(kb_.last_query.family, "softmax");
  EXPECT_EQ(kb_.last_query.bottleneck, "memory");

  auto calls = Calls();
  ASSERT_EQ(calls.size(), 1u);
  const nlohmann::json& c = calls[0];
  EXPECT_EQ(c["job_id"], "j-test");
  EXPECT_EQ(c["endpoint"], "fake");
  EXPECT_EQ(c["model"], "fake-coder");
  EXPECT_EQ(c["outcome"], "ok");
  EXPECT_EQ(c["candidates"], 2);
  EXPECT_EQ(c["parent_id"], "n00001");
  EXPECT_EQ(c["answer"], kTwoCandidates);
  EXPECT_EQ(c["attempts"], 1);
  EXPECT_GT(c["prompt_tokens"].get<int64_t>(), 0);
  EXPECT_GT(c["completion_tokens"].get<int64_t>(), 0);
  EXPECT_GE(c["latency_s"].get<double>(), 0.0);
  EXPECT_EQ(c["kb_documents"], nlohmann::json::array({"hardware/cpu/fake"}));
  ASSERT_EQ(c["prompt"].size(), 2u);
  EXPECT_THAT(c["prompt"][1]["content"].get<std::string>(), HasSubstr("DOC-FROM-FAKE-KB"));
  EXPECT_FALSE(c["settled"].get<bool>());

  // The job loop creates the nodes and records their results: the call's
  // yield (best child 2.0 over its parent's 1.25) reaches the selector and
  // the stored record.
  proposer->Observe(NodeFor("n00002", (*got)[0]), nullptr);
  proposer->Observe(NodeFor("n00003", (*got)[1]), nullptr);
  v1::Node done = NodeFor("n00002", (*got)[0]);
  done.set_state(v1::NODE_DONE);
  done.set_status(v1::OK);
  done.set_fitness(2.0);
  v1::Evaluation e;
  e.set_status(v1::OK);
  proposer->Observe(done, &e);
  EXPECT_FALSE(Calls()[0]["settled"].get<bool>());  // one candidate still evaluating
  v1::Node wrong = NodeFor("n00003", (*got)[1]);
  wrong.set_state(v1::NODE_DONE);
  wrong.set_status(v1::WRONG_ANSWER);
  e.set_status(v1::WRONG_ANSWER);
  proposer->Observe(wrong, &e);
  const nlohmann::json settled = Calls()[0];
  EXPECT_TRUE(settled["settled"].get<bool>());
  EXPECT_NEAR(settled["gain"].get<double>(), 0.75, 1e-9);
  ASSERT_EQ(settled["nodes"].size(), 2u);
  EXPECT_EQ(settled["nodes"][0]["node_id"], "n00002");
  EXPECT_EQ(settled["nodes"][0]["status"], "OK");
  EXPECT_EQ(settled["nodes"][1]["status"], "WRONG_ANSWER");
  auto stats = service_->Stats();
  ASSERT_EQ(stats.size(), 1u);
  EXPECT_EQ(stats[0].calls, 1);
  EXPECT_NEAR(stats[0].total_gain, 0.75, 1e-9);
  EXPECT_GT(stats[0].total_tokens, 0);
  EXPECT_EQ(MetricValue(*registry_, "kevo_llm_calls_total", {{"outcome", "ok"}}), 1);
  EXPECT_EQ(MetricValue(*registry_, "kevo_llm_candidates_total", {{"endpoint", "fake"}}), 2);
  EXPECT_NEAR(MetricValue(*registry_, "kevo_llm_fitness_gain_total", {{"endpoint", "fake"}}), 0.75, 1e-9);
}

// A job whose spec says no_skills: skill memory stays out of its prompts.
TEST_F(LlmProposerTest, NoSkillsKeepsSkillMemoryOutOfThePrompt) {
  FakeReply reply;
  reply.content = kTwoCandidates;
  server_->SetDefault(reply);
  MakeService();
  auto proposer = service_->NewProposer();
  proposer::ProposeRequest req = Request(2);
  req.use_skills = false;
  ASSERT_TRUE(proposer->Propose(req).ok());
  AwaitIdle(*proposer);
  ASSERT_EQ(server_->requests().size(), 1u);
  const std::string body = server_->requests()[0].body;
  EXPECT_THAT(body, HasSubstr("DOC-FROM-FAKE-KB"));  // retrieval itself still runs
  EXPECT_THAT(body, ::testing::Not(HasSubstr("SKILL-FROM-MEMORY")));
  auto calls = Calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0]["skills"], nlohmann::json::array());
  for (const auto& part : calls[0]["prompt_included"]) {
    EXPECT_NE(part.get<std::string>().rfind("skill:", 0), 0u) << part;
  }
}

TEST_F(LlmProposerTest, GarbageAnswerIsStoredCountedAndReportedNotCrashed) {
  FakeReply reply;
  reply.content = "I am sorry, but I cannot write kernels today. ```not closed";
  server_->Enqueue(reply);
  // The call the erroring Propose() starts answers the same, 2 s late, so it
  // is still in flight while this one's record and counts are read.
  FakeReply later = reply;
  later.delay = absl::Seconds(2);
  server_->SetDefault(later);
  MakeService();
  auto proposer = service_->NewProposer();
  ASSERT_TRUE(proposer->Propose(Request(1)).ok());
  AwaitIdle(*proposer);
  auto got = proposer->Propose(Request(1));
  EXPECT_EQ(got.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(got.status().message()), HasSubstr("no usable c++ code"));
  auto calls = Calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0]["outcome"], "no_code");
  EXPECT_EQ(calls[0]["answer"], reply.content);
  EXPECT_EQ(calls[0]["candidates"], 0);
  EXPECT_EQ(MetricValue(*registry_, "kevo_llm_answers_total", {{"outcome", "no_code"}}), 1);
  EXPECT_EQ(MetricValue(*registry_, "kevo_llm_calls_total", {{"outcome", "no_code"}}), 1);
  EXPECT_EQ(service_->Stats()[0].calls, 1);  // measured, with no gain
  EXPECT_EQ(service_->Stats()[0].total_gain, 0);
  // The erroring Propose() asked the model again; the proposer goes on.
  AwaitIdle(*proposer);
  EXPECT_EQ(Calls().size(), 2u);
}

TEST_F(LlmProposerTest, MalformedAndTruncatedAnswersAreStoredWithWhatArrived) {
  FakeReply malformed;
  malformed.kind = FakeReply::Kind::kMalformedJson;
  server_->Enqueue(malformed);
  FakeReply good;
  good.content = kTwoCandidates;
  server_->SetDefault(good);
  MakeService(LlmProposerOptions{.max_calls_per_job = 1});
  auto proposer = service_->NewProposer();
  ASSERT_TRUE(proposer->Propose(Request(1)).ok());
  AwaitIdle(*proposer);
  auto got = proposer->Propose(Request(1));
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss);
  auto calls = Calls();
  ASSERT_GE(calls.size(), 1u);
  EXPECT_EQ(calls[0]["outcome"], "error:data_loss");
  EXPECT_TRUE(calls[0].contains("error"));
  // The next call (started by that Propose) brings candidates.
  AwaitIdle(*proposer);
  got = proposer->Propose(Request(1));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->size(), 1u);
}

TEST_F(LlmProposerTest, RateLimitAndServerErrorsAreRetriedByTheClient) {
  FakeReply limited;
  limited.kind = FakeReply::Kind::kRateLimit;
  limited.retry_after_s = 1;
  server_->Enqueue(limited);
  FakeReply broken;
  broken.kind = FakeReply::Kind::kServerError;
  broken.status = 503;
  server_->Enqueue(broken);
  FakeReply good;
  good.content = kTwoCandidates;
  server_->SetDefault(good);
  MakeService();
  auto proposer = service_->NewProposer();
  ASSERT_TRUE(proposer->Propose(Request(2)).ok());
  AwaitIdle(*proposer);
  auto got = proposer->Propose(Request(2));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->size(), 2u);
  auto calls = Calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0]["attempts"], 3);
  EXPECT_EQ(calls[0]["outcome"], "ok");
  EXPECT_EQ(MetricValue(*registry_, "kevo_llm_retries_total", {{"endpoint", "fake"}}), 2);
}

TEST_F(LlmProposerTest, CallThatFailsAfterRetriesIsStoredAndReturnedAsItsError) {
  FakeReply broken;
  broken.kind = FakeReply::Kind::kServerError;
  broken.status = 500;
  server_->SetDefault(broken);
  MakeService(LlmProposerOptions{.max_calls_per_job = 1});
  auto proposer = service_->NewProposer();
  ASSERT_TRUE(proposer->Propose(Request(1)).ok());
  AwaitIdle(*proposer);
  auto got = proposer->Propose(Request(1));
  EXPECT_EQ(got.status().code(), absl::StatusCode::kUnavailable);
  // Reporting the error lets the job ask again, so a second call may now be
  // in flight: let it finish before counting what reached the server.
  AwaitIdle(*proposer);
  auto calls = Calls();
  ASSERT_GE(calls.size(), 1u);
  for (const auto& call : calls) {
    EXPECT_EQ(call["outcome"], "error:unavailable");
    EXPECT_THAT(call["error"].get<std::string>(), HasSubstr("4 attempts"));
  }
  EXPECT_EQ(server_->requests().size(), 4 * calls.size());
}

TEST_F(LlmProposerTest, DuplicateSourcesTheJobDropsSettleTheCall) {
  std::vector<proposer::Proposal> two;
  auto proposer = ProposerWithTwoReady(&two);
  ASSERT_EQ(two.size(), 2u);
  auto* got = &two;
  // The job loop took neither (it had seen both sources): each is offered
  // once more, then the call is settled with no gain.
  auto again = proposer->Propose(Request(2));
  ASSERT_TRUE(again.ok());
  ASSERT_EQ(again->size(), 2u);
  EXPECT_EQ((*again)[0].candidate.source(), (*got)[0].candidate.source());
  EXPECT_FALSE(Calls()[0]["settled"].get<bool>());
  ASSERT_TRUE(proposer->Propose(Request(1)).ok());
  auto calls = Calls();
  ASSERT_GE(calls.size(), 1u);
  EXPECT_TRUE(calls[0]["settled"].get<bool>());
  EXPECT_EQ(calls[0]["dropped_duplicates"], 2);
  EXPECT_EQ(service_->Stats()[0].calls, 1);
  AwaitIdle(*proposer);
}

TEST_F(LlmProposerTest, ProposalTheJobLoopHadNoSlotForIsOfferedAgain) {
  std::vector<proposer::Proposal> two;
  auto proposer = ProposerWithTwoReady(&two);
  ASSERT_EQ(two.size(), 2u);
  auto* got = &two;
  // One slot: the loop took the first only.
  proposer->Observe(NodeFor("n00002", (*got)[0]), nullptr);
  auto next = proposer->Propose(Request(1));
  ASSERT_TRUE(next.ok());
  ASSERT_EQ(next->size(), 1u);
  EXPECT_EQ((*next)[0].candidate.source(), (*got)[1].candidate.source());
  proposer->Observe(NodeFor("n00003", (*next)[0]), nullptr);
  for (const char* id : {"n00002", "n00003"}) {
    v1::Node done = NodeFor(id, id == std::string("n00002") ? (*got)[0] : (*got)[1]);
    done.set_state(v1::NODE_DONE);
    done.set_status(v1::OK);
    done.set_fitness(1.5);
    v1::Evaluation e;
    e.set_status(v1::OK);
    proposer->Observe(done, &e);
  }
  auto calls = Calls();
  ASSERT_GE(calls.size(), 1u);
  EXPECT_TRUE(calls[0]["settled"].get<bool>());
  EXPECT_EQ(calls[0]["dropped_duplicates"], 0);
  EXPECT_EQ(calls[0]["nodes"].size(), 2u);
  AwaitIdle(*proposer);
}

TEST_F(LlmProposerTest, MixedProposerFillsFromBuiltinWhileTheModelThinks) {
  FakeReply slow;
  slow.content = kTwoCandidates;
  slow.delay = absl::Milliseconds(300);
  server_->SetDefault(slow);
  MakeService();
  auto mixed = MakeMixedProposer(service_->NewProposer(), std::make_unique<StubBuiltin>());
  EXPECT_EQ(mixed->name(), "llm+builtin");
  auto first = mixed->Propose(Request(2));
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(first->size(), 2u);
  EXPECT_EQ((*first)[0].proposer, "builtin");
  EXPECT_TRUE(mixed->Pending());
  AwaitIdle(*mixed);
  auto second = mixed->Propose(Request(2));
  ASSERT_TRUE(second.ok());
  ASSERT_EQ(second->size(), 2u);
  EXPECT_EQ((*second)[0].proposer, "llm:fake-coder");
  EXPECT_EQ((*second)[1].proposer, "llm:fake-coder");
}

TEST_F(LlmProposerTest, JobEndingWhileACallRunsStillStoresItAndMeasuresTheEndpoint) {
  FakeReply slow;
  slow.content = kTwoCandidates;
  slow.delay = absl::Milliseconds(300);
  server_->SetDefault(slow);
  MakeService(LlmProposerOptions{.max_calls_per_job = 1});
  {
    auto proposer = service_->NewProposer();
    ASSERT_TRUE(proposer->Propose(Request(1)).ok());
    EXPECT_TRUE(proposer->Pending());
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (server_->requests().empty() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(2));
    ASSERT_EQ(server_->requests().size(), 1u);  // the call is being answered
  }                                             // the job ended
  service_->Shutdown();                         // waits for the call in flight
  auto calls = Calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0]["outcome"], "ok");
  EXPECT_EQ(service_->Stats()[0].calls, 1);
  EXPECT_EQ(service_->Stats()[0].total_gain, 0);
}

TEST_F(LlmProposerTest, ApiKeyIsNeverStoredEvenWhenTheServerEchoesIt) {
  constexpr char kSecret[] = "sk-kevo-proposer-test-7d2e41c9-SECRET";
  server_.reset();
  testing::FakeServerOptions so;
  so.expected_api_key = kSecret;
  auto server = FakeOpenAiServer::Start(so);
  ASSERT_TRUE(server.ok()) << server.status();
  server_ = *std::move(server);
  FakeReply echo;  // a 400 whose message quotes the Authorization header
  echo.kind = FakeReply::Kind::kClientError;
  echo.error_message = "bad request from";
  echo.echo_authorization = true;
  server_->Enqueue(echo);
  FakeReply good;
  good.content = kTwoCandidates;
  server_->SetDefault(good);
  setenv("KEVO_PROPOSER_TEST_KEY", kSecret, 1);
  EndpointConfig e;
  e.name = "keyed";
  e.base_url = server_->base_url();
  e.model = "fake-coder";
  e.api_key_env = "KEVO_PROPOSER_TEST_KEY";
  auto service =
      LlmService::Create({e}, store_.get(), &kb_, &skills_, registry_, LlmProposerOptions{.max_calls_per_job = 1});
  ASSERT_TRUE(service.ok()) << service.status();
  service_ = *std::move(service);
  auto proposer = service_->NewProposer();
  ASSERT_TRUE(proposer->Propose(Request(1)).ok());
  AwaitIdle(*proposer);
  EXPECT_EQ(proposer->Propose(Request(1)).status().code(), absl::StatusCode::kInvalidArgument);
  AwaitIdle(*proposer);
  auto got = proposer->Propose(Request(1));
  ASSERT_TRUE(got.ok()) << got.status();  // the key was sent: the server answered
  auto calls = Calls();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0]["outcome"], "error:invalid_argument");
  EXPECT_THAT(calls[0]["error"].get<std::string>(), HasSubstr("[redacted]"));
  for (const auto& c : calls) EXPECT_THAT(c.dump(), ::testing::Not(HasSubstr(kSecret)));
  unsetenv("KEVO_PROPOSER_TEST_KEY");
}

TEST(ParseCandidatesTest, LabelsAndLanguagesPerPlatform) {
  AnswerOutcome outcome;
  auto cpu = ParseCandidates(kTwoCandidates, "cpu", &outcome);
  EXPECT_EQ(outcome, AnswerOutcome::kOk);
  ASSERT_EQ(cpu.size(), 2u);
  EXPECT_EQ(cpu[0].label, "vectorise rows with AVX2");
  EXPECT_EQ(cpu[1].label, "fuse max and sum passes");
  const std::string cuda = "```cuda\n__global__ void k() {}\n```\n```python\nprint(1)\n```\n";
  auto gpu = ParseCandidates(cuda, "nvidia", &outcome);
  ASSERT_EQ(gpu.size(), 1u);
  EXPECT_EQ(gpu[0].label, "");
  EXPECT_THAT(gpu[0].source, HasSubstr("__global__"));
  EXPECT_TRUE(ParseCandidates("no code at all", "cpu", &outcome).empty());
  EXPECT_EQ(outcome, AnswerOutcome::kNoCode);
}

}  // namespace
}  // namespace kevo::llm
