#include "coordinator/llm/chat_client.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"

#include "common/log.h"
#include "coordinator/llm/http.h"
#include "coordinator/llm/metrics.h"
#include "coordinator/llm/protocol.h"

namespace kevo::llm {
namespace {

// Reads the key named by `config`. Messages name the variable or file, never
// the value.
absl::StatusOr<std::string> LoadApiKey(const EndpointConfig& config) {
  if (!config.api_key_env.empty() && !config.api_key_file.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("endpoint ", config.name, ": set api_key_env or api_key_file, not both"));
  }
  std::string key;
  if (!config.api_key_env.empty()) {
    const char* value = std::getenv(config.api_key_env.c_str());
    if (value == nullptr) {
      return absl::NotFoundError(absl::StrCat("endpoint ", config.name, ": environment variable ", config.api_key_env,
                                              " (api_key_env) is not set"));
    }
    key = value;
  } else if (!config.api_key_file.empty()) {
    std::ifstream in(config.api_key_file, std::ios::binary);
    if (!in) {
      return absl::NotFoundError(
          absl::StrCat("endpoint ", config.name, ": cannot read api_key_file ", config.api_key_file));
    }
    std::stringstream buffer;
    buffer << in.rdbuf();
    key = buffer.str();
  } else {
    return std::string();
  }
  key = std::string(absl::StripAsciiWhitespace(key));
  const std::string source = config.api_key_env.empty() ? absl::StrCat("api_key_file ", config.api_key_file)
                                                        : absl::StrCat("environment variable ", config.api_key_env);
  if (key.empty()) {
    return absl::FailedPreconditionError(absl::StrCat("endpoint ", config.name, ": ", source, " is empty"));
  }
  for (char c : key) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return absl::InvalidArgumentError(
          absl::StrCat("endpoint ", config.name, ": the key in ", source, " contains control characters"));
    }
  }
  return key;
}

bool Retryable(const absl::Status& status) {
  return status.code() == absl::StatusCode::kUnavailable || status.code() == absl::StatusCode::kDeadlineExceeded;
}

class ChatClientImpl final : public ChatClient {
 public:
  ChatClientImpl(EndpointConfig config, Url url, std::string api_key, ClientOptions options)
      : config_(std::move(config)),
        url_(std::move(url)),
        api_key_(std::move(api_key)),
        metrics_(options.registry),
        sleep_(options.sleep ? std::move(options.sleep) : [](absl::Duration d) { absl::SleepFor(d); }),
        rng_(options.jitter_seed != 0 ? options.jitter_seed : static_cast<uint64_t>(absl::ToUnixNanos(absl::Now()))) {}

