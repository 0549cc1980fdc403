// kevo-worker: a worker daemon for one platform. Dials the coordinator,
// measures the host once, then evaluates candidates on --slots slots.
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"

#include "common/log.h"
#include "common/sandbox/sandbox.h"
#include "worker/backends/amd/hip_build.h"
#include "worker/backends/factory.h"
#include "worker/daemon/daemon.h"

namespace {

constexpr char kUsage[] =
    "usage: kevo-worker --coordinator HOST:PORT [--platform cpu|nvidia|amd|mtia-sim]\n"
    "                   [--slots N]\n"
    "                   [--work-dir DIR] [--metrics HOST:PORT] [--health-listen HOST:PORT] [--worker-id ID]\n"
    "                   [--compile-timeout S] [--run-timeout S] [--memory-limit-mb MB]\n"
    "                   [--profile-cap S] [--compiler CXX] [--sol-margin F] [--mtia-config 2i|1|300]\n"
    "                   [--offload-arch LIST]\n"
    "                   [--python PATH] [--torch-compile-timeout S] [--production on|off]\n"
    "                   [--token-file FILE] [--tls-ca PEM] [--bwrap PATH] [--allow-weaker-sandbox]\n"
    "       kevo-worker --sandbox-check [--bwrap PATH]   (exit 0: bubblewrap works here; 3: it does not)\n"
    "  --platform   cpu, nvidia (CUDA candidates on this host's GPUs, found with\n"
    "               kevo-runner-cuda probe), amd (HIP candidates compiled with hipcc;\n"
    "               static resource analysis, and on a ROCm GPU of a target validation\n"
    "               and timing by kevo-runner-hip, else compile-only: docs/amd.md) or mtia-sim\n"
    "  --offload-arch  amd targets, comma-separated: gfx90a, gfx940 (default both;\n"
    "               gfx940 stands in for gfx942, which Debian's LLVM 15 does not know)\n"
    "  --mtia-config  the chip mtia-sim simulates: 2i (MTIA 2i, default), 1 (MTIA 1)\n"
    "               or 300 (MTIA 300: public peaks, modelled PE figures)\n"
    "  --slots      evaluations run at once (default 1; timing is most stable with 1;\n"
    "               nvidia: default GPUs + 2, so candidates compile on the CPU while\n"
    "               each GPU times one candidate at a time)\n"
    "  --work-dir   per-candidate folders and the build cache (default /tmp/kevo-worker)\n"
    "  --compiler   cpu: the C++ compiler that builds candidates and the reference (default\n"
    "               g++; e.g. clang++); its --version line is in the worker's fingerprint\n"
    "  --python     the interpreter (with PyTorch) for KernelBench problems (cpu default\n"
    "               /usr/bin/python3; nvidia default: python3 on PATH, then /usr/bin/python3,\n"
    "               the first whose torch sees the GPU)\n"
    "  --torch-compile-timeout  cap on torch.compile's compile + warm-up for the\n"
    "               KernelBench baseline (default 120; past it the baseline is dropped)\n"
    "  --sol-margin how far beyond its measured limits (bandwidth, peak FLOP/s) a result may\n"
    "               be, as a fraction, before it is timed again in a fresh process and, if it\n"
    "               still is, rejected as SUSPICIOUS (default 0.5: 150% of the roofline)\n"
    "  --production  time each task's production baseline (PyTorch eager and compiled,\n"
    "               OpenBLAS/cuBLAS; docs/task-format.md) beside every candidate that passed\n"
    "               its profile (default on; off: speedups over the naive reference only)\n"
    "  --token-file the worker token (kevo admin worker-token create) for a coordinator run\n"
    "               with --auth (default: $KEVO_TOKEN, then $KEVO_TOKEN_FILE)\n"
    "  --tls-ca     the CA that signed the coordinator's certificate (default $KEVO_TLS_CA)\n"
    "  --health-listen  serve grpc.health.v1.Health there: SERVING while connected to the\n"
    "               coordinator (a readiness probe; prints \"health PORT\")\n"
    "  --bwrap      the bubblewrap binary (default /usr/bin/bwrap): candidates run in its\n"
    "               mount, pid and network namespaces, under seccomp and rlimits\n"
    "  --allow-weaker-sandbox  start even where bubblewrap cannot start a container (not\n"
    "               installed, or no user namespaces), with seccomp and rlimits only\n"
    "               (also KEVO_ALLOW_WEAKER_SANDBOX=1); without it such a worker refuses\n"
    "               to start (docs/security.md)\n";

kevo::worker::Daemon* g_daemon = nullptr;

int Usage(const std::string& why) {
  std::fprintf(stderr, "kevo-worker: %s\n%s", why.c_str(), kUsage);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  kevo::SetLogComponent("worker");
  kevo::worker::DaemonOptions options;
  kevo::worker::BackendOptions backend_options;
  std::string platform = "cpu";
  bool slots_given = false;
  std::string token_file, tls_ca;
  std::string bwrap_path = "/usr/bin/bwrap";
  const char* allow_env = std::getenv("KEVO_ALLOW_WEAKER_SANDBOX");
  bool allow_weaker = allow_env != nullptr && std::string(allow_env) == "1";
  bool sandbox_check = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (arg == "--allow-weaker-sandbox") {
      allow_weaker = true;
      continue;
    }
    if (arg == "--sandbox-check") {
      sandbox_check = true;
      continue;
    }
    if (i + 1 >= argc) return Usage(arg + " needs a value");
    std::string value = argv[++i];
    double number = 0;
    bool numeric = absl::SimpleAtod(value, &number);
    if (arg == "--coordinator")
      options.coordinator = value;
    else if (arg == "--platform")
      platform = value;
    else if (arg == "--worker-id")
      options.worker_id = value;
    else if (arg == "--metrics")
      options.metrics_listen = value;
    else if (arg == "--health-listen")
      options.health_listen = value;
    else if (arg == "--work-dir")
      backend_options.work_dir = value;
    else if (arg == "--slots" && numeric && number >= 1) {
      options.slots = static_cast<int>(number);
      slots_given = true;
    } else if (arg == "--compile-timeout" && numeric && number > 0)
      backend_options.compile_timeout = absl::Seconds(number);
    else if (arg == "--run-timeout" && numeric && number > 0)
      backend_options.run_timeout = absl::Seconds(number);
    else if (arg == "--mtia-config" && (value == "2i" || value == "1" || value == "300"))
      backend_options.mtia_chip = value;
    else if (arg == "--offload-arch") {
      auto targets = kevo::worker::ParseAmdTargets(value);
      if (!targets.ok()) return Usage(std::string(targets.status().message()));
      backend_options.amd_targets = *targets;
    } else if (arg == "--memory-limit-mb" && numeric && number > 0)
      backend_options.memory_limit_bytes = static_cast<int64_t>(number) << 20;
    else if (arg == "--profile-cap" && numeric && number > 0)
      backend_options.profile_time_cap_s = number;
    else if (arg == "--compiler" && !value.empty())
      backend_options.compiler = value;
    else if (arg == "--sol-margin" && numeric && number >= 0)
      backend_options.speed_of_light_margin = number;
    else if (arg == "--python")
      backend_options.python = value;
    else if (arg == "--torch-compile-timeout" && numeric && number > 0)
      backend_options.torch_compile_timeout = absl::Seconds(number);
    else if (arg == "--production" && (value == "on" || value == "off"))
      backend_options.time_production = value == "on";
    else if (arg == "--token-file")
      token_file = value;
    else if (arg == "--tls-ca")
      tls_ca = value;
    else if (arg == "--bwrap")
      bwrap_path = value;
    else
      return Usage("bad flag or value: " + arg + " " + value);
  }
  if (sandbox_check) {
    // What the sandbox can be here, for scripts: 0 with bubblewrap, 3 without.
    const bool works = kevo::sandbox::BwrapWorks(bwrap_path);
    std::printf("sandbox: %s\n",
                works ? "bwrap+seccomp+rlimits"
                      : ("seccomp+rlimits (bubblewrap, " + bwrap_path + ", cannot start a container here)").c_str());
    return works ? 0 : 3;
  }
  if (options.coordinator.empty()) return Usage("--coordinator is required");
  const std::vector<std::string>& platforms = kevo::worker::BackendPlatforms();
  if (std::find(platforms.begin(), platforms.end(), platform) == platforms.end()) {
    return Usage("unknown --platform '" + platform + "' (this build has " + absl::StrJoin(platforms, ", ") + ")");
  }
  {
    auto credentials = kevo::rpc::CredentialsFromEnvironment(token_file, tls_ca);
    if (!credentials.ok()) return Usage(std::string(credentials.status().message()));
    options.credentials = *std::move(credentials);
  }

