#include "coordinator/llm/http.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <exception>
#include <optional>
#include <utility>  // first: Boost 1.74 asio under GCC 12

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

namespace kevo::llm {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace ssl = boost::asio::ssl;
using tcp = boost::asio::ip::tcp;
using beast::error_code;

std::chrono::steady_clock::time_point ToSteady(absl::Time t) {
  absl::Duration left = t - absl::Now();
  if (left < absl::ZeroDuration()) left = absl::ZeroDuration();
  return std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(left);
}

// Runs one asynchronous operation on `ioc` to completion and returns its
// error. The operation's own timer (tcp_stream's expiry) bounds it.
template <typename Start>
error_code Await(asio::io_context& ioc, Start&& start) {
  error_code result;
  start([&result](error_code ec, auto&&...) { result = ec; });
  ioc.restart();
  ioc.run();
  return result;
}

bool IsTimeout(const error_code& ec) { return ec == beast::error::timeout || ec == asio::error::timed_out; }

std::string Where(const Url& url) { return absl::StrCat(url.host, ":", url.port); }

// Writes the request and reads the response through `stream` (plain or TLS),
// whose lowest layer is `tcp`. Fills `result`.
template <typename Stream>
void Exchange(asio::io_context& ioc, Stream& stream, beast::tcp_stream& tcp, const Url& url, const HttpRequest& request,
              absl::Time deadline, absl::Duration total, HttpResult& result) {
  http::request<http::string_body> req;
  req.method(http::string_to_verb(request.method));
  req.target(request.target);
  req.version(11);
  req.set(http::field::host, url.host);
  req.set(http::field::user_agent, "kevo-llm/1");
  req.keep_alive(false);
  for (const auto& [name, value] : request.headers) req.set(name, value);
  req.body() = request.body;
  req.prepare_payload();

  auto timeout_status = [&] {
    return absl::DeadlineExceededError(
        absl::StrCat("request to ", Where(url), " timed out after ", absl::FormatDuration(total)));
  };

  tcp.expires_at(ToSteady(deadline));
  error_code ec = Await(ioc, [&](auto handler) { http::async_write(stream, req, handler); });
  if (ec) {
    result.error = IsTimeout(ec)
                       ? timeout_status()
                       : absl::UnavailableError(absl::StrCat("sending to ", Where(url), " failed: ", ec.message()));
    return;
  }

  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(256u << 20);
  tcp.expires_at(ToSteady(deadline));
  ec = Await(ioc, [&](auto handler) { http::async_read_header(stream, buffer, parser, handler); });
  if (ec) {
    result.error = IsTimeout(ec)
                       ? timeout_status()
                       : absl::UnavailableError(absl::StrCat("no response from ", Where(url), ": ", ec.message()));
    return;
  }
  result.got_headers = true;
  result.status = static_cast<int>(parser.get().result_int());
  for (const auto& field : parser.get()) {
    result.headers[absl::AsciiStrToLower(std::string(field.name_string()))] = std::string(field.value());
  }
  // Read the body piece by piece so that whatever arrived survives an error.
  while (!parser.is_done()) {
    ec = Await(ioc, [&](auto handler) { http::async_read_some(stream, buffer, parser, handler); });
    if (ec == http::error::need_buffer) continue;
    if (ec) break;
  }
  result.body = std::move(parser.get().body());
  if (!ec || parser.is_done()) return;
  if (IsTimeout(ec)) {
    result.error = timeout_status();
  } else {
    result.error = absl::DataLossError(absl::StrCat("response body from ", Where(url), " broke off after ",
                                                    result.body.size(), " bytes: ", ec.message()));
  }
}

HttpResult SendImpl(const Url& url, const HttpRequest& request, const HttpOptions& options) {
  HttpResult result;
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + options.total_timeout;
  const absl::Time connect_deadline = std::min(deadline, start + options.connect_timeout);
  auto connect_timeout = [&] {
    return absl::DeadlineExceededError(
        absl::StrCat("connecting to ", Where(url), " timed out after ", absl::FormatDuration(options.connect_timeout)));
  };

  asio::io_context ioc;
  // Resolve, bounded by the connect deadline.
  tcp::resolver resolver(ioc);
  error_code resolve_ec;
  tcp::resolver::results_type endpoints;
  bool resolved = false;
  resolver.async_resolve(url.host, url.port, [&](error_code ec, tcp::resolver::results_type r) {
    resolve_ec = ec;
    endpoints = std::move(r);
    resolved = true;
  });
  ioc.run_until(ToSteady(connect_deadline));
  if (!resolved) {
    resolver.cancel();
    ioc.restart();
    ioc.run();
    result.error = connect_timeout();
    return result;
  }
  if (resolve_ec) {
    result.error = absl::UnavailableError(absl::StrCat("cannot resolve ", url.host, ": ", resolve_ec.message()));
    return result;
  }

  auto connect = [&](beast::tcp_stream& tcp) -> bool {
    tcp.expires_at(ToSteady(connect_deadline));
    error_code ec = Await(ioc, [&](auto handler) { tcp.async_connect(endpoints, handler); });
    if (!ec) return true;
    result.error = IsTimeout(ec)
                       ? connect_timeout()
                       : absl::UnavailableError(absl::StrCat("cannot connect to ", Where(url), ": ", ec.message()));
    return false;
  };

  if (!url.tls) {
    beast::tcp_stream tcp(ioc);
    if (!connect(tcp)) return result;
    Exchange(ioc, tcp, tcp, url, request, deadline, options.total_timeout, result);
    error_code ignored;
    tcp.socket().shutdown(tcp::socket::shutdown_both, ignored);
    return result;
  }

  ssl::context ctx(ssl::context::tls_client);
  ctx.set_default_verify_paths();
  if (!options.ca_file.empty()) {
    error_code ec;
    ctx.load_verify_file(options.ca_file, ec);
    if (ec) {
      result.error =
          absl::FailedPreconditionError(absl::StrCat("cannot load CA file ", options.ca_file, ": ", ec.message()));
      return result;
    }
  }
  ctx.set_verify_mode(ssl::verify_peer);
  beast::ssl_stream<beast::tcp_stream> stream(ioc, ctx);
  error_code addr_ec;
  asio::ip::make_address(url.host, addr_ec);
  const bool host_is_ip = !addr_ec;
  // Server Name Indication for virtual hosts; not allowed for IP literals.
  if (!host_is_ip && !SSL_set_tlsext_host_name(stream.native_handle(), url.host.c_str())) {
    result.error = absl::InternalError("cannot set the TLS server name");
    return result;
  }
  // OpenSSL's own name check, so that a mismatch shows in the verify result.
  X509_VERIFY_PARAM* param = SSL_get0_param(stream.native_handle());
  X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  const int named = host_is_ip ? X509_VERIFY_PARAM_set1_ip_asc(param, url.host.c_str())
                               : X509_VERIFY_PARAM_set1_host(param, url.host.c_str(), 0);
  if (named != 1) {
    result.error = absl::InternalError("cannot set the TLS host name to verify");
    return result;
  }
  beast::tcp_stream& tcp = beast::get_lowest_layer(stream);
  if (!connect(tcp)) return result;
  tcp.expires_at(ToSteady(connect_deadline));
  error_code ec = Await(ioc, [&](auto handler) { stream.async_handshake(ssl::stream_base::client, handler); });
  if (ec) {
    const long verify = SSL_get_verify_result(stream.native_handle());
    if (IsTimeout(ec)) {
      result.error = connect_timeout();
    } else if (verify != X509_V_OK) {
      result.error = absl::FailedPreconditionError(
          absl::StrCat("TLS certificate of ", Where(url), " did not verify: ", X509_verify_cert_error_string(verify),
                       " (add the issuing CA with ca_file if the server uses a private CA)"));
    } else {
      result.error = absl::UnavailableError(absl::StrCat("TLS handshake with ", Where(url), " failed: ", ec.message()));
    }
    return result;
  }
  Exchange(ioc, stream, tcp, url, request, deadline, options.total_timeout, result);
  // Skip the TLS close_notify exchange: the response is complete (or broken)
  // already, and a peer that never answers it would cost a timeout.
  error_code ignored;
  tcp.socket().shutdown(tcp::socket::shutdown_both, ignored);
  return result;
}

}  // namespace

