// The LLM client: one ChatClient per endpoint (an OpenAI-compatible Chat
// Completions server — vLLM, SGLang, llama.cpp server, Ollama, a hosted API —
// reached over http:// or https://). It adds what every caller needs and no
// server gives for free: connect and total timeouts, retries with exponential
// backoff and jitter on 429 / 5xx / timeouts (honouring Retry-After), a
// per-endpoint concurrency limit, token and cost accounting, and Prometheus
// metrics. See docs/llm.md.
//
// The API key is read from an environment variable or a file when the client
// is created, kept in memory only, sent only in the endpoint's Authorization
// header, and scrubbed from every log line and error message the client makes
// and from the answers it returns.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace prometheus {
class Registry;
}

namespace kevo::llm {

// Which wire protocol an endpoint speaks.
enum class Api {
  kOpenAi,     // POST {base_url}/chat/completions
  kAnthropic,  // POST {base_url}/messages (optional; see docs/llm.md)
};

struct Timeouts {
  absl::Duration connect = absl::Seconds(10);  // TCP connect + TLS handshake
  absl::Duration total = absl::Seconds(300);   // one attempt, first byte to last
};

// One endpoint (a server + a model). Loaded from the --llm-config file
// (LoadLlmConfig in config.h) or built in code.
struct EndpointConfig {
  std::string name;      // label for metrics, logs and the selector; unique
  std::string base_url;  // "http://127.0.0.1:8000/v1", "https://api.openai.com/v1"
  std::string model;     // sent as "model"
  Api api = Api::kOpenAi;
  // At most one of these; neither means no Authorization header (local servers).
  std::string api_key_env;   // name of an environment variable holding the key
  std::string api_key_file;  // path of a file holding the key (trailing newline ignored)
  bool stream = false;       // use server-sent events
  Timeouts timeouts;
  int max_retries = 4;  // retries after the first attempt
  absl::Duration initial_backoff = absl::Milliseconds(500);
  absl::Duration max_backoff = absl::Seconds(30);
  absl::Duration max_retry_after = absl::Seconds(120);  // Retry-After is capped here
  int max_concurrency = 4;                              // requests in flight at once through this client
  double price_in_per_mtok = 0;                         // USD per 1M prompt tokens
  double price_out_per_mtok = 0;                        // USD per 1M completion tokens
  double weight = 1;                                    // prior share for the EndpointSelector; 0 disables
  std::string ca_file;                                  // extra PEM CA bundle for https (system CAs are always used)
  int max_tokens = 0;  // default max_tokens when the request sets none; 0: server default
};

struct ChatMessage {
  std::string role;  // "system" | "user" | "assistant"
  std::string content;
};

struct ChatRequest {
  std::vector<ChatMessage> messages;
  int max_tokens = 0;  // 0: the endpoint's default
  std::optional<double> temperature;
  std::optional<double> top_p;
  std::optional<int64_t> seed;
  std::vector<std::string> stop;
};

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  // True when the server reported no usage and the numbers were estimated
  // (completion: one token per streamed content chunk; prompt: bytes / 4).
  bool estimated = false;
  int64_t total() const { return prompt_tokens + completion_tokens; }
};

struct ChatResponse {
  std::string endpoint;       // EndpointConfig::name
  std::string model;          // as the server reported it (the configured one if absent)
  std::string content;        // the assistant's answer (any echo of the API key redacted)
  std::string finish_reason;  // "stop", "length", ... ("" if the server sent none)
  Usage usage;
  double cost_usd = 0;  // from usage and the endpoint's prices
  int attempts = 0;     // 1 + retries
  int http_status = 0;
  absl::Duration latency;  // of the successful attempt
  // The response body (JSON or the SSE text), the key replaced where it
  // appears whole: in SSE text an echoed key may be split across chunks, so
  // store `content`, never `raw`.
  std::string raw;
};

// Totals over the life of one client. Thread-safe snapshot.
struct UsageTotals {
  int64_t requests = 0;  // Complete() calls that returned OK
  int64_t failures = 0;  // Complete() calls that returned an error
  int64_t attempts = 0;  // HTTP attempts, retries included
  int64_t retries = 0;
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  double cost_usd = 0;
};

// Hooks for tests and embedding; the defaults are the real thing.
struct ClientOptions {
  std::shared_ptr<prometheus::Registry> registry;  // may be null: no metrics
  // Called between attempts with the chosen delay. Default: absl::SleepFor.
  std::function<void(absl::Duration)> sleep;
  uint64_t jitter_seed = 0;  // 0: seeded from the clock
};

// Payload key under which DataLoss errors carry what was received before the
// answer broke (partial content or the malformed body), for storing.
inline constexpr char kPartialPayloadUrl[] = "type.kevo.dev/llm.partial";
// What a DataLoss status carries, or nullopt.
std::optional<std::string> PartialContent(const absl::Status& status);

class ChatClient {
 public:
  virtual ~ChatClient() = default;

  // Sends one chat request, retrying as configured. Blocks the calling thread
  // (never call from a gRPC reactor) and waits for a concurrency slot first.
  // Thread-safe. Errors:
  //  - Unavailable: 429 / 5xx / connection failures after every retry (the
  //    message says how many attempts and the last HTTP status);
  //  - DeadlineExceeded: the last attempt timed out;
  //  - InvalidArgument: a 4xx other than 429 (the server's message, trimmed);
  //  - Unauthenticated / PermissionDenied: 401 / 403;
  //  - DataLoss: malformed JSON or a stream that broke before [DONE]; what
  //    was received is attached (PartialContent()).
  //  - FailedPrecondition: TLS certificate verification failed.
  virtual absl::StatusOr<ChatResponse> Complete(const ChatRequest& request) = 0;

  virtual const EndpointConfig& config() const = 0;
  virtual UsageTotals totals() const = 0;

  // Validates `config` (InvalidArgument: bad URL, missing name/model, ...;
  // NotFound / FailedPrecondition: the key's variable or file is missing or
  // empty) and loads the API key. Connects to nothing.
  static absl::StatusOr<std::unique_ptr<ChatClient>> Create(const EndpointConfig& config, ClientOptions options = {});
};

// Cost in USD of `usage` at the endpoint's prices.
double CostUsd(const EndpointConfig& config, const Usage& usage);

}  // namespace kevo::llm
