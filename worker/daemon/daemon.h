// The worker daemon: dials the coordinator (so it works behind NAT), says
// Hello, then runs assignments on its slots through a platform Backend and
// streams stage events, results and heartbeats back. Reconnects with backoff
// when the coordinator goes away; evaluations in flight then are abandoned
// (their leases lapse and the coordinator re-queues them).
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"

#include "common/rpc/client_channel.h"
#include "worker/backend.h"

namespace kevo::worker {

struct DaemonOptions {
  std::string coordinator;  // host:port
  int slots = 1;
  std::string worker_id;       // empty: the coordinator assigns one
  std::string metrics_listen;  // empty: no /metrics
  // host:port for grpc.health.v1.Health (empty: none): SERVING while the
  // worker holds a stream to the coordinator, NOT_SERVING otherwise.
  std::string health_listen;
  absl::Duration max_backoff = absl::Seconds(5);
  // The worker token and TLS CA (--token-file, --tls-ca; docs/security.md).
  rpc::ClientCredentials credentials;
};

class Daemon {
 public:
  Daemon(DaemonOptions options, std::unique_ptr<Backend> backend);
  ~Daemon();

  // Describes the host (once), then serves until Stop(). Returns an error
  // when the backend cannot describe the host, options are invalid, or the
  // coordinator refuses the worker's credentials (Unauthenticated,
  // PermissionDenied: retrying would not help).
  absl::Status Run();
  // Makes Run() return. Thread-safe; callable from a signal-waiting thread.
  void Stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kevo::worker
