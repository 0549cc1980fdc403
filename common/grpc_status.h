// Converts between absl::Status and grpc::Status at the RPC edge, once.
// Header-only; users link gRPC.
#pragma once

#include <string>

#include "absl/status/status.h"
#include <grpcpp/support/status.h>

namespace kevo {

inline grpc::Status ToGrpcStatus(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

inline absl::Status FromGrpcStatus(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

}  // namespace kevo