  // The sandbox's layers, said once: without bubblewrap a candidate shares the
  // host's filesystem, processes and network, held back by seccomp and
  // rlimits alone, and that takes the operator's say-so.
  using Bwrap = kevo::sandbox::SandboxOptions::Bwrap;
  const bool bwrap_works = kevo::sandbox::BwrapWorks(bwrap_path);
  if (!bwrap_works && !allow_weaker) {
    std::fprintf(stderr,
                 "kevo-worker: bubblewrap (%s) cannot start a container on this host (not installed, or no "
                 "user namespaces): candidates would run without their mount, pid and network namespaces, "
                 "under seccomp and rlimits only. Install bubblewrap or allow user namespaces, or pass "
                 "--allow-weaker-sandbox (KEVO_ALLOW_WEAKER_SANDBOX=1) to run that way\n",
                 bwrap_path.c_str());
    return 1;
  }
  if (!bwrap_works) {
    kevo::LogWarning("sandbox: bubblewrap (", bwrap_path, ") does not work here; candidates run under ",
                     "seccomp and rlimits only (--allow-weaker-sandbox)");
  }
  backend_options.use_bwrap = bwrap_works ? Bwrap::kAlways : Bwrap::kNever;
  backend_options.bwrap_path = bwrap_path;

  auto backend = kevo::worker::CreateBackend(platform, backend_options);
  if (!backend.ok()) {
    // e.g. "no NVIDIA GPU found (kevo-runner-cuda probe: ...)" on a host without one.
    std::fprintf(stderr, "kevo-worker: %s\n", std::string(backend.status().message()).c_str());
    return 1;
  }
  if (!slots_given) options.slots = kevo::worker::DefaultSlots(platform, **backend);

  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  kevo::worker::Daemon daemon(options, *std::move(backend));
  g_daemon = &daemon;
  std::thread([set] {
    int sig = 0;
    sigwait(&set, &sig);
    kevo::LogInfo("signal ", sig, ": stopping");
    g_daemon->Stop();
  }).detach();
  absl::Status s = daemon.Run();
  if (!s.ok()) {
    std::fprintf(stderr, "kevo-worker: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
