// fake-llm-server: the FakeOpenAiServer as a process, for integration tests
// that run real binaries (e.g. `kevo run --proposer llm`). Prints
// "listening HOST:PORT" on stdout once it accepts connections, serves until
// SIGTERM / SIGINT, and logs one line per request on stderr.
//
//   fake-llm-server [--host 127.0.0.1] [--port 0]
//                   [--content TEXT | --content-file FILE]
//                   [--script answer,429:2,500,slow:3,truncated,malformed,close,400,400:echo]
//                   [--answers FILE,FILE,...]  # scripted answers, one per request
//                   [--api-key-file FILE]   # require this key (401 otherwise)
//                   [--no-usage] [--tls-self-signed CERT_OUT]
//
// --script queues replies for the first requests ("400:echo": a 400 whose
// message quotes the Authorization header, as careless servers do); --answers then queues one
// normal answer per file, in order, with that file's text as the content (an
// end-to-end test scripts a correct kernel, a broken one, garbage, ...);
// afterwards every request gets the normal answer. --tls-self-signed serves HTTPS with a fresh
// self-signed certificate for 127.0.0.1 and writes it to CERT_OUT (the
// client's ca_file).
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

#include "tests/llm/fake_openai_server.h"

namespace {

using kevo::llm::testing::FakeReply;

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::stringstream buffer;
  buffer << in.rdbuf();
  *out = buffer.str();
  return true;
}

int Usage(const char* message) {
  std::fprintf(stderr, "fake-llm-server: %s\n", message);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  kevo::llm::testing::FakeServerOptions options;
  options.log_requests = true;
  std::string script;
  std::vector<std::string> answers;
  std::string cert_out;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](std::string* out) {
      if (i + 1 >= argc) return false;
      *out = argv[++i];
      return true;
    };
    std::string v;
    if (arg == "--host" && value(&v)) {
      options.host = v;
    } else if (arg == "--port" && value(&v)) {
      if (!absl::SimpleAtoi(v, &options.port)) return Usage("bad --port");
    } else if (arg == "--content" && value(&v)) {
      options.default_reply.content = v;
    } else if (arg == "--content-file" && value(&v)) {
      if (!ReadFile(v, &options.default_reply.content)) return Usage("cannot read --content-file");
    } else if (arg == "--script" && value(&v)) {
      script = v;
    } else if (arg == "--answers" && value(&v)) {
      for (absl::string_view file : absl::StrSplit(v, ',', absl::SkipEmpty())) {
        std::string content;
        if (!ReadFile(std::string(file), &content)) return Usage("cannot read an --answers file");
        answers.push_back(std::move(content));
      }
    } else if (arg == "--api-key-file" && value(&v)) {
      std::string key;
      if (!ReadFile(v, &key)) return Usage("cannot read --api-key-file");
      options.expected_api_key = std::string(absl::StripAsciiWhitespace(key));
    } else if (arg == "--no-usage") {
      options.default_reply.include_usage = false;
    } else if (arg == "--tls-self-signed" && value(&v)) {
      cert_out = v;
    } else {
      std::fprintf(stderr, "fake-llm-server: unknown or incomplete argument %s\n", arg.c_str());
      return 2;
    }
  }
  if (!cert_out.empty()) {
    auto cert = kevo::llm::testing::MakeSelfSignedCert();
    if (!cert.ok()) return Usage("cannot make a certificate");
    std::ofstream out(cert_out, std::ios::binary);
    out << cert->cert_pem;
    if (!out) return Usage("cannot write the certificate");
    options.tls_cert_pem = cert->cert_pem;
    options.tls_key_pem = cert->key_pem;
  }

  // Block the stop signals before any thread starts, then wait for them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto server = kevo::llm::testing::FakeOpenAiServer::Start(options);
  if (!server.ok()) {
    std::fprintf(stderr, "fake-llm-server: %s\n", server.status().ToString().c_str());
    return 1;
  }
  for (absl::string_view item : absl::StrSplit(script, ',', absl::SkipEmpty())) {
    std::vector<std::string> parts = absl::StrSplit(item, ':');
    FakeReply reply = options.default_reply;
    const std::string& kind = parts[0];
    int arg = 0;
    const bool has_arg = parts.size() > 1 && absl::SimpleAtoi(parts[1], &arg);
    if (kind == "answer") {
      reply.kind = FakeReply::Kind::kAnswer;
    } else if (kind == "429") {
      reply.kind = FakeReply::Kind::kRateLimit;
      if (has_arg) reply.retry_after_s = arg;
    } else if (kind == "500" || kind == "502" || kind == "503") {
      reply.kind = FakeReply::Kind::kServerError;
      absl::SimpleAtoi(kind, &reply.status);
    } else if (kind == "400") {
      reply.kind = FakeReply::Kind::kClientError;
      // "400:echo": the error message quotes the request's Authorization header.
      reply.echo_authorization = parts.size() > 1 && parts[1] == "echo";
    } else if (kind == "slow") {
      reply.kind = FakeReply::Kind::kSlow;
      reply.delay = absl::Seconds(has_arg ? arg : 60);
    } else if (kind == "truncated") {
      reply.kind = FakeReply::Kind::kTruncatedStream;
    } else if (kind == "malformed") {
      reply.kind = FakeReply::Kind::kMalformedJson;
    } else if (kind == "close") {
      reply.kind = FakeReply::Kind::kCloseWithoutReply;
    } else {
      std::fprintf(stderr, "fake-llm-server: unknown --script item %s\n", std::string(item).c_str());
      return 2;
    }
    (*server)->Enqueue(reply);
  }
  for (const std::string& content : answers) {
    FakeReply reply = options.default_reply;
    reply.content = content;
    (*server)->Enqueue(reply);
  }
  std::printf("listening %s:%d\n", options.host.c_str(), (*server)->port());
  std::fflush(stdout);

  int received = 0;
  sigwait(&signals, &received);
  (*server)->Stop();
  const auto requests = (*server)->requests();
  std::fprintf(stderr, "fake-llm-server: stopping after %zu requests (max %d at once)\n", requests.size(),
               (*server)->max_concurrent());
  return 0;
}
