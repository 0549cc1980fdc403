// The LLM client against the fake OpenAI-compatible server over real HTTP(S)
// on 127.0.0.1: answers, streams, every failure mode, retries and their
// waits (through an injected sleeper, not wall time), the concurrency limit,
// token and cost accounting, metrics, and the API key's confinement.
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <prometheus/registry.h>

#include "coordinator/llm/chat_client.h"
#include "coordinator/llm/http.h"
#include "coordinator/llm/protocol.h"
#include "tests/llm/fake_openai_server.h"

namespace kevo::llm {
namespace {

// A path in the test temp dir unique to this test and process (ctest runs
// tests of this binary in parallel processes).
std::string TempPath(const std::string& name) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return (std::filesystem::path(::testing::TempDir()) /
          absl::StrCat("kevo_llm_", info->test_suite_name(), "_", info->name(), "_", getpid(), "_", name))
      .string();
}

using testing::FakeOpenAiServer;
using testing::FakeReply;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kKey[] = "sk-kevo-test-5f1c2a9e7b3d4e60-SECRET";

// Records the waits the client asks for instead of sleeping.
class SleepRecorder {
 public:
  std::function<void(absl::Duration)> AsFunction() {
    return [this](absl::Duration d) {
      absl::MutexLock l(&mu_);
      sleeps_.push_back(d);
    };
  }
  std::vector<absl::Duration> sleeps() const {
    absl::MutexLock l(&mu_);
    return sleeps_;
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<absl::Duration> sleeps_;
};

// The value of a counter (or a histogram's sample count) with these labels, 0 if absent.
double MetricValue(prometheus::Registry& registry, const std::string& name,
                   const std::map<std::string, std::string>& labels) {
  for (const prometheus::MetricFamily& family : registry.Collect()) {
    if (family.name != name) continue;
    for (const prometheus::ClientMetric& metric : family.metric) {
      std::map<std::string, std::string> have;
      for (const auto& label : metric.label) have[label.name] = label.value;
      bool match = true;
      for (const auto& [k, v] : labels) match = match && have[k] == v;
      if (!match) continue;
      if (family.type == prometheus::MetricType::Histogram) {
        return static_cast<double>(metric.histogram.sample_count);
      }
      return metric.counter.value;
    }
  }
  return 0;
}

std::string Content() {
  return "Try this one:\n```cpp\nextern \"C\" void kernel(float* y, const float* x, int n) {\n"
         "  for (int i = 0; i < n; ++i) y[i] = x[i] * 2.0f;\n}\n```\nIt doubles x.";
}

ChatRequest Request() {
  ChatRequest request;
  request.messages = {{"system", "You write fast kernels."}, {"user", "Make this faster: y = 2 * x"}};
  request.max_tokens = 512;
  request.temperature = 0.7;
  return request;
}

class LlmClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::FakeServerOptions options;
    options.default_reply.content = Content();
    auto server = FakeOpenAiServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    registry_ = std::make_shared<prometheus::Registry>();
  }

  EndpointConfig Config() const {
    EndpointConfig config;
    config.name = "fake";
    config.base_url = server_->base_url();
    config.model = "fake-coder-7b";
    config.timeouts.connect = absl::Seconds(2);
    config.timeouts.total = absl::Seconds(10);
    config.max_retries = 3;
    config.initial_backoff = absl::Milliseconds(100);
    config.max_backoff = absl::Seconds(1);
    return config;
  }

  std::unique_ptr<ChatClient> Client(const EndpointConfig& config) {
    ClientOptions options;
    options.registry = registry_;
    options.sleep = sleeper_.AsFunction();
    options.jitter_seed = 42;
    auto client = ChatClient::Create(config, options);
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? *std::move(client) : nullptr;
  }

  double Metric(const std::string& name, const std::map<std::string, std::string>& labels) {
    return MetricValue(*registry_, name, labels);
  }

  std::unique_ptr<FakeOpenAiServer> server_;
  std::shared_ptr<prometheus::Registry> registry_;
  SleepRecorder sleeper_;
};

