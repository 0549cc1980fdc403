#include "common/rpc/client_channel.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include <grpcpp/support/client_interceptor.h>

#include "common/status.h"

namespace kevo::rpc {
namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

// Adds the bearer token to every call's initial metadata. An interceptor
// rather than call credentials: gRPC sends call credentials only over a
// secure channel, and kevo allows plaintext on loopback.
class BearerInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit BearerInterceptor(const std::string* header) : header_(header) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->insert({"authorization", *header_});
    }
    methods->Proceed();
  }

 private:
  const std::string* header_;
};

class BearerInterceptorFactory final : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit BearerInterceptorFactory(std::string token) : header_(absl::StrCat("Bearer ", token)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(grpc::experimental::ClientRpcInfo*) override {
    return new BearerInterceptor(&header_);
  }

 private:
  std::string header_;  // lives as long as the channel, which owns the factory
};

}  // namespace

absl::StatusOr<std::string> ReadSecretFile(const std::string& path, const std::string& what) {
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("cannot read ", what, " ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text(absl::StripAsciiWhitespace(ss.str()));
  if (text.empty()) return absl::InvalidArgumentError(absl::StrCat(what, " ", path, " is empty"));
  return text;
}

absl::StatusOr<ClientCredentials> CredentialsFromEnvironment(const std::string& token_file,
                                                             const std::string& tls_ca_file) {
  ClientCredentials c;
  if (!token_file.empty()) {
    KEVO_ASSIGN_OR_RETURN(c.token, ReadSecretFile(token_file, "token file"));
  } else if (std::string t = Env("KEVO_TOKEN"); !t.empty()) {
    c.token = std::string(absl::StripAsciiWhitespace(t));
  } else if (std::string f = Env("KEVO_TOKEN_FILE"); !f.empty()) {
    KEVO_ASSIGN_OR_RETURN(c.token, ReadSecretFile(f, "token file (KEVO_TOKEN_FILE)"));
  } else {
    std::string config = Env("XDG_CONFIG_HOME");
    if (config.empty() && !Env("HOME").empty()) config = Env("HOME") + "/.config";
    const std::string fallback = config.empty() ? "" : config + "/kevo/token";
    std::error_code ec;
    if (!fallback.empty() && std::filesystem::exists(fallback, ec)) {
      KEVO_ASSIGN_OR_RETURN(c.token, ReadSecretFile(fallback, "token file"));
    }
  }
  const std::string ca = tls_ca_file.empty() ? Env("KEVO_TLS_CA") : tls_ca_file;
  if (!ca.empty()) {
    KEVO_ASSIGN_OR_RETURN(c.tls_ca_pem, ReadSecretFile(ca, "TLS CA file"));
  }
  c.tls_server_name = Env("KEVO_TLS_SERVER_NAME");
  return c;
}

std::shared_ptr<grpc::Channel> ClientChannel(const std::string& address, const ClientCredentials& credentials,
                                             const grpc::ChannelArguments& args) {
  std::shared_ptr<grpc::ChannelCredentials> channel_credentials;
  grpc::ChannelArguments channel_args = args;
  if (credentials.tls_ca_pem.empty()) {
    channel_credentials = grpc::InsecureChannelCredentials();
  } else {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = credentials.tls_ca_pem;
    channel_credentials = grpc::SslCredentials(ssl);
    if (!credentials.tls_server_name.empty()) {
      channel_args.SetSslTargetNameOverride(credentials.tls_server_name);
    }
  }
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> interceptors;
  if (!credentials.token.empty()) {
    interceptors.push_back(std::make_unique<BearerInterceptorFactory>(credentials.token));
  }
  return grpc::experimental::CreateCustomChannelWithInterceptors(address, channel_credentials, channel_args,
                                                                 std::move(interceptors));
}

}  // namespace kevo::rpc