  absl::StatusOr<ChatResponse> Complete(const ChatRequest& request) override {
    {
      absl::MutexLock l(&mu_);
      mu_.Await(absl::Condition(
          +[](ChatClientImpl* self)
               ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mu_) { return self->in_flight_ < self->config_.max_concurrency; },
          this));
      ++in_flight_;
    }
    absl::StatusOr<ChatResponse> result = CompleteWithRetries(request);
    {
      absl::MutexLock l(&mu_);
      --in_flight_;
      if (result.ok()) {
        ++totals_.requests;
        totals_.prompt_tokens += result->usage.prompt_tokens;
        totals_.completion_tokens += result->usage.completion_tokens;
        totals_.cost_usd += result->cost_usd;
      } else {
        ++totals_.failures;
      }
    }
    metrics_.RecordRequest(config_.name, result.status());
    if (result.ok()) {
      metrics_.RecordTokens(config_.name, result->usage.prompt_tokens, result->usage.completion_tokens);
      metrics_.RecordCost(config_.name, result->cost_usd);
    }
    return result;
  }

  const EndpointConfig& config() const override { return config_; }

  UsageTotals totals() const override {
    absl::MutexLock l(&mu_);
    return totals_;
  }

 private:
  // One attempt's verdict.
  struct Attempt {
    absl::Status status;  // OK, or the error to return / retry on
    std::optional<absl::Duration> retry_after;
    int http_status = 0;
  };

  absl::StatusOr<ChatResponse> CompleteWithRetries(const ChatRequest& request) {
    HttpRequest http;
    http.target = absl::StrCat(url_.path, config_.api == Api::kAnthropic ? "/messages" : "/chat/completions");
    http.headers.emplace_back("Content-Type", "application/json");
    http.headers.emplace_back("Accept", config_.stream ? "text/event-stream" : "application/json");
    if (config_.api == Api::kAnthropic) {
      http.headers.emplace_back("anthropic-version", "2023-06-01");
      if (!api_key_.empty()) http.headers.emplace_back("x-api-key", api_key_);
    } else if (!api_key_.empty()) {
      http.headers.emplace_back("Authorization", absl::StrCat("Bearer ", api_key_));
    }
    http.body = BuildRequestBody(config_, request, config_.stream);
    HttpOptions options;
    options.connect_timeout = config_.timeouts.connect;
    options.total_timeout = config_.timeouts.total;
    options.ca_file = config_.ca_file;

    const int max_attempts = 1 + std::max(0, config_.max_retries);
    Attempt last;
    for (int attempt = 1; attempt <= max_attempts; ++attempt) {
      {
        absl::MutexLock l(&mu_);
        ++totals_.attempts;
      }
      ChatResponse response;
      response.endpoint = config_.name;
      response.model = config_.model;
      response.attempts = attempt;
      const absl::Time start = absl::Now();
      HttpResult result = SendHttp(url_, http, options);
      response.latency = absl::Now() - start;
      metrics_.RecordAttemptSeconds(config_.name, absl::ToDoubleSeconds(response.latency));
      last = Judge(result, request, &response);
      if (last.status.ok()) return response;
      if (!Retryable(last.status)) return Redacted(last.status);
      if (attempt == max_attempts) break;

      const absl::Duration delay = Delay(attempt - 1, last.retry_after);
      {
        absl::MutexLock l(&mu_);
        ++totals_.retries;
      }
      metrics_.RecordRetry(config_.name);
      LogWarning("llm endpoint=", config_.name, " attempt ", attempt, "/", max_attempts,
                 " failed: ", Redact(std::string(last.status.message())), "; retrying in ",
                 absl::FormatDuration(delay));
      sleep_(delay);
    }
    const std::string last_http =
        last.http_status != 0 ? absl::StrCat("last HTTP status ", last.http_status) : std::string("no HTTP status");
    const std::string message = absl::StrCat("endpoint ", config_.name, ": gave up after ", max_attempts, " attempts (",
                                             max_attempts - 1, " retries); ", last_http, ": ", last.status.message());
    if (last.status.code() == absl::StatusCode::kDeadlineExceeded) {
      return Redacted(absl::DeadlineExceededError(message));
    }
    return Redacted(absl::UnavailableError(message));
  }

  // Turns one HTTP result into a response or a classified error.
  Attempt Judge(const HttpResult& result, const ChatRequest& request, ChatResponse* response) {
    Attempt verdict;
    verdict.http_status = result.status;
    response->http_status = result.status;
    const bool success = result.got_headers && result.status >= 200 && result.status < 300;
    // A body that broke off after the headers is judged by its status below;
    // anything earlier (timeouts, connect failures) is returned as is.
    if (!result.error.ok() && (!result.got_headers || result.error.code() != absl::StatusCode::kDataLoss)) {
      verdict.status = result.error;  // timeouts, connect failures: retried
      return verdict;
    }
    if (success) {
      response->raw = result.body;
      absl::Status parsed = config_.stream && IsEventStream(result) ? ParseStream(config_.api, result.body, response)
                                                                    : ParseAnswer(config_.api, result.body, response);
      if (parsed.ok() && !result.error.ok()) parsed = result.error;  // body cut after a whole answer
      if (!parsed.ok()) {
        verdict.status = WithContext(parsed);
        return verdict;
      }
      // A server that echoes request headers may put the key in its answer.
      response->content = Redact(std::move(response->content));
      response->raw = Redact(std::move(response->raw));
      if (response->usage.estimated && response->usage.prompt_tokens == 0) {
        response->usage.prompt_tokens = EstimatePromptTokens(request);
      }
      response->cost_usd = CostUsd(config_, response->usage);
      return verdict;
    }
    const std::string server_message = Redact(ErrorMessage(result.body));
    const std::string what = absl::StrCat("endpoint ", config_.name, ": HTTP ", result.status,
                                          server_message.empty() ? "" : ": ", server_message);
    if (result.status == 429 || result.status >= 500) {
      verdict.status = absl::UnavailableError(what);
      verdict.retry_after = RetryAfter(result);
    } else if (result.status == 401) {
      verdict.status =
          absl::UnauthenticatedError(absl::StrCat(what, " (check the endpoint's api_key_env / api_key_file)"));
    } else if (result.status == 403) {
      verdict.status = absl::PermissionDeniedError(what);
    } else {
      verdict.status = absl::InvalidArgumentError(what);
    }
    return verdict;
  }

  static bool IsEventStream(const HttpResult& result) {
    auto it = result.headers.find("content-type");
    return it != result.headers.end() && it->second.find("text/event-stream") != std::string::npos;
  }

  // Retry-After in seconds (integer or decimal), capped at max_retry_after.
  std::optional<absl::Duration> RetryAfter(const HttpResult& result) const {
    auto it = result.headers.find("retry-after");
    if (it == result.headers.end()) return std::nullopt;
    double seconds = 0;
    if (!absl::SimpleAtod(absl::StripAsciiWhitespace(it->second), &seconds) || seconds < 0 || !std::isfinite(seconds)) {
      return std::nullopt;  // an HTTP-date: fall back to the backoff
    }
    return std::min(absl::Seconds(seconds), config_.max_retry_after);
  }

  // The wait before retry number `retry` (0-based): the server's Retry-After
  // when it sent one, else exponential backoff with "equal jitter" (half
  // fixed, half random) so that clients that failed together spread out.
  absl::Duration Delay(int retry, std::optional<absl::Duration> retry_after) {
    if (retry_after) return *retry_after;
    absl::Duration base = config_.initial_backoff;
    for (int i = 0; i < retry && base < config_.max_backoff; ++i) base *= 2;
    base = std::min(base, config_.max_backoff);
    double u;
    {
      absl::MutexLock l(&mu_);
      u = std::uniform_real_distribution<double>(0, 1)(rng_);
    }
    return base / 2 + base / 2 * u;
  }

  absl::Status WithContext(const absl::Status& status) const {
    absl::Status out(status.code(), absl::StrCat("endpoint ", config_.name, ": ", status.message()));
    status.ForEachPayload([&out](absl::string_view url, const absl::Cord& payload) { out.SetPayload(url, payload); });
    return out;
  }

  std::string Redact(std::string text) const {
    if (api_key_.empty()) return text;
    return absl::StrReplaceAll(text, {{api_key_, "[redacted]"}});
  }

  absl::Status Redacted(const absl::Status& status) const {
    absl::Status out(status.code(), Redact(std::string(status.message())));
    status.ForEachPayload([&](absl::string_view url, const absl::Cord& payload) {
      out.SetPayload(url, absl::Cord(Redact(std::string(payload))));
    });
    return out;
  }

  const EndpointConfig config_;
  const Url url_;
  const std::string api_key_;  // memory only; see the header comment
  LlmMetrics metrics_;
  const std::function<void(absl::Duration)> sleep_;

  mutable absl::Mutex mu_;
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  UsageTotals totals_ ABSL_GUARDED_BY(mu_);
  std::mt19937_64 rng_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