TEST_F(LlmClientTest, NonStreamingAnswerCarriesContentUsageAndTheRequest) {
  auto client = Client(Config());
  FakeReply reply;
  reply.content = Content();
  reply.prompt_tokens = 123;
  reply.completion_tokens = 45;
  server_->Enqueue(reply);
  absl::StatusOr<ChatResponse> response = client->Complete(Request());
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->content, Content());
  EXPECT_EQ(response->endpoint, "fake");
  EXPECT_EQ(response->model, "fake-coder-7b");
  EXPECT_EQ(response->finish_reason, "stop");
  EXPECT_EQ(response->usage.prompt_tokens, 123);
  EXPECT_EQ(response->usage.completion_tokens, 45);
  EXPECT_FALSE(response->usage.estimated);
  EXPECT_EQ(response->attempts, 1);
  EXPECT_EQ(response->http_status, 200);
  EXPECT_THAT(response->raw, HasSubstr("chat.completion"));

  auto requests = server_->requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].method, "POST");
  EXPECT_EQ(requests[0].target, "/v1/chat/completions");
  EXPECT_EQ(requests[0].headers["content-type"], "application/json");
  auto body = nlohmann::json::parse(requests[0].body);
  EXPECT_EQ(body["model"], "fake-coder-7b");
  EXPECT_EQ(body["stream"], false);
  EXPECT_EQ(body["max_tokens"], 512);
  ASSERT_EQ(body["messages"].size(), 2u);
  EXPECT_EQ(body["messages"][0]["role"], "system");
  EXPECT_EQ(body["messages"][1]["content"], "Make this faster: y = 2 * x");
  EXPECT_EQ(Metric("kevo_llm_requests_total", {{"endpoint", "fake"}, {"outcome", "ok"}}), 1);
  EXPECT_EQ(Metric("kevo_llm_tokens_total", {{"endpoint", "fake"}, {"kind", "prompt"}}), 123);
  EXPECT_EQ(Metric("kevo_llm_tokens_total", {{"endpoint", "fake"}, {"kind", "completion"}}), 45);
  EXPECT_EQ(Metric("kevo_llm_request_seconds", {{"endpoint", "fake"}}), 1);
}

TEST_F(LlmClientTest, StreamingAndNonStreamingGiveTheSameContent) {
  auto plain = Client(Config());
  EndpointConfig streamed_config = Config();
  streamed_config.stream = true;
  auto streamed = Client(streamed_config);
  auto a = plain->Complete(Request());
  auto b = streamed->Complete(Request());
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(a->content, Content());
  EXPECT_EQ(b->content, a->content);
  EXPECT_EQ(b->finish_reason, "stop");
  EXPECT_EQ(b->usage.completion_tokens, a->usage.completion_tokens);
  EXPECT_EQ(b->usage.prompt_tokens, a->usage.prompt_tokens);
  EXPECT_FALSE(b->usage.estimated);  // the final usage chunk was asked for and came
  EXPECT_THAT(b->raw, HasSubstr("data: [DONE]"));

  auto requests = server_->requests();
  ASSERT_EQ(requests.size(), 2u);
  auto body = nlohmann::json::parse(requests[1].body);
  EXPECT_EQ(body["stream"], true);
  EXPECT_EQ(body["stream_options"]["include_usage"], true);
  EXPECT_EQ(requests[1].headers["accept"], "text/event-stream");
}

TEST_F(LlmClientTest, StreamWithoutUsageCountsChunks) {
  EndpointConfig config = Config();
  config.stream = true;
  auto client = Client(config);
  FakeReply reply;
  reply.content = Content();
  reply.include_usage = false;
  reply.chunk_size = 5;
  server_->Enqueue(reply);
  auto response = client->Complete(Request());
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->content, Content());
  EXPECT_TRUE(response->usage.estimated);
  EXPECT_EQ(response->usage.completion_tokens, static_cast<int64_t>((Content().size() + 4) / 5));
  // Prompt estimated as bytes / 4.
  const size_t bytes = Request().messages[0].content.size() + Request().messages[1].content.size();
  EXPECT_EQ(response->usage.prompt_tokens, static_cast<int64_t>((bytes + 3) / 4));
}

TEST_F(LlmClientTest, CostFollowsUsageAndPricesAndAccumulates) {
  EndpointConfig config = Config();
  config.price_in_per_mtok = 2.5;
  config.price_out_per_mtok = 10;
  auto client = Client(config);
  FakeReply reply;
  reply.prompt_tokens = 1000;
  reply.completion_tokens = 200;
  server_->Enqueue(reply);
  server_->Enqueue(reply);
  auto first = client->Complete(Request());
  auto second = client->Complete(Request());
  ASSERT_TRUE(first.ok() && second.ok());
  const double each = 1000 * 2.5 / 1e6 + 200 * 10.0 / 1e6;
  EXPECT_DOUBLE_EQ(first->cost_usd, each);
  UsageTotals totals = client->totals();
  EXPECT_EQ(totals.requests, 2);
  EXPECT_EQ(totals.prompt_tokens, 2000);
  EXPECT_EQ(totals.completion_tokens, 400);
  EXPECT_DOUBLE_EQ(totals.cost_usd, 2 * each);
  EXPECT_DOUBLE_EQ(Metric("kevo_llm_cost_usd_total", {{"endpoint", "fake"}}), 2 * each);
}

