// A plaintext gRPC port that serves grpc.health.v1.Health only, for probes
// that cannot speak TLS or carry tokens (kubelet's grpc probes, load
// balancers): `kevo-coordinator --health-listen`, `kevo-worker --health-listen`.
// Every other method answers UNIMPLEMENTED.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include <grpcpp/grpcpp.h>

namespace kevo::rpc {

class HealthServer {
 public:
  // Listens on `listen` (host:port; port 0 picks one), NOT_SERVING until
  // SetServing(true). Unavailable when the port cannot be bound.
  static absl::StatusOr<std::unique_ptr<HealthServer>> Start(const std::string& listen);
  ~HealthServer();

  int port() const { return port_; }
  void SetServing(bool serving);

 private:
  HealthServer() = default;
  struct NoOtherMethods;
  std::unique_ptr<NoOtherMethods> no_other_methods_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace kevo::rpc
