// A local stand-in for an OpenAI-compatible LLM server, for tests: no model
// exists in kevo's test environment, so the LLM client and the LLM proposer
// are tested against this. It speaks the real wire protocol over real HTTP
// (or HTTPS) on 127.0.0.1 with a port chosen by the kernel:
//   POST /v1/chat/completions  — JSON answers, or SSE chunk streams ending in
//                                "data: [DONE]" when the body says "stream": true
//   POST /v1/messages          — Anthropic's Messages API, same behaviours
// Each request gets the next scripted FakeReply (normal answer, 429 with
// Retry-After, 5xx, slow, truncated stream, malformed JSON, ...), or the
// default one when the script is empty. Every request is recorded (headers +
// body) for assertions, and so is the largest number served at once.
// One thread accepts; each connection has its own thread. Thread-safe.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace kevo::llm::testing {

struct FakeReply {
  enum class Kind {
    kAnswer,            // 200 with `content` (JSON, or SSE when the request streams)
    kRateLimit,         // 429, Retry-After: retry_after_s when set
    kServerError,       // `status` (default 500)
    kClientError,       // `status` (default 400) with error_message
    kSlow,              // waits `delay` (past the client's timeout), then answers
    kTruncatedStream,   // streams: half the chunks, then closes mid-stream;
                        // non-streamed: half the JSON body, then closes
    kMalformedJson,     // 200 with a body (or an SSE event) that is not JSON
    kCloseWithoutReply  // reads the request and hangs up
  };
  Kind kind = Kind::kAnswer;
  std::string content = "Here is a kernel:\n```cpp\nint main() { return 0; }\n```\n";
  int status = 0;                               // for kServerError / kClientError; 0: the default
  std::optional<int> retry_after_s;             // kRateLimit
  absl::Duration delay = absl::ZeroDuration();  // before replying (any kind)
  bool include_usage = true;                    // "usage" in JSON answers / the final SSE chunk
  int64_t prompt_tokens = 0;                    // 0: request's message bytes / 4
  int64_t completion_tokens = 0;                // 0: the number of content chunks
  size_t chunk_size = 7;                        // content bytes per SSE chunk
  std::string error_message;                    // kClientError's "error.message"
  bool echo_authorization = false;              // append the Authorization header to the error message or answer
};

struct RecordedRequest {
  std::string method;
  std::string target;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
};

struct FakeServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;
  // Both set: serve HTTPS with this certificate (PEM) and key (PEM).
  std::string tls_cert_pem;
  std::string tls_key_pem;
  // Non-empty: requests without "Authorization: Bearer <key>" (or x-api-key)
  // get 401, like a real hosted API.
  std::string expected_api_key;
  FakeReply default_reply;
  bool log_requests = false;  // one line per request on stderr
};

class FakeOpenAiServer {
 public:
  // Binds and starts serving. Unavailable when the address cannot be bound,
  // InvalidArgument for a bad certificate or key.
  static absl::StatusOr<std::unique_ptr<FakeOpenAiServer>> Start(FakeServerOptions options = {});
  ~FakeOpenAiServer();  // Stop()s

  int port() const;
  // "http://127.0.0.1:PORT/v1" (https:// with TLS).
  std::string base_url() const;

  // Queues replies for the next requests, in order; then the default reply.
  void Enqueue(FakeReply reply);
  void SetDefault(FakeReply reply);

  std::vector<RecordedRequest> requests() const;
  int max_concurrent() const;

  // Closes the listener and every connection, wakes slow replies and joins
  // the threads. Idempotent.
  void Stop();

  class Impl;

 private:
  explicit FakeOpenAiServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

struct CertAndKey {
  std::string cert_pem;
  std::string key_pem;
};
// A self-signed certificate (EC P-256, valid for a day) for `subject_alt_names`
// (OpenSSL syntax), usable as its own CA file. Internal on an OpenSSL failure.
absl::StatusOr<CertAndKey> MakeSelfSignedCert(const std::string& subject_alt_names = "DNS:localhost,IP:127.0.0.1");

}  // namespace kevo::llm::testing
