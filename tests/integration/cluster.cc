#include "tests/integration/cluster.h"

#include <signal.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include <grpcpp/grpcpp.h>

#include "common/rpc/client_channel.h"
#include "common/status.h"

namespace kevo::testing {

absl::Status Cluster::StartCoordinator(const std::vector<std::string>& extra_flags) {
  std::vector<std::string> argv = {BinDir() + "/kevo-coordinator", "--listen",
                                   address_.empty() ? listen_host_ + ":0" : address_, "--db", dir_ + "/db"};
  for (const auto& f : extra_flags) argv.push_back(f);
  KEVO_ASSIGN_OR_RETURN(coordinator_, ChildProcess::Start(argv, dir_ + "/coordinator.log"));
  KEVO_ASSIGN_OR_RETURN(address_, coordinator_->WaitForLine("listening ", absl::Seconds(30)));
  UseCredentials(token_, tls_ca_pem_);
  return absl::OkStatus();
}

absl::StatusOr<v1::Job> Cluster::GetJob(const std::string& job_id) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::GetJobRequest req;
  req.set_job_id(job_id);
  v1::Job job;
  grpc::Status st = stub_->GetJob(&ctx, req, &job);
  if (!st.ok()) return absl::UnavailableError(st.error_message());
  return job;
}

void Cluster::UseCredentials(const std::string& token, const std::string& tls_ca_pem) {
  token_ = token;
  tls_ca_pem_ = tls_ca_pem;
  rpc::ClientCredentials credentials;
  credentials.token = token;
  credentials.tls_ca_pem = tls_ca_pem;
  stub_ = v1::JobService::NewStub(rpc::ClientChannel(address_, credentials));
}

absl::Status Cluster::StartWorker(const std::string& id, const std::vector<std::string>& extra_flags,
                                  const std::vector<std::string>& launcher) {
  const std::vector<std::string> worker = {
      BinDir() + "/kevo-worker", "--coordinator", address_, "--worker-id", id, "--work-dir",
      dir_ + "/work-" + id,      "--profile-cap", "0.3"};
  std::vector<std::string> argv = launcher;
  argv.insert(argv.end(), worker.begin(), worker.end());
  argv.insert(argv.end(), extra_flags.begin(), extra_flags.end());
  KEVO_ASSIGN_OR_RETURN(auto child, ChildProcess::Start(argv, dir_ + "/worker-" + id + ".log"));
  workers_.emplace_back(id, std::move(child));
  return absl::OkStatus();
}

absl::Status Cluster::WaitForWorkers(int n, absl::Duration timeout) {
  absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::ListWorkersResponse resp;
    if (stub_->ListWorkers(&ctx, v1::ListWorkersRequest(), &resp).ok() && resp.workers_size() >= n) {
      return absl::OkStatus();
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
  return absl::DeadlineExceededError(absl::StrCat(n, " workers did not connect; logs in ", dir_));
}

ChildProcess* Cluster::worker(const std::string& id) {
  for (auto& [wid, p] : workers_) {
    if (wid == id) return p.get();
  }
  return nullptr;
}

void Cluster::StopCoordinator(int signal) {
  if (!coordinator_) return;
  coordinator_->Kill(signal);
  (void)coordinator_->Wait(absl::Seconds(20));
  coordinator_.reset();
}

}  // namespace kevo::testing