TEST_F(LlmClientTest, RateLimitIsRetriedAfterTheServersRetryAfter) {
  auto client = Client(Config());
  FakeReply limited;
  limited.kind = FakeReply::Kind::kRateLimit;
  limited.retry_after_s = 7;
  server_->Enqueue(limited);
  auto response = client->Complete(Request());
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->attempts, 2);
  EXPECT_EQ(server_->requests().size(), 2u);
  ASSERT_EQ(sleeper_.sleeps().size(), 1u);
  EXPECT_EQ(sleeper_.sleeps()[0], absl::Seconds(7));
  EXPECT_EQ(client->totals().retries, 1);
  EXPECT_EQ(Metric("kevo_llm_retries_total", {{"endpoint", "fake"}}), 1);
  EXPECT_EQ(Metric("kevo_llm_request_seconds", {{"endpoint", "fake"}}), 2);
}

TEST_F(LlmClientTest, RetryAfterIsCappedByMaxRetryAfter) {
  EndpointConfig config = Config();
  config.max_retry_after = absl::Seconds(3);
  auto client = Client(config);
  FakeReply limited;
  limited.kind = FakeReply::Kind::kRateLimit;
  limited.retry_after_s = 3600;
  server_->Enqueue(limited);
  ASSERT_TRUE(client->Complete(Request()).ok());
  ASSERT_EQ(sleeper_.sleeps().size(), 1u);
  EXPECT_EQ(sleeper_.sleeps()[0], absl::Seconds(3));
}

TEST_F(LlmClientTest, ServerErrorsBackOffExponentiallyWithJitter) {
  auto client = Client(Config());
  FakeReply error;
  error.kind = FakeReply::Kind::kServerError;
  for (int status : {500, 502, 503}) {
    error.status = status;
    server_->Enqueue(error);
  }
  auto response = client->Complete(Request());
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->attempts, 4);
  auto sleeps = sleeper_.sleeps();
  ASSERT_EQ(sleeps.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    const absl::Duration base = absl::Milliseconds(100) * (1 << i);
    EXPECT_GE(sleeps[i], base / 2) << i;
    EXPECT_LE(sleeps[i], base) << i;
  }
  EXPECT_EQ(client->totals().retries, 3);
  EXPECT_EQ(client->totals().attempts, 4);
}

TEST_F(LlmClientTest, GivesUpAsUnavailableAfterMaxRetriesNamingCountAndStatus) {
  EndpointConfig config = Config();
  config.max_retries = 2;
  auto client = Client(config);
  FakeReply error;
  error.kind = FakeReply::Kind::kServerError;
  error.status = 503;
  server_->SetDefault(error);
  auto response = client->Complete(Request());
  ASSERT_EQ(response.status().code(), absl::StatusCode::kUnavailable) << response.status();
  EXPECT_THAT(response.status().message(), HasSubstr("3 attempts"));
  EXPECT_THAT(response.status().message(), HasSubstr("503"));
  EXPECT_EQ(server_->requests().size(), 3u);
  EXPECT_EQ(sleeper_.sleeps().size(), 2u);
  EXPECT_EQ(client->totals().failures, 1);
  EXPECT_EQ(Metric("kevo_llm_requests_total", {{"endpoint", "fake"}, {"outcome", "unavailable"}}), 1);
  EXPECT_EQ(Metric("kevo_llm_retries_total", {{"endpoint", "fake"}}), 2);
}

TEST_F(LlmClientTest, SlowServerTimesOutIsRetriedThenDeadlineExceeded) {
  EndpointConfig config = Config();
  config.timeouts.total = absl::Milliseconds(300);
  config.max_retries = 1;
  auto client = Client(config);
  FakeReply slow;
  slow.kind = FakeReply::Kind::kSlow;
  slow.delay = absl::Seconds(20);
  server_->SetDefault(slow);
  const absl::Time start = absl::Now();
  auto response = client->Complete(Request());
  EXPECT_EQ(response.status().code(), absl::StatusCode::kDeadlineExceeded) << response.status();
  EXPECT_THAT(response.status().message(), HasSubstr("2 attempts"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_EQ(server_->requests().size(), 2u);
  EXPECT_EQ(Metric("kevo_llm_requests_total", {{"endpoint", "fake"}, {"outcome", "deadline_exceeded"}}), 1);
}

TEST_F(LlmClientTest, SlowThenFastSucceedsOnRetry) {
  EndpointConfig config = Config();
  config.timeouts.total = absl::Milliseconds(300);
  auto client = Client(config);
  FakeReply slow;
  slow.kind = FakeReply::Kind::kSlow;
  slow.delay = absl::Seconds(20);
  server_->Enqueue(slow);
  auto response = client->Complete(Request());
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->attempts, 2);
  EXPECT_EQ(response->content, Content());
}

TEST_F(LlmClientTest, HangUpWithoutReplyIsRetried) {
  auto client = Client(Config());
  FakeReply close;
  close.kind = FakeReply::Kind::kCloseWithoutReply;
  server_->Enqueue(close);
  auto response = client->Complete(Request());
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->attempts, 2);
}

