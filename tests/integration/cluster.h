// Test fixture helpers: a real kevo-coordinator and kevo-worker processes on
// 127.0.0.1 with port 0, plus a JobService stub.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

#include "kevo/v1/job.grpc.pb.h"
#include "tests/testing/process.h"

namespace kevo::testing {

class Cluster {
 public:
  // The coordinator listens on `listen_host` (an address of this host).
  explicit Cluster(std::string dir, std::string listen_host = "127.0.0.1")
      : dir_(std::move(dir)), listen_host_(std::move(listen_host)) {}

  // Starts the coordinator over dir/db: on a fresh port the first time, on
  // the same port when restarted (so workers reconnect).
  absl::Status StartCoordinator(const std::vector<std::string>& extra_flags = {});
  // Starts a cpu worker with the given id; quick profiling for tests. With a
  // `launcher` (e.g. {"ip", "netns", "exec", "ns1"}) the worker is started
  // through it, which must exec it in place.
  absl::Status StartWorker(const std::string& id, const std::vector<std::string>& extra_flags = {},
                           const std::vector<std::string>& launcher = {});
  // Polls ListWorkers until `n` workers are connected or `timeout` passes.
  absl::Status WaitForWorkers(int n, absl::Duration timeout);

  ChildProcess* coordinator() { return coordinator_.get(); }
  ChildProcess* worker(const std::string& id);
  void StopCoordinator(int signal);
  const std::string& address() const { return address_; }
  const std::string& dir() const { return dir_; }
  v1::JobService::Stub* stub() { return stub_.get(); }
  // GetJob over stub() with a 5 s deadline; Unavailable with the gRPC
  // message when the call fails.
  absl::StatusOr<v1::Job> GetJob(const std::string& job_id);
  // Makes stub() (and WaitForWorkers) send `token` on every call, over TLS
  // when `tls_ca_pem` is set (a coordinator run with --auth / --tls-cert).
  void UseCredentials(const std::string& token, const std::string& tls_ca_pem = "");

 private:
  std::string dir_;
  std::string listen_host_;
  std::string address_;
  std::unique_ptr<ChildProcess> coordinator_;
  std::vector<std::pair<std::string, std::unique_ptr<ChildProcess>>> workers_;
  std::unique_ptr<v1::JobService::Stub> stub_;
  std::string token_, tls_ca_pem_;
};

}  // namespace kevo::testing
