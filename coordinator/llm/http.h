// A minimal blocking HTTP/1.1 client over plain TCP or TLS (Boost.Beast +
// OpenSSL), internal to kevo::llm. One connection per request: LLM calls last
// seconds to minutes, so connection reuse buys nothing worth its complexity.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace kevo::llm {

struct Url {
  bool tls = false;
  std::string host;
  std::string port;  // "80" / "443" when the URL names none
  std::string path;  // without a trailing '/', "" for the root
};

// Parses "http[s]://host[:port][/path]" (IPv6 hosts in brackets). InvalidArgument
// otherwise; the message quotes the URL.
absl::StatusOr<Url> ParseUrl(const std::string& url);

struct HttpRequest {
  std::string method = "POST";
  std::string target;  // "/v1/chat/completions"
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
};

struct HttpResult {
  // OK when a complete response arrived (of any HTTP status). Otherwise:
  //   DeadlineExceeded — the connect or total timeout expired (at any stage);
  //   Unavailable      — resolve / connect / TLS handshake / write failed, or
  //                      the server closed before sending a status line;
  //   FailedPrecondition — the server's TLS certificate did not verify;
  //   DataLoss         — the body broke off; `body` holds what arrived.
  absl::Status error;
  bool got_headers = false;
  int status = 0;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
};

struct HttpOptions {
  absl::Duration connect_timeout = absl::Seconds(10);
  absl::Duration total_timeout = absl::Seconds(300);
  std::string ca_file;  // added to the system's default CA paths
};

// Sends `request` to `url`'s host and reads the whole response. Thread-safe
// (each call has its own io_context and socket). Never throws.
HttpResult SendHttp(const Url& url, const HttpRequest& request, const HttpOptions& options);

}  // namespace kevo::llm