TEST_F(LlmClientTest, ConnectionRefusedIsUnavailableAfterRetries) {
  EndpointConfig config = Config();
  const int port = server_->port();
  server_->Stop();
  config.base_url = absl::StrCat("http://127.0.0.1:", port, "/v1");
  config.max_retries = 1;
  auto client = Client(config);
  auto response = client->Complete(Request());
  EXPECT_EQ(response.status().code(), absl::StatusCode::kUnavailable) << response.status();
  EXPECT_THAT(response.status().message(), HasSubstr("no HTTP status"));
  EXPECT_EQ(sleeper_.sleeps().size(), 1u);
}

TEST_F(LlmClientTest, ClientErrorIsInvalidArgumentWithServerMessageAndNoRetry) {
  auto client = Client(Config());
  FakeReply bad;
  bad.kind = FakeReply::Kind::kClientError;
  bad.error_message = "This model's maximum context length is 8192 tokens";
  server_->Enqueue(bad);
  auto response = client->Complete(Request());
  ASSERT_EQ(response.status().code(), absl::StatusCode::kInvalidArgument) << response.status();
  EXPECT_THAT(response.status().message(), HasSubstr("maximum context length is 8192"));
  EXPECT_THAT(response.status().message(), HasSubstr("HTTP 400"));
  EXPECT_EQ(server_->requests().size(), 1u);
  EXPECT_TRUE(sleeper_.sleeps().empty());
}

