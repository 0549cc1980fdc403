// kevo-coordinator: the only stateful kevo process. Serves WorkerService and
// JobService on --listen, /metrics on --metrics, state in RocksDB at --db.
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/synchronization/mutex.h"

#include "common/log.h"
#include "coordinator/server/coordinator.h"

namespace {

constexpr char kUsage[] =
    "usage: kevo-coordinator --db DIR [--listen HOST:PORT] [--metrics HOST:PORT]\n"
    "                        [--lease-seconds N] [--llm-config FILE] [--kb DIR]\n"
    "                        [--auth [--admin-token-file FILE]] [--tls-cert PEM --tls-key PEM]\n"
    "                        [--insecure-plaintext] [--lease-progress-seconds N]\n"
    "                        [--queue-timeout-seconds N] [--max-tensor-bytes N]\n"
    "                        [--max-binding-bytes N] [--health-listen HOST:PORT]\n"
    "                        [--db-reserve-mb N] [--fault-db-write-delay-ms N]\n"
    "  --listen   gRPC address for workers and clients (default 127.0.0.1:50051;\n"
    "             port 0 picks a free one, printed on stdout as 'listening HOST:PORT')\n"
    "  --db       RocksDB folder; created if missing; data survives restarts\n"
    "  --db-reserve-mb N  writes are refused (UNAVAILABLE, nothing written) while the disk\n"
    "             holding --db has less than N MiB free, and resume when it has more\n"
    "             (default 64, at least 8; docs/reliability.md, \"A full disk\")\n"
    "  --metrics  Prometheus /metrics address (default: off)\n"
    "  --llm-config FILE  LLM endpoints for the llm and llm+builtin proposers (docs/llm.md)\n"
    "  --kb       knowledge-base folder imported at start (default: the project's docs/kb)\n"
    "  --auth     every call needs a bearer token: teams', workers' and the admin's\n"
    "             (docs/security.md); the admin token is read from --admin-token-file\n"
    "             (default DB/admin.token), created there (mode 0600) when missing\n"
    "  --tls-cert, --tls-key  serve gRPC over TLS with this certificate chain and key\n"
    "  --insecure-plaintext   allow plaintext gRPC on an address other than loopback\n"
    "  --lease-progress-seconds N  a lease whose worker reports no stage of the evaluation\n"
    "             for N seconds lapses even while it heartbeats (default 1200; 0: never)\n"
    "  --queue-timeout-seconds N  an evaluation queued N seconds with no worker of its\n"
    "             platform connected ends as INFRA_ERROR saying so (default 1800; 0: never)\n"
    "  --max-tensor-bytes N, --max-binding-bytes N  the largest tensor, and the most bytes\n"
    "             of one binding's tensors together, that a task received by EvaluateCandidate,\n"
    "             SubmitJob or SubmitCampaign may ask for; larger is INVALID_ARGUMENT\n"
    "             (defaults 8 GiB and 16 GiB; docs/task-format.md, \"Size limits\")\n"
    "  --health-listen  also serve grpc.health.v1.Health on this plaintext address, for\n"
    "             probes that speak neither TLS nor tokens (the gRPC port serves it too)\n"
    "  --fault-db-write-delay-ms N  fault injection, for tests: every database write and sync\n"
    "             waits N ms first (a slow disk; docs/reliability.md)\n";

kevo::coordinator::Coordinator* g_coordinator = nullptr;

}  // namespace

