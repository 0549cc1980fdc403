// kevo-coordinator as a library: RocksDB store, scheduler, and the gRPC
// services (WorkerService for workers, JobService for users) on one port,
// with Prometheus metrics on another. Used by the kevo-coordinator binary and
// by the CLI's embedded mode.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"

#include "common/task/task_loader.h"
#include "coordinator/scheduler/scheduler.h"

namespace kevo::coordinator {

struct CoordinatorOptions {
  std::string listen = "127.0.0.1:0";                             // host:port; port 0 picks a free one
  std::string db_dir;                                             // RocksDB folder (created if missing)
  store::StoreOptions store{.reserve_bytes = int64_t{64} << 20};  // --db-reserve-mb
  std::string metrics_listen;                                     // host:port for /metrics; empty = none
  // The LLM endpoints file (docs/llm.md) that enables the llm and
  // llm+builtin proposers; empty: builtin only.
  std::string llm_config;
  // Knowledge-base folder imported into the store at start (kb::ImportDirectory);
  // empty: kb::DefaultKbDir(), skipped with a warning when there is none.
  std::string kb_dir;
  scheduler::SchedulerOptions scheduler;
  // What a task received by EvaluateCandidate, SubmitJob or SubmitCampaign
  // may ask a worker to hold (docs/task-format.md, "Size limits"); a task
  // beyond them is INVALID_ARGUMENT before anything is queued.
  task::TaskLimits task_limits;
  // With `auth`, every call needs `authorization: Bearer <token>` (a team's,
  // a worker's or the admin's; docs/security.md). The admin token is read
  // from `admin_token_file` (default <db_dir>/admin.token), which is created
  // with a new token, mode 0600, when it does not exist.
  bool auth = false;
  std::string admin_token_file;
  // TLS on the gRPC port (PEM files); both or neither. Without them the port
  // is plaintext, which is refused on an address other than loopback unless
  // `insecure_plaintext`.
  std::string tls_cert;
  std::string tls_key;
  bool insecure_plaintext = false;
  // A plaintext port serving only grpc.health.v1.Health (rpc::HealthServer),
  // for kubelet probes when the gRPC port is TLS; empty: none.
  std::string health_listen;
};

// True for 127.0.0.0/8, ::1 and localhost (with or without a port).
bool IsLoopbackAddress(const std::string& listen);

class Coordinator {
 public:
  virtual ~Coordinator() = default;

  // Opens the store, recovers queued work, and starts serving. Returns
  // Unavailable if the port or the database is taken, InvalidArgument for
  // bad options.
  static absl::StatusOr<std::unique_ptr<Coordinator>> Start(const CoordinatorOptions& options);

  // "host:port" with the port actually bound.
  virtual std::string address() const = 0;
  virtual int metrics_port() const = 0;  // 0 when metrics are off
  virtual scheduler::Scheduler* scheduler() = 0;
  // Blocks until Shutdown() is called from another thread.
  virtual void Wait() = 0;
  // Stops serving (in-flight calls are cancelled) and closes the store.
  virtual void Shutdown() = 0;
};

}  // namespace kevo::coordinator
