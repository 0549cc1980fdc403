// Channels to the coordinator, for the CLI, workers and tests: TLS when a CA
// is given, and every call carrying `authorization: Bearer <token>` when a
// token is (docs/security.md).
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include <grpcpp/grpcpp.h>

namespace kevo::rpc {

struct ClientCredentials {
  std::string token;            // empty: calls carry no authorization
  std::string tls_ca_pem;       // empty: plaintext
  std::string tls_server_name;  // overrides the name checked in the certificate
};

// The token from $KEVO_TOKEN, else from the file $KEVO_TOKEN_FILE names, else
// from $XDG_CONFIG_HOME/kevo/token (~/.config/kevo/token) when that exists;
// the CA from the file $KEVO_TLS_CA names ($KEVO_TLS_SERVER_NAME overrides the
// host checked). `token_file` and `tls_ca_file`, when set (a daemon's flags),
// take the place of the environment's. InvalidArgument for a file that cannot
// be read or is empty.
absl::StatusOr<ClientCredentials> CredentialsFromEnvironment(const std::string& token_file = "",
                                                             const std::string& tls_ca_file = "");

// A channel to `address` with `credentials`.
std::shared_ptr<grpc::Channel> ClientChannel(const std::string& address, const ClientCredentials& credentials,
                                             const grpc::ChannelArguments& args = {});

// The contents of `path` with surrounding whitespace removed; InvalidArgument
// naming `what` when it cannot be read or is empty.
absl::StatusOr<std::string> ReadSecretFile(const std::string& path, const std::string& what);

}  // namespace kevo::rpc