TEST_F(LlmClientTest, LongServerMessagesAreTrimmed) {
  auto client = Client(Config());
  FakeReply bad;
  bad.kind = FakeReply::Kind::kClientError;
  bad.error_message = std::string(5000, 'x');
  server_->Enqueue(bad);
  auto response = client->Complete(Request());
  ASSERT_EQ(response.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_LT(response.status().message().size(), 500u);
}

TEST_F(LlmClientTest, TruncatedStreamIsDataLossKeepingWhatArrived) {
  EndpointConfig config = Config();
  config.stream = true;
  auto client = Client(config);
  FakeReply cut;
  cut.kind = FakeReply::Kind::kTruncatedStream;
  cut.content = Content();
  server_->Enqueue(cut);
  auto response = client->Complete(Request());
  ASSERT_EQ(response.status().code(), absl::StatusCode::kDataLoss) << response.status();
  std::optional<std::string> partial = PartialContent(response.status());
  ASSERT_TRUE(partial.has_value());
  EXPECT_FALSE(partial->empty());
  EXPECT_LT(partial->size(), Content().size());
  EXPECT_TRUE(absl::StartsWith(Content(), *partial)) << *partial;
  EXPECT_EQ(server_->requests().size(), 1u);  // not retried: the caller stores what came
  EXPECT_EQ(Metric("kevo_llm_requests_total", {{"endpoint", "fake"}, {"outcome", "data_loss"}}), 1);
}

TEST_F(LlmClientTest, TruncatedJsonBodyIsDataLoss) {
  auto client = Client(Config());
  FakeReply cut;
  cut.kind = FakeReply::Kind::kTruncatedStream;  // non-streamed: half the body, then hang up
  server_->Enqueue(cut);
  auto response = client->Complete(Request());
  ASSERT_EQ(response.status().code(), absl::StatusCode::kDataLoss) << response.status();
  ASSERT_TRUE(PartialContent(response.status()).has_value());
  EXPECT_THAT(*PartialContent(response.status()), HasSubstr("\"choices\""));
}

TEST_F(LlmClientTest, MalformedJsonAnswerIsDataLossWithTheBody) {
  auto client = Client(Config());
  FakeReply garbage;
  garbage.kind = FakeReply::Kind::kMalformedJson;
  server_->Enqueue(garbage);
  auto response = client->Complete(Request());
  ASSERT_EQ(response.status().code(), absl::StatusCode::kDataLoss) << response.status();
  EXPECT_THAT(response.status().message(), HasSubstr("malformed JSON"));
  ASSERT_TRUE(PartialContent(response.status()).has_value());
  EXPECT_THAT(*PartialContent(response.status()), HasSubstr("<<garbage"));
  EXPECT_EQ(server_->requests().size(), 1u);
}

TEST_F(LlmClientTest, MalformedJsonInStreamIsDataLoss) {
  EndpointConfig config = Config();
  config.stream = true;
  auto client = Client(config);
  FakeReply garbage;
  garbage.kind = FakeReply::Kind::kMalformedJson;
  server_->Enqueue(garbage);
  auto response = client->Complete(Request());
  ASSERT_EQ(response.status().code(), absl::StatusCode::kDataLoss) << response.status();
  EXPECT_THAT(response.status().message(), HasSubstr("malformed JSON in stream event"));
}

TEST_F(LlmClientTest, ConcurrencyLimitIsRespected) {
  EndpointConfig config = Config();
  config.max_concurrency = 2;
  auto client = Client(config);
  FakeReply slowish;
  slowish.delay = absl::Milliseconds(400);
  server_->SetDefault(slowish);
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 6; ++i) {
    threads.emplace_back([&] {
      if (client->Complete(Request()).ok()) ++ok;
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(ok.load(), 6);
  EXPECT_EQ(server_->requests().size(), 6u);
  // Never more than the limit at once. (Exactly 2 is not asserted: on a
  // loaded host the second request may only arrive after the first ended.)
  EXPECT_LE(server_->max_concurrent(), 2);
  EXPECT_GE(server_->max_concurrent(), 1);
}

TEST_F(LlmClientTest, WithoutALimitTheServerSeesParallelRequests) {
  // The control for ConcurrencyLimitIsRespected: the fake server does serve
  // requests in parallel, so the limit above is the client's doing.
  EndpointConfig config = Config();
  config.max_concurrency = 6;
  auto client = Client(config);
  FakeReply slowish;
  slowish.delay = absl::Milliseconds(300);
  server_->SetDefault(slowish);
  std::vector<std::thread> threads;
  for (int i = 0; i < 6; ++i) threads.emplace_back([&] { (void)client->Complete(Request()); });
  for (std::thread& t : threads) t.join();
  EXPECT_GT(server_->max_concurrent(), 2);
}

TEST(ParseUrlTest, ParsesSchemesPortsAndPaths) {
  auto a = ParseUrl("https://api.example.com/v1/");
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a->tls);
  EXPECT_EQ(a->host, "api.example.com");
  EXPECT_EQ(a->port, "443");
  EXPECT_EQ(a->path, "/v1");
  auto b = ParseUrl("http://127.0.0.1:8000");
  ASSERT_TRUE(b.ok());
  EXPECT_FALSE(b->tls);
  EXPECT_EQ(b->port, "8000");
  EXPECT_EQ(b->path, "");
  auto c = ParseUrl("http://[::1]:11434/v1");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->host, "::1");
  EXPECT_EQ(c->port, "11434");
  EXPECT_EQ(ParseUrl("ftp://x/v1").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseUrl("http://:80/v1").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseUrl("http://h:99999/v1").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseUrl("https://user:pw@h/v1").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ParseStreamTest, StreamEndingBetweenEventsWithoutTerminatorIsDataLoss) {
  const std::string openai =
      "data: {\"choices\":[{\"delta\":{\"content\":\"int \"}}]}\n\n"
      ": keep-alive\n\n"
      "data: {\"choices\":[{\"delta\":{\"content\":\"x;\"}}]}\r\n\r\n";
  ChatResponse response;
  absl::Status status = ParseStream(Api::kOpenAi, openai, &response);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_THAT(status.message(), HasSubstr("without [DONE]"));
  EXPECT_EQ(PartialContent(status), "int x;");

  ChatResponse done;
  ASSERT_TRUE(ParseStream(Api::kOpenAi, openai + "data: [DONE]\n\n", &done).ok());
  EXPECT_EQ(done.content, "int x;");
  EXPECT_TRUE(done.usage.estimated);
  EXPECT_EQ(done.usage.completion_tokens, 2);

  const std::string anthropic =
      "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":"
      "{\"type\":\"text_delta\",\"text\":\"abc\"}}\n\n";
  ChatResponse cut;
  status = ParseStream(Api::kAnthropic, anthropic, &cut);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_EQ(PartialContent(status), "abc");
}

TEST(ParseStreamTest, ErrorEventIsUnavailable) {
  ChatResponse response;
  absl::Status status = ParseStream(Api::kOpenAi, "data: {\"error\":{\"message\":\"out of KV cache\"}}\n\n", &response);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(status.message(), HasSubstr("out of KV cache"));
}

TEST(ChatClientCreateTest, RejectsBadConfigs) {
  EndpointConfig config;
  config.name = "x";
  config.model = "m";
  config.base_url = "localhost:8000/v1";
  EXPECT_EQ(ChatClient::Create(config).status().code(), absl::StatusCode::kInvalidArgument);
  config.base_url = "http://localhost:8000/v1";
  config.max_concurrency = 0;
  EXPECT_EQ(ChatClient::Create(config).status().code(), absl::StatusCode::kInvalidArgument);
  config.max_concurrency = 1;
  config.model = "";
  EXPECT_EQ(ChatClient::Create(config).status().code(), absl::StatusCode::kInvalidArgument);
  config.model = "m";
  EXPECT_TRUE(ChatClient::Create(config).ok());
}

// --- the API key ---------------------------------------------------------

class ApiKeyTest : public LlmClientTest {
 protected:
  void SetUp() override {
    testing::FakeServerOptions options;
    options.expected_api_key = kKey;
    options.default_reply.content = Content();
    auto server = FakeOpenAiServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    registry_ = std::make_shared<prometheus::Registry>();
    setenv("KEVO_LLM_TEST_KEY", kKey, 1);
  }
  void TearDown() override { unsetenv("KEVO_LLM_TEST_KEY"); }
};

TEST_F(ApiKeyTest, KeyFromEnvironmentGoesOnlyInTheAuthorizationHeader) {
  EndpointConfig config = Config();
  config.api_key_env = "KEVO_LLM_TEST_KEY";
  auto client = Client(config);
  auto response = client->Complete(Request());
  ASSERT_TRUE(response.ok()) << response.status();
  auto requests = server_->requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].headers["authorization"], absl::StrCat("Bearer ", kKey));
  for (const auto& [name, value] : requests[0].headers) {
    if (name != "authorization") {
      EXPECT_THAT(value, Not(HasSubstr(kKey))) << name;
    }
  }
  EXPECT_THAT(requests[0].body, Not(HasSubstr(kKey)));
  EXPECT_THAT(requests[0].target, Not(HasSubstr(kKey)));
  EXPECT_THAT(response->raw, Not(HasSubstr(kKey)));
}