std::optional<std::string> PartialContent(const absl::Status& status) {
  auto payload = status.GetPayload(kPartialPayloadUrl);
  if (!payload) return std::nullopt;
  return std::string(*payload);
}

double CostUsd(const EndpointConfig& config, const Usage& usage) {
  return static_cast<double>(usage.prompt_tokens) * config.price_in_per_mtok / 1e6 +
         static_cast<double>(usage.completion_tokens) * config.price_out_per_mtok / 1e6;
}

absl::StatusOr<std::unique_ptr<ChatClient>> ChatClient::Create(const EndpointConfig& config, ClientOptions options) {
  if (config.name.empty()) return absl::InvalidArgumentError("endpoint has no name");
  if (config.model.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("endpoint ", config.name, " has no model"));
  }
  absl::StatusOr<Url> url = ParseUrl(config.base_url);
  if (!url.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("endpoint ", config.name, ": ", url.status().message()));
  }
  if (config.max_concurrency < 1) {
    return absl::InvalidArgumentError(absl::StrCat("endpoint ", config.name, ": max_concurrency must be at least 1"));
  }
  if (config.max_retries < 0) {
    return absl::InvalidArgumentError(absl::StrCat("endpoint ", config.name, ": max_retries must not be negative"));
  }
  if (config.timeouts.connect <= absl::ZeroDuration() || config.timeouts.total <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat("endpoint ", config.name, ": timeouts must be positive"));
  }
  if (config.price_in_per_mtok < 0 || config.price_out_per_mtok < 0 || config.weight < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("endpoint ", config.name, ": prices and weight must not be negative"));
  }
  absl::StatusOr<std::string> key = LoadApiKey(config);
  if (!key.ok()) return key.status();
  if (url->tls == false && !key->empty() && url->host != "127.0.0.1" && url->host != "localhost" &&
      url->host != "::1") {
    LogWarning("llm endpoint=", config.name, " sends its API key over plain http to ", url->host, "; use https");
  }
  return std::unique_ptr<ChatClient>(new ChatClientImpl(config, *std::move(url), *std::move(key), std::move(options)));
}

}  // namespace kevo::llm
