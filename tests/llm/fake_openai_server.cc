#include "tests/llm/fake_openai_server.h"

#include <sys/socket.h>

#include <algorithm>
#include <cstdio>
#include <deque>
#include <exception>
#include <map>
#include <set>
#include <thread>
#include <utility>  // first: Boost 1.74 asio under GCC 12

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include <nlohmann/json.hpp>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace kevo::llm::testing {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace ssl = boost::asio::ssl;
using tcp = boost::asio::ip::tcp;
using nlohmann::json;

class FakeOpenAiServer::Impl {
 public:
  explicit Impl(FakeServerOptions options)
      : options_(std::move(options)),
        acceptor_(ioc_),
        tls_ctx_(ssl::context::tls_server),
        default_reply_(options_.default_reply) {}

  ~Impl() { Stop(); }

  absl::Status Start() {
    try {
      tls_ = !options_.tls_cert_pem.empty() && !options_.tls_key_pem.empty();
      if (tls_) {
        beast::error_code ec;
        tls_ctx_.use_certificate_chain(asio::buffer(options_.tls_cert_pem.data(), options_.tls_cert_pem.size()), ec);
        if (!ec) {
          tls_ctx_.use_private_key(asio::buffer(options_.tls_key_pem.data(), options_.tls_key_pem.size()),
                                   ssl::context::pem, ec);
        }
        if (ec) return absl::InvalidArgumentError(absl::StrCat("bad TLS cert/key: ", ec.message()));
      }
      tcp::endpoint endpoint(asio::ip::make_address(options_.host), static_cast<unsigned short>(options_.port));
      acceptor_.open(endpoint.protocol());
      acceptor_.set_option(asio::socket_base::reuse_address(true));
      acceptor_.bind(endpoint);
      acceptor_.listen();
      port_ = acceptor_.local_endpoint().port();
    } catch (const std::exception& e) {
      return absl::UnavailableError(
          absl::StrCat("fake LLM server cannot listen on ", options_.host, ":", options_.port, ": ", e.what()));
    }
    accept_thread_ = std::thread([this] { AcceptLoop(); });
    return absl::OkStatus();
  }

  void Stop() {
    {
      absl::MutexLock l(&mu_);
      if (stopping_) return;
      stopping_ = true;
      cv_.SignalAll();
      for (int fd : open_fds_) ::shutdown(fd, SHUT_RDWR);
    }
    ::shutdown(acceptor_.native_handle(), SHUT_RDWR);
    if (accept_thread_.joinable()) accept_thread_.join();
    std::map<std::thread::id, std::thread> threads;
    {
      absl::MutexLock l(&mu_);
      threads.swap(connection_threads_);
    }
    for (auto& [id, t] : threads) t.join();
    beast::error_code ignored;
    acceptor_.close(ignored);
  }

  int port() const { return port_; }
  bool tls() const { return tls_; }
  const std::string& host() const { return options_.host; }

  void Enqueue(FakeReply reply) {
    absl::MutexLock l(&mu_);
    script_.push_back(std::move(reply));
  }
  void SetDefault(FakeReply reply) {
    absl::MutexLock l(&mu_);
    default_reply_ = std::move(reply);
  }
  std::vector<RecordedRequest> requests() const {
    absl::MutexLock l(&mu_);
    return requests_;
  }
  int max_concurrent() const {
    absl::MutexLock l(&mu_);
    return max_concurrent_;
  }

 private:
  void AcceptLoop() {
    for (;;) {
      beast::error_code ec;
      tcp::socket socket(ioc_);
      acceptor_.accept(socket, ec);
      absl::MutexLock l(&mu_);
      if (stopping_) return;
      if (ec) continue;
      // Join the connections that have ended, so that a long-running
      // fake-llm-server does not pile up finished threads.
      for (std::thread::id id : finished_) {
        auto it = connection_threads_.find(id);
        if (it != connection_threads_.end()) {
          it->second.join();
          connection_threads_.erase(it);
        }
      }
      finished_.clear();
      const int fd = socket.native_handle();
      open_fds_.insert(fd);
      std::thread t([this, s = std::move(socket)]() mutable {
        Serve(std::move(s));
        absl::MutexLock l(&mu_);
        finished_.push_back(std::this_thread::get_id());
      });
      const std::thread::id id = t.get_id();
      connection_threads_.emplace(id, std::move(t));
    }
  }

  void Serve(tcp::socket socket) {
    const int fd = socket.native_handle();
    try {
      if (tls_) {
        ssl::stream<tcp::socket> stream(std::move(socket), tls_ctx_);
        beast::error_code ec;
        stream.handshake(ssl::stream_base::server, ec);
        if (!ec) ServeStream(stream);
        Forget(fd);
        stream.lowest_layer().close(ec);
      } else {
        ServeStream(socket);
        Forget(fd);
        beast::error_code ec;
        socket.close(ec);
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "fake LLM server: connection error: %s\n", e.what());
      Forget(fd);
    }
  }

  void Forget(int fd) {
    absl::MutexLock l(&mu_);
    open_fds_.erase(fd);
  }

  template <typename Stream>
  void ServeStream(Stream& stream) {
    beast::flat_buffer buffer;
    for (;;) {
      http::request_parser<http::string_body> parser;
      parser.body_limit(64u << 20);
      beast::error_code ec;
      http::read(stream, buffer, parser, ec);
      if (ec) return;
      const auto& req = parser.get();
      RecordedRequest record;
      record.method = std::string(req.method_string());
      record.target = std::string(req.target());
      for (const auto& field : req) {
        record.headers[absl::AsciiStrToLower(std::string(field.name_string()))] = std::string(field.value());
      }
      record.body = req.body();
      FakeReply reply;
      {
        absl::MutexLock l(&mu_);
        requests_.push_back(record);
        if (!script_.empty()) {
          reply = std::move(script_.front());
          script_.pop_front();
        } else {
          reply = default_reply_;
        }
        ++in_flight_;
        max_concurrent_ = std::max(max_concurrent_, in_flight_);
        if (options_.log_requests) {
          std::fprintf(stderr, "fake-llm-server: request %zu %s %s (%zu bytes), reply kind %d\n", requests_.size(),
                       record.method.c_str(), record.target.c_str(), record.body.size(), static_cast<int>(reply.kind));
        }
      }
      // A request counts as in flight from its arrival to the end of its
      // reply's delay: the client cannot have its answer before then, so the
      // count never exceeds the client's own concurrency (counting until the
      // last byte was written let the client's next request arrive first).
      const bool waited = reply.delay <= absl::ZeroDuration() || Wait(reply.delay);
      {
        absl::MutexLock l(&mu_);
        --in_flight_;
      }
      const bool keep_going = waited && Reply(stream, record, reply) && req.keep_alive();
      if (!keep_going) return;
    }
  }

  // Waits `d` or until Stop(); false when stopped.
  bool Wait(absl::Duration d) {
    absl::MutexLock l(&mu_);
    const absl::Time until = absl::Now() + d;
    while (!stopping_ && absl::Now() < until) {
      cv_.WaitWithDeadline(&mu_, until);
    }
    return !stopping_;
  }

  template <typename Stream>
  static bool Write(Stream& stream, const std::string& bytes) {
    beast::error_code ec;
    asio::write(stream, asio::buffer(bytes), ec);
    return !ec;
  }

  static std::string Head(int status, const std::string& reason,
                          const std::vector<std::pair<std::string, std::string>>& headers) {
    std::string out = absl::StrCat("HTTP/1.1 ", status, " ", reason, "\r\n");
    for (const auto& [k, v] : headers) absl::StrAppend(&out, k, ": ", v, "\r\n");
    out += "\r\n";
    return out;
  }

  template <typename Stream>
  static bool WriteJson(Stream& stream, int status, const std::string& reason, const std::string& body,
                        std::vector<std::pair<std::string, std::string>> extra = {}) {
    extra.emplace_back("Content-Type", "application/json");
    extra.emplace_back("Content-Length", std::to_string(body.size()));
    extra.emplace_back("Connection", "close");
    Write(stream, Head(status, reason, extra) + body);
    return false;  // one reply per connection (Connection: close)
  }

  static std::string Chunk(const std::string& data) {
    char size[32];
    std::snprintf(size, sizeof size, "%zx\r\n", data.size());
    return absl::StrCat(size, data, "\r\n");
  }

  static std::string ErrorBody(const std::string& message, const std::string& type) {
    return json{{"error", {{"message", message}, {"type", type}, {"code", nullptr}}}}.dump();
  }

  template <typename Stream>
  // Writes `reply` (its delay already waited by the caller).
  bool Reply(Stream& stream, const RecordedRequest& request, const FakeReply& reply) {
    const bool anthropic = request.target.find("/messages") != std::string::npos;
    if (request.target.find("/chat/completions") == std::string::npos && !anthropic) {
      return WriteJson(stream, 404, "Not Found", ErrorBody(absl::StrCat("no route ", request.target), "not_found"));
    }
    if (!options_.expected_api_key.empty()) {
      auto auth = request.headers.find("authorization");
      auto xkey = request.headers.find("x-api-key");
      const bool ok = (auth != request.headers.end() && auth->second == "Bearer " + options_.expected_api_key) ||
                      (xkey != request.headers.end() && xkey->second == options_.expected_api_key);
      if (!ok) {
        return WriteJson(stream, 401, "Unauthorized", ErrorBody("Incorrect API key provided", "invalid_request_error"));
      }
    }
    json body;
    try {
      body = json::parse(request.body);
    } catch (const std::exception& e) {
      return WriteJson(stream, 400, "Bad Request",
                       ErrorBody(absl::StrCat("body is not JSON: ", e.what()), "invalid_request_error"));
    }
    std::string echo;
    if (reply.echo_authorization) {
      auto auth = request.headers.find("authorization");
      echo = absl::StrCat("; you sent Authorization: ", auth == request.headers.end() ? "(none)" : auth->second);
    }
    switch (reply.kind) {
      case FakeReply::Kind::kRateLimit: {
        std::vector<std::pair<std::string, std::string>> extra;
        if (reply.retry_after_s) extra.emplace_back("Retry-After", std::to_string(*reply.retry_after_s));
        return WriteJson(stream, 429, "Too Many Requests",
                         ErrorBody("Rate limit reached for requests" + echo, "rate_limit_exceeded"), extra);
      }
      case FakeReply::Kind::kServerError:
        return WriteJson(stream, reply.status ? reply.status : 500, "Server Error",
                         ErrorBody("The server had an error processing your request" + echo, "server_error"));
      case FakeReply::Kind::kClientError:
        return WriteJson(
            stream, reply.status ? reply.status : 400, "Bad Request",
            ErrorBody((reply.error_message.empty() ? std::string("bad request") : reply.error_message) + echo,
                      "invalid_request_error"));
      case FakeReply::Kind::kCloseWithoutReply:
        return false;
      default:
        break;
    }
    if (!body.is_object() || !body.contains("messages") || !body["messages"].is_array()) {
      return WriteJson(stream, 400, "Bad Request",
                       ErrorBody("'messages' is a required property", "invalid_request_error"));
    }
    const std::string model = body.value("model", std::string("fake-model"));
    int64_t prompt_tokens = reply.prompt_tokens;
    if (prompt_tokens == 0) {
      int64_t bytes = 0;
      for (const json& m : body["messages"]) {
        if (m.is_object() && m.contains("content") && m["content"].is_string()) {
          bytes += static_cast<int64_t>(m["content"].get_ref<const std::string&>().size());
        }
      }
      if (body.contains("system") && body["system"].is_string()) {
        bytes += static_cast<int64_t>(body["system"].get_ref<const std::string&>().size());
      }
      prompt_tokens = (bytes + 3) / 4;
    }
    std::vector<std::string> pieces;
    const size_t step = std::max<size_t>(1, reply.chunk_size);
    const std::string content = reply.content + echo;
    for (size_t i = 0; i < content.size(); i += step) pieces.push_back(content.substr(i, step));
    const int64_t completion_tokens =
        reply.completion_tokens ? reply.completion_tokens : static_cast<int64_t>(pieces.size());
    const int64_t id = NextId();
    const bool stream_requested = body.value("stream", false);
    if (stream_requested) {
      bool include_usage = reply.include_usage;
      if (!anthropic) {
        include_usage = include_usage && body.contains("stream_options") && body["stream_options"].is_object() &&
                        body["stream_options"].value("include_usage", false);
      }
      return anthropic
                 ? StreamAnthropic(stream, reply, model, id, pieces, prompt_tokens, completion_tokens, include_usage)
                 : StreamOpenAi(stream, reply, model, id, pieces, prompt_tokens, completion_tokens, include_usage);
    }
    json answer;
    if (anthropic) {
      answer = {{"id", absl::StrCat("msg_fake_", id)},
                {"type", "message"},
                {"role", "assistant"},
                {"model", model},
                {"content", json::array({{{"type", "text"}, {"text", content}}})},
                {"stop_reason", "end_turn"}};
      if (reply.include_usage) {
        answer["usage"] = {{"input_tokens", prompt_tokens}, {"output_tokens", completion_tokens}};
      }
    } else {
      answer = {{"id", absl::StrCat("chatcmpl-fake-", id)},
                {"object", "chat.completion"},
                {"created", absl::ToUnixSeconds(absl::Now())},
                {"model", model},
                {"choices", json::array({{{"index", 0},
                                          {"message", {{"role", "assistant"}, {"content", content}}},
                                          {"finish_reason", "stop"}}})}};
      if (reply.include_usage) {
        answer["usage"] = {{"prompt_tokens", prompt_tokens},
                           {"completion_tokens", completion_tokens},
                           {"total_tokens", prompt_tokens + completion_tokens}};
      }
    }
    std::string text = answer.dump();
    if (reply.kind == FakeReply::Kind::kMalformedJson) {
      text = text.substr(0, text.size() / 2) + "<<garbage";
    }
    if (reply.kind == FakeReply::Kind::kTruncatedStream) {
      // Promise the whole length, send half, hang up.
      const std::string head = Head(200, "OK",
                                    {{"Content-Type", "application/json"},
                                     {"Content-Length", std::to_string(text.size())},
                                     {"Connection", "close"}});
      Write(stream, head + text.substr(0, text.size() / 2));
      return false;
    }
    return WriteJson(stream, 200, "OK", text);
  }

  template <typename Stream>
  bool StreamOpenAi(Stream& stream, const FakeReply& reply, const std::string& model, int64_t id,
                    const std::vector<std::string>& pieces, int64_t prompt_tokens, int64_t completion_tokens,
                    bool include_usage) {
    if (!Write(stream, Head(200, "OK",
                            {{"Content-Type", "text/event-stream"},
                             {"Cache-Control", "no-cache"},
                             {"Transfer-Encoding", "chunked"},
                             {"Connection", "close"}}))) {
      return false;
    }
    const std::string chunk_id = absl::StrCat("chatcmpl-fake-", id);
    auto event = [&](json delta, json finish, bool with_choice) {
      json j = {{"id", chunk_id},
                {"object", "chat.completion.chunk"},
                {"created", absl::ToUnixSeconds(absl::Now())},
                {"model", model}};
      if (with_choice) {
        j["choices"] = json::array({{{"index", 0}, {"delta", delta}, {"finish_reason", finish}}});
      } else {
        j["choices"] = json::array();
      }
      return Chunk(absl::StrCat("data: ", j.dump(), "\n\n"));
    };
    if (!Write(stream, event({{"role", "assistant"}, {"content", ""}}, nullptr, true))) return false;
    const size_t limit = reply.kind == FakeReply::Kind::kTruncatedStream ? pieces.size() / 2 : pieces.size();
    for (size_t i = 0; i < limit; ++i) {
      if (reply.kind == FakeReply::Kind::kMalformedJson && i == limit / 2) {
        if (!Write(stream, Chunk("data: {\"choices\": [{\"delta\": {\"content\": oops}\n\n"))) return false;
      }
      if (!Write(stream, event({{"content", pieces[i]}}, nullptr, true))) return false;
    }
    if (reply.kind == FakeReply::Kind::kTruncatedStream) {
      // Half an event, then hang up without the terminating zero chunk.
      Write(stream, Chunk("data: {\"id\": \"" + chunk_id + "\", \"choi"));
      return false;
    }
    if (!Write(stream, event(json::object(), "stop", true))) return false;
    if (include_usage) {
      json j = {{"id", chunk_id},
                {"object", "chat.completion.chunk"},
                {"model", model},
                {"choices", json::array()},
                {"usage",
                 {{"prompt_tokens", prompt_tokens},
                  {"completion_tokens", completion_tokens},
                  {"total_tokens", prompt_tokens + completion_tokens}}}};
      if (!Write(stream, Chunk(absl::StrCat("data: ", j.dump(), "\n\n")))) return false;
    }
    Write(stream, Chunk("data: [DONE]\n\n") + "0\r\n\r\n");
    return false;
  }

  template <typename Stream>
  bool StreamAnthropic(Stream& stream, const FakeReply& reply, const std::string& model, int64_t id,
                       const std::vector<std::string>& pieces, int64_t prompt_tokens, int64_t completion_tokens,
                       bool include_usage) {
    if (!Write(stream, Head(200, "OK",
                            {{"Content-Type", "text/event-stream"},
                             {"Cache-Control", "no-cache"},
                             {"Transfer-Encoding", "chunked"},
                             {"Connection", "close"}}))) {
      return false;
    }
    auto event = [&](const std::string& name, const json& data) {
      return Chunk(absl::StrCat("event: ", name, "\ndata: ", data.dump(), "\n\n"));
    };
    json start = {{"type", "message_start"},
                  {"message",
                   {{"id", absl::StrCat("msg_fake_", id)},
                    {"type", "message"},
                    {"role", "assistant"},
                    {"model", model},
                    {"content", json::array()}}}};
    if (include_usage) start["message"]["usage"] = {{"input_tokens", prompt_tokens}, {"output_tokens", 1}};
    if (!Write(stream, event("message_start", start))) return false;
    if (!Write(stream, event("content_block_start", {{"type", "content_block_start"},
                                                     {"index", 0},
                                                     {"content_block", {{"type", "text"}, {"text", ""}}}}))) {
      return false;
    }
    const size_t limit = reply.kind == FakeReply::Kind::kTruncatedStream ? pieces.size() / 2 : pieces.size();
    for (size_t i = 0; i < limit; ++i) {
      if (!Write(stream, event("content_block_delta", {{"type", "content_block_delta"},
                                                       {"index", 0},
                                                       {"delta", {{"type", "text_delta"}, {"text", pieces[i]}}}}))) {
        return false;
      }
    }
    if (reply.kind == FakeReply::Kind::kTruncatedStream) return false;
    Write(stream, event("content_block_stop", {{"type", "content_block_stop"}, {"index", 0}}));
    json delta = {{"type", "message_delta"}, {"delta", {{"stop_reason", "end_turn"}}}};
    if (include_usage) delta["usage"] = {{"output_tokens", completion_tokens}};
    Write(stream, event("message_delta", delta));
    Write(stream, event("message_stop", {{"type", "message_stop"}}) + "0\r\n\r\n");
    return false;
  }

  int64_t NextId() {
    absl::MutexLock l(&mu_);
    return ++next_id_;
  }

  const FakeServerOptions options_;
  asio::io_context ioc_;
  tcp::acceptor acceptor_;
  ssl::context tls_ctx_;
  bool tls_ = false;
  int port_ = 0;
  std::thread accept_thread_;

  mutable absl::Mutex mu_;
  absl::CondVar cv_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  FakeReply default_reply_ ABSL_GUARDED_BY(mu_);
  std::deque<FakeReply> script_ ABSL_GUARDED_BY(mu_);
  std::vector<RecordedRequest> requests_ ABSL_GUARDED_BY(mu_);
  std::set<int> open_fds_ ABSL_GUARDED_BY(mu_);
  std::map<std::thread::id, std::thread> connection_threads_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread::id> finished_ ABSL_GUARDED_BY(mu_);
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  int max_concurrent_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t next_id_ ABSL_GUARDED_BY(mu_) = 0;

  friend class FakeOpenAiServer;
};

absl::StatusOr<std::unique_ptr<FakeOpenAiServer>> FakeOpenAiServer::Start(FakeServerOptions options) {
  auto impl = std::make_unique<Impl>(std::move(options));
  absl::Status started = impl->Start();
  if (!started.ok()) return started;
  return std::unique_ptr<FakeOpenAiServer>(new FakeOpenAiServer(std::move(impl)));
}

FakeOpenAiServer::FakeOpenAiServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
FakeOpenAiServer::~FakeOpenAiServer() { Stop(); }

int FakeOpenAiServer::port() const { return impl_->port(); }
std::string FakeOpenAiServer::base_url() const {
  const std::string& host = impl_->host();
  const bool v6 = host.find(':') != std::string::npos;
  return absl::StrCat(impl_->tls() ? "https://" : "http://", v6 ? "[" : "", host, v6 ? "]" : "", ":", impl_->port(),
                      "/v1");
}
void FakeOpenAiServer::Enqueue(FakeReply reply) { impl_->Enqueue(std::move(reply)); }
void FakeOpenAiServer::SetDefault(FakeReply reply) { impl_->SetDefault(std::move(reply)); }
std::vector<RecordedRequest> FakeOpenAiServer::requests() const { return impl_->requests(); }
int FakeOpenAiServer::max_concurrent() const { return impl_->max_concurrent(); }
void FakeOpenAiServer::Stop() { impl_->Stop(); }

absl::StatusOr<CertAndKey> MakeSelfSignedCert(const std::string& subject_alt_names) {
  EVP_PKEY* key = EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256");
  if (key == nullptr) return absl::InternalError("EC key generation failed");
  X509* cert = X509_new();
  auto cleanup = [&] {
    X509_free(cert);
    EVP_PKEY_free(key);
  };
  bool ok = cert != nullptr && X509_set_version(cert, 2) == 1 &&
            ASN1_INTEGER_set(X509_get_serialNumber(cert), 1) == 1 &&
            X509_gmtime_adj(X509_getm_notBefore(cert), -3600) != nullptr &&
            X509_gmtime_adj(X509_getm_notAfter(cert), 24 * 3600) != nullptr && X509_set_pubkey(cert, key) == 1;
  if (ok) {
    X509_NAME* name = X509_get_subject_name(cert);
    ok = X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                                    reinterpret_cast<const unsigned char*>("kevo fake LLM server"), -1, -1, 0) == 1 &&
         X509_set_issuer_name(cert, name) == 1;
  }
  const std::pair<int, const char*> extensions[] = {
      {NID_subject_alt_name, subject_alt_names.c_str()},
      {NID_basic_constraints, "critical,CA:TRUE"},
      {NID_key_usage, "critical,digitalSignature,keyCertSign"},
  };
  for (const auto& [nid, value] : extensions) {
    if (!ok) break;
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, cert, cert, nullptr, nullptr, 0);
    X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
    ok = ext != nullptr && X509_add_ext(cert, ext, -1) == 1;
    X509_EXTENSION_free(ext);
  }
  ok = ok && X509_sign(cert, key, EVP_sha256()) > 0;
  if (!ok) {
    cleanup();
    return absl::InternalError("building the self-signed certificate failed");
  }
  auto to_pem = [](auto write) {
    BIO* bio = BIO_new(BIO_s_mem());
    write(bio);
    char* data = nullptr;
    const long len = BIO_get_mem_data(bio, &data);
    std::string out(data, static_cast<size_t>(len));
    BIO_free(bio);
    return out;
  };
  CertAndKey result;
  result.cert_pem = to_pem([&](BIO* bio) { PEM_write_bio_X509(bio, cert); });
  result.key_pem = to_pem([&](BIO* bio) { PEM_write_bio_PrivateKey(bio, key, nullptr, nullptr, 0, nullptr, nullptr); });
  cleanup();
  return result;
}

}  // namespace kevo::llm::testing