TEST_F(ApiKeyTest, KeyFromFileIsTrimmedAndSent) {
  const std::string path = TempPath("key.txt");
  {
    std::ofstream out(path);
    out << kKey << "\n";
  }
  EndpointConfig config = Config();
  config.api_key_file = path;
  auto client = Client(config);
  ASSERT_TRUE(client->Complete(Request()).ok());
  EXPECT_EQ(server_->requests()[0].headers["authorization"], absl::StrCat("Bearer ", kKey));
  std::filesystem::remove(path);
}

TEST_F(ApiKeyTest, KeyNeverAppearsInLogsOrErrors) {
  EndpointConfig config = Config();
  config.api_key_env = "KEVO_LLM_TEST_KEY";
  config.max_retries = 1;
  auto client = Client(config);
  // A server that echoes the Authorization header into its error messages:
  // first a retried 429 (logged), then a 400 (returned).
  FakeReply limited;
  limited.kind = FakeReply::Kind::kRateLimit;
  limited.echo_authorization = true;
  server_->Enqueue(limited);
  FakeReply bad;
  bad.kind = FakeReply::Kind::kClientError;
  bad.echo_authorization = true;
  server_->Enqueue(bad);
  ::testing::internal::CaptureStderr();
  auto response = client->Complete(Request());
  const std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_EQ(response.status().code(), absl::StatusCode::kInvalidArgument) << response.status();
  // The echo reached the client (so the redaction below is what hides the key)...
  EXPECT_THAT(response.status().message(), HasSubstr("you sent Authorization: Bearer [redacted]"));
  EXPECT_THAT(log, HasSubstr("[redacted]"));
  // ...and the key is in neither the error nor the log.
  EXPECT_THAT(response.status().ToString(), Not(HasSubstr(kKey)));
  EXPECT_THAT(log, Not(HasSubstr(kKey)));
  EXPECT_THAT(log, HasSubstr("attempt 1/2"));

  // Exhausted retries: the final Unavailable message quotes the server too.
  server_->SetDefault(limited);
  ::testing::internal::CaptureStderr();
  auto exhausted = client->Complete(Request());
  const std::string log2 = ::testing::internal::GetCapturedStderr();
  ASSERT_EQ(exhausted.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(exhausted.status().ToString(), Not(HasSubstr(kKey)));
  EXPECT_THAT(log2, Not(HasSubstr(kKey)));
}

// A server that echoes the Authorization header into its answer: the key
// never reaches the caller (which stores the answer), streamed or not.
TEST_F(ApiKeyTest, KeyEchoedIntoTheAnswerIsRedacted) {
  for (bool stream : {false, true}) {
    EndpointConfig config = Config();
    config.api_key_env = "KEVO_LLM_TEST_KEY";
    config.stream = stream;
    auto client = Client(config);
    FakeReply echo;
    echo.content = "ANSWER-TEXT";
    echo.echo_authorization = true;
    server_->Enqueue(echo);
    auto response = client->Complete(Request());
    ASSERT_TRUE(response.ok()) << response.status();
    EXPECT_THAT(response->content, HasSubstr("ANSWER-TEXT; you sent Authorization: Bearer [redacted]"))
        << "stream=" << stream;
    EXPECT_THAT(response->content, Not(HasSubstr(kKey))) << "stream=" << stream;
    if (!stream) {
      EXPECT_THAT(response->raw, Not(HasSubstr(kKey)));
    }
  }
}

TEST_F(ApiKeyTest, WrongOrMissingKeyIsUnauthenticatedOrNotFound) {
  EndpointConfig config = Config();
  auto no_key = Client(config);
  auto response = no_key->Complete(Request());
  EXPECT_EQ(response.status().code(), absl::StatusCode::kUnauthenticated) << response.status();
  EXPECT_EQ(server_->requests().size(), 1u);  // not retried

  config.api_key_env = "KEVO_LLM_TEST_KEY_THAT_IS_NOT_SET";
  auto missing = ChatClient::Create(config);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("KEVO_LLM_TEST_KEY_THAT_IS_NOT_SET"));

  setenv("KEVO_LLM_TEST_EMPTY_KEY", "  \n", 1);
  config.api_key_env = "KEVO_LLM_TEST_EMPTY_KEY";
  EXPECT_EQ(ChatClient::Create(config).status().code(), absl::StatusCode::kFailedPrecondition);
  unsetenv("KEVO_LLM_TEST_EMPTY_KEY");

  config.api_key_env.clear();
  config.api_key_file = "/nonexistent/kevo/key";
  EXPECT_EQ(ChatClient::Create(config).status().code(), absl::StatusCode::kNotFound);
}