int main(int argc, char** argv) {
  kevo::SetLogComponent("coordinator");
  // Debian's Abseil is built with absl::Mutex's lock-order (deadlock)
  // detection on, which records every acquisition in a graph: a few percent
  // of the coordinator's CPU under load (docs/benchmarks.md, "Control
  // plane"). The tests, which link the same libraries, keep it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  kevo::coordinator::CoordinatorOptions options;
  options.listen = "127.0.0.1:50051";
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](const char* name) -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "kevo-coordinator: %s needs a value\n%s", name, kUsage);
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--listen")
      options.listen = value("--listen");
    else if (arg == "--db")
      options.db_dir = value("--db");
    else if (arg == "--db-reserve-mb") {
      const std::string v = value("--db-reserve-mb");
      int64_t mb = 0;
      // Below that a full disk can reach RocksDB mid-write, and Debian's
      // RocksDB 7.8 (built with assertions) aborts on a failed WAL append.
      if (!absl::SimpleAtoi(v, &mb) || mb < 8) {
        std::fprintf(stderr,
                     "kevo-coordinator: --db-reserve-mb needs a number of MiB >= 8, not '%s': with less, a "
                     "full disk reaches RocksDB in the middle of a write, which aborts the coordinator\n%s",
                     v.c_str(), kUsage);
        return 2;
      }
      options.store.reserve_bytes = mb << 20;
    } else if (arg == "--fault-db-write-delay-ms") {
      const std::string v = value("--fault-db-write-delay-ms");
      int64_t ms = 0;
      if (!absl::SimpleAtoi(v, &ms) || ms < 0) {
        std::fprintf(stderr, "kevo-coordinator: --fault-db-write-delay-ms needs a number of ms >= 0, not '%s'\n%s",
                     v.c_str(), kUsage);
        return 2;
      }
      options.store.write_delay = absl::Milliseconds(ms);
    } else if (arg == "--metrics")
      options.metrics_listen = value("--metrics");
    else if (arg == "--llm-config")
      options.llm_config = value("--llm-config");
    else if (arg == "--kb")
      options.kb_dir = value("--kb");
    else if (arg == "--auth")
      options.auth = true;
    else if (arg == "--admin-token-file")
      options.admin_token_file = value("--admin-token-file");
    else if (arg == "--tls-cert")
      options.tls_cert = value("--tls-cert");
    else if (arg == "--tls-key")
      options.tls_key = value("--tls-key");
    else if (arg == "--insecure-plaintext")
      options.insecure_plaintext = true;
    else if (arg == "--health-listen")
      options.health_listen = value("--health-listen");
    else if (arg == "--lease-seconds")
      options.scheduler.lease = absl::Seconds(std::stoi(value("--lease-seconds")));
    else if (arg == "--queue-timeout-seconds") {
      options.scheduler.queue_timeout = absl::Seconds(std::stoi(value("--queue-timeout-seconds")));
    } else if (arg == "--lease-progress-seconds") {
      options.scheduler.max_silence = absl::Seconds(std::stoi(value("--lease-progress-seconds")));
    } else if (arg == "--max-tensor-bytes" || arg == "--max-binding-bytes") {
      const std::string v = value(arg.c_str());
      int64_t bytes = 0;
      if (!absl::SimpleAtoi(v, &bytes) || bytes <= 0) {
        std::fprintf(stderr, "kevo-coordinator: %s needs a positive number of bytes, not '%s'\n%s", arg.c_str(),
                     v.c_str(), kUsage);
        return 2;
      }
      (arg == "--max-tensor-bytes" ? options.task_limits.max_tensor_bytes : options.task_limits.max_binding_bytes) =
          bytes;
    } else if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else {
      std::fprintf(stderr, "kevo-coordinator: unknown flag %s\n%s", arg.c_str(), kUsage);
      return 2;
    }
  }
  if (options.db_dir.empty()) {
    std::fprintf(stderr, "kevo-coordinator: --db is required\n%s", kUsage);
    return 2;
  }
  // Block SIGINT/SIGTERM before any thread starts; one thread waits for them
  // and shuts down cleanly.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  auto coordinator = kevo::coordinator::Coordinator::Start(options);
  if (!coordinator.ok()) {
    std::fprintf(stderr, "kevo-coordinator: %s\n", coordinator.status().ToString().c_str());
    return 1;
  }
  g_coordinator = coordinator->get();
  std::printf("listening %s\n", (*coordinator)->address().c_str());
  if ((*coordinator)->metrics_port() != 0) {
    std::printf("metrics %d\n", (*coordinator)->metrics_port());
  }
  std::fflush(stdout);
  std::thread([set] {
    int sig = 0;
    sigwait(&set, &sig);
    kevo::LogInfo("signal ", sig, ": shutting down");
    g_coordinator->Shutdown();
  }).detach();
  (*coordinator)->Wait();
  return 0;
}