absl::StatusOr<Url> ParseUrl(const std::string& text) {
  Url url;
  std::string rest;
  if (text.rfind("http://", 0) == 0) {
    rest = text.substr(7);
  } else if (text.rfind("https://", 0) == 0) {
    url.tls = true;
    rest = text.substr(8);
  } else {
    return absl::InvalidArgumentError(absl::StrCat("URL \"", text, "\" must start with http:// or https://"));
  }
  const size_t slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  url.path = slash == std::string::npos ? "" : rest.substr(slash);
  while (!url.path.empty() && url.path.back() == '/') url.path.pop_back();
  if (authority.find('@') != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("URL \"", text, "\": credentials in URLs are not supported (use api_key_env)"));
  }
  std::string port;
  if (!authority.empty() && authority[0] == '[') {
    const size_t close = authority.find(']');
    if (close == std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("URL \"", text, "\": unclosed '['"));
    }
    url.host = authority.substr(1, close - 1);
    std::string after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') {
        return absl::InvalidArgumentError(absl::StrCat("URL \"", text, "\": bad host"));
      }
      port = after.substr(1);
    }
  } else {
    const size_t colon = authority.rfind(':');
    url.host = authority.substr(0, colon);
    if (colon != std::string::npos) port = authority.substr(colon + 1);
  }
  if (url.host.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("URL \"", text, "\" has no host"));
  }
  if (port.empty()) {
    url.port = url.tls ? "443" : "80";
  } else {
    int value = 0;
    if (!absl::SimpleAtoi(port, &value) || value <= 0 || value > 65535) {
      return absl::InvalidArgumentError(absl::StrCat("URL \"", text, "\" has a bad port \"", port, "\""));
    }
    url.port = port;
  }
  return url;
}

HttpResult SendHttp(const Url& url, const HttpRequest& request, const HttpOptions& options) {
  try {
    return SendImpl(url, request, options);
  } catch (const std::exception& e) {
    HttpResult result;
    result.error = absl::UnavailableError(absl::StrCat("HTTP request to ", Where(url), " failed: ", e.what()));
    return result;
  }
}

}  // namespace kevo::llm