// --- HTTPS -------------------------------------------------------------------

class HttpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto cert = testing::MakeSelfSignedCert();
    ASSERT_TRUE(cert.ok()) << cert.status();
    cert_ = *cert;
    testing::FakeServerOptions options;
    options.tls_cert_pem = cert_.cert_pem;
    options.tls_key_pem = cert_.key_pem;
    options.default_reply.content = Content();
    auto server = FakeOpenAiServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    ca_path_ = TempPath("ca.pem");
    std::ofstream(ca_path_) << cert_.cert_pem;
  }
  void TearDown() override { std::filesystem::remove(ca_path_); }

  EndpointConfig Config() const {
    EndpointConfig config;
    config.name = "tls";
    config.base_url = server_->base_url();
    config.model = "fake";
    config.max_retries = 2;
    config.timeouts.connect = absl::Seconds(5);
    config.timeouts.total = absl::Seconds(10);
    return config;
  }

  testing::CertAndKey cert_;
  std::unique_ptr<FakeOpenAiServer> server_;
  std::string ca_path_;
};

TEST_F(HttpsTest, VerifiesTheServerWithTheGivenCaFile) {
  ASSERT_TRUE(absl::StartsWith(server_->base_url(), "https://127.0.0.1:"));
  for (bool stream : {false, true}) {
    EndpointConfig config = Config();
    config.ca_file = ca_path_;
    config.stream = stream;
    auto client = ChatClient::Create(config);
    ASSERT_TRUE(client.ok()) << client.status();
    auto response = (*client)->Complete(Request());
    ASSERT_TRUE(response.ok()) << response.status();
    EXPECT_EQ(response->content, Content());
  }
}

TEST_F(HttpsTest, RefusesAnUntrustedCertificateWithoutRetrying) {
  auto client = ChatClient::Create(Config());  // system CAs only
  ASSERT_TRUE(client.ok());
  auto response = (*client)->Complete(Request());
  ASSERT_EQ(response.status().code(), absl::StatusCode::kFailedPrecondition) << response.status();
  EXPECT_THAT(response.status().message(), HasSubstr("did not verify"));
  EXPECT_TRUE(server_->requests().empty());  // nothing was sent, not even the body
}

TEST_F(HttpsTest, RefusesACertificateForAnotherHost) {
  // A trusted certificate that names another host.
  auto cert = testing::MakeSelfSignedCert("DNS:kevo.invalid");
  ASSERT_TRUE(cert.ok());
  testing::FakeServerOptions options;
  options.tls_cert_pem = cert->cert_pem;
  options.tls_key_pem = cert->key_pem;
  auto other = FakeOpenAiServer::Start(options);
  ASSERT_TRUE(other.ok());
  std::ofstream(ca_path_) << cert->cert_pem;
  EndpointConfig config = Config();
  config.base_url = (*other)->base_url();
  config.ca_file = ca_path_;
  auto client = ChatClient::Create(config);
  ASSERT_TRUE(client.ok());
  auto response = (*client)->Complete(Request());
  ASSERT_EQ(response.status().code(), absl::StatusCode::kFailedPrecondition) << response.status();
  EXPECT_THAT(response.status().message(), HasSubstr("mismatch"));
  EXPECT_TRUE((*other)->requests().empty());
}

TEST_F(HttpsTest, MissingCaFileIsFailedPrecondition) {
  EndpointConfig config = Config();
  config.ca_file = "/nonexistent/kevo-ca.pem";
  auto client = ChatClient::Create(config);
  ASSERT_TRUE(client.ok());
  EXPECT_EQ((*client)->Complete(Request()).status().code(), absl::StatusCode::kFailedPrecondition);
}

// --- Anthropic Messages API (optional protocol) --------------------------------

TEST_F(LlmClientTest, AnthropicMessagesStreamedAndNotGiveTheSameContent) {
  setenv("KEVO_LLM_TEST_KEY", kKey, 1);
  EndpointConfig config = Config();
  config.api = Api::kAnthropic;
  config.api_key_env = "KEVO_LLM_TEST_KEY";
  auto plain = Client(config);
  config.stream = true;
  auto streamed = Client(config);
  auto a = plain->Complete(Request());
  auto b = streamed->Complete(Request());
  unsetenv("KEVO_LLM_TEST_KEY");
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(a->content, Content());
  EXPECT_EQ(b->content, Content());
  EXPECT_EQ(a->usage.completion_tokens, b->usage.completion_tokens);
  EXPECT_EQ(a->usage.prompt_tokens, b->usage.prompt_tokens);
  EXPECT_FALSE(b->usage.estimated);
  auto requests = server_->requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].target, "/v1/messages");
  EXPECT_EQ(requests[0].headers["x-api-key"], kKey);
  EXPECT_EQ(requests[0].headers.count("authorization"), 0u);
  EXPECT_FALSE(requests[0].headers["anthropic-version"].empty());
  auto body = nlohmann::json::parse(requests[0].body);
  EXPECT_EQ(body["system"], "You write fast kernels.");
  ASSERT_EQ(body["messages"].size(), 1u);
  EXPECT_EQ(body["messages"][0]["role"], "user");
}

// --- the fake-llm-server binary ----------------------------------------------

TEST(FakeLlmServerBinaryTest, PrintsItsAddressAndServes) {
  const char* bin_dir = std::getenv("KEVO_BIN_DIR");
  if (bin_dir == nullptr) {
    GTEST_SKIP() << "KEVO_BIN_DIR is not set (run through ctest)";
  }
  const std::string bin = absl::StrCat(bin_dir, "/fake-llm-server");
  ASSERT_TRUE(std::filesystem::exists(bin)) << bin;
  int out[2];
  ASSERT_EQ(pipe(out), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    dup2(out[1], 1);
    close(out[0]);
    close(out[1]);
    execl(bin.c_str(), bin.c_str(), "--script", "429:1", nullptr);
    _exit(127);
  }
  close(out[1]);
  FILE* stream = fdopen(out[0], "r");
  char line[256] = {0};
  ASSERT_NE(fgets(line, sizeof line, stream), nullptr);
  std::string first(line);
  ASSERT_TRUE(absl::StartsWith(first, "listening 127.0.0.1:")) << first;
  const std::string port = first.substr(std::string("listening 127.0.0.1:").size());
  EndpointConfig config;
  config.name = "bin";
  config.model = "m";
  config.base_url = absl::StrCat("http://127.0.0.1:", std::stoi(port), "/v1");
  SleepRecorder sleeper;
  ClientOptions options;
  options.sleep = sleeper.AsFunction();
  auto client = ChatClient::Create(config, options);
  ASSERT_TRUE(client.ok());
  auto response = (*client)->Complete(Request());
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  fclose(stream);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->attempts, 2);
  ASSERT_EQ(sleeper.sleeps().size(), 1u);
  EXPECT_EQ(sleeper.sleeps()[0], absl::Seconds(1));
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

}  // namespace
}  // namespace kevo::llm
