// kevo-worker: a worker daemon for one platform. Dials the coordinator,
// measures the host once, then evaluates candidates on --slots slots.
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "absl/strings/numbers.h"
#include "common/log.h"
#include "common/sandbox/sandbox.h"
#include "worker/backends/amd/amd_backend.h"
#include "worker/backends/amd/hip_build.h"
#include "worker/backends/cpu/cpu_backend.h"
#include "worker/backends/mtia_sim/mtia_backend.h"
#include "worker/backends/nvidia/nvidia_backend.h"
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

// The GPUs a GPU backend times on (its Hello's capabilities["gpus"]; 1 when
// it does not say).
int GpuCount(kevo::worker::Backend& backend) {
  int gpus = 1;
  auto hello = backend.Describe();
  if (hello.ok() && hello->capabilities().contains("gpus")) {
    if (!absl::SimpleAtoi(hello->capabilities().at("gpus"), &gpus)) gpus = 1;
  }
  return gpus;
}

}  // namespace

int main(int argc, char** argv) {
  kevo::SetLogComponent("worker");
  kevo::worker::DaemonOptions options;
  kevo::worker::CpuBackendOptions cpu;
  cpu.work_dir = "/tmp/kevo-worker";
  std::string platform = "cpu";
  kevo::worker::MtiaBackendOptions mtia;
  kevo::worker::AmdBackendOptions amd;
  bool run_timeout_set = false;
  bool slots_given = false;
  bool compile_timeout_set = false;
  bool python_given = false;
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
    if (arg == "--coordinator") options.coordinator = value;
    else if (arg == "--platform") platform = value;
    else if (arg == "--worker-id") options.worker_id = value;
    else if (arg == "--metrics") options.metrics_listen = value;
    else if (arg == "--health-listen") options.health_listen = value;
    else if (arg == "--work-dir") cpu.work_dir = value;
    else if (arg == "--slots" && numeric && number >= 1) {
      options.slots = static_cast<int>(number);
      slots_given = true;
    }
    else if (arg == "--compile-timeout" && numeric && number > 0) {
      cpu.compile_timeout = absl::Seconds(number);
      compile_timeout_set = true;
    }
    else if (arg == "--run-timeout" && numeric && number > 0) {
      cpu.run_timeout = absl::Seconds(number);
      run_timeout_set = true;
    }
    else if (arg == "--mtia-config" && (value == "2i" || value == "1" || value == "300")) mtia.chip = value;
    else if (arg == "--offload-arch") {
      auto targets = kevo::worker::ParseAmdTargets(value);
      if (!targets.ok()) return Usage(std::string(targets.status().message()));
      amd.targets = *targets;
    }
    else if (arg == "--memory-limit-mb" && numeric && number > 0) cpu.memory_limit_bytes = static_cast<int64_t>(number) << 20;
    else if (arg == "--profile-cap" && numeric && number > 0) cpu.profile_time_cap_s = number;
    else if (arg == "--compiler" && !value.empty()) cpu.compiler = value;
    else if (arg == "--sol-margin" && numeric && number >= 0) cpu.speed_of_light_margin = number;
    else if (arg == "--python") {
      cpu.kernelbench_python = value;
      python_given = true;
    }
    else if (arg == "--torch-compile-timeout" && numeric && number > 0) cpu.torch_compile_timeout = absl::Seconds(number);
    else if (arg == "--production" && (value == "on" || value == "off")) cpu.time_production = value == "on";
    else if (arg == "--token-file") token_file = value;
    else if (arg == "--tls-ca") tls_ca = value;
    else if (arg == "--bwrap") bwrap_path = value;
    else return Usage("bad flag or value: " + arg + " " + value);
  }
  if (sandbox_check) {
    // What the sandbox can be here, for scripts: 0 with bubblewrap, 3 without.
    const bool works = kevo::sandbox::BwrapWorks(bwrap_path);
    std::printf("sandbox: %s\n", works ? "bwrap+seccomp+rlimits"
                                       : ("seccomp+rlimits (bubblewrap, " + bwrap_path +
                                          ", cannot start a container here)").c_str());
    return works ? 0 : 3;
  }
  if (options.coordinator.empty()) return Usage("--coordinator is required");
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
  const Bwrap use_bwrap = bwrap_works ? Bwrap::kAlways : Bwrap::kNever;
  cpu.use_bwrap = mtia.use_bwrap = amd.use_bwrap = use_bwrap;
  cpu.bwrap_path = mtia.bwrap_path = amd.bwrap_path = bwrap_path;

  std::unique_ptr<kevo::worker::Backend> backend;
  if (platform == "cpu") {
    auto b = kevo::worker::CreateCpuBackend(cpu);
    if (!b.ok()) {
      std::fprintf(stderr, "kevo-worker: %s\n", b.status().ToString().c_str());
      return 1;
    }
    backend = std::move(*b);
  } else if (platform == "mtia-sim") {
    mtia.work_dir = cpu.work_dir;
    mtia.compile_timeout = cpu.compile_timeout;
    if (run_timeout_set) mtia.run_timeout = cpu.run_timeout;
    mtia.memory_limit_bytes = cpu.memory_limit_bytes;
    mtia.speed_of_light_margin = cpu.speed_of_light_margin;
    auto b = kevo::worker::CreateMtiaBackend(mtia);
    if (!b.ok()) {
      std::fprintf(stderr, "kevo-worker: %s\n", b.status().ToString().c_str());
      return 1;
    }
    backend = std::move(*b);
  } else if (platform == "nvidia") {
    kevo::worker::NvidiaBackendOptions nv;
    nv.work_dir = cpu.work_dir;
    nv.use_bwrap = use_bwrap;
    nv.bwrap_path = bwrap_path;
    if (compile_timeout_set) nv.compile_timeout = cpu.compile_timeout;
    if (run_timeout_set) nv.run_timeout = cpu.run_timeout;
    nv.memory_limit_bytes = cpu.memory_limit_bytes;
    nv.profile_time_cap_s = cpu.profile_time_cap_s;
    nv.speed_of_light_margin = cpu.speed_of_light_margin;
    if (python_given) nv.kernelbench_python = cpu.kernelbench_python;
    nv.torch_compile_timeout = cpu.torch_compile_timeout;
    nv.time_production = cpu.time_production;
    auto b = kevo::worker::CreateNvidiaBackend(nv);
    if (!b.ok()) {
      // "no NVIDIA GPU found (kevo-runner-cuda probe: ...)" on a host without one.
      std::fprintf(stderr, "kevo-worker: %s\n", std::string(b.status().message()).c_str());
      return 1;
    }
    backend = std::move(*b);
    if (!slots_given) options.slots = GpuCount(*backend) + 2;
  } else if (platform == "amd") {
    amd.work_dir = cpu.work_dir;
    if (compile_timeout_set) amd.compile_timeout = cpu.compile_timeout;
    if (run_timeout_set) amd.run_timeout = cpu.run_timeout;
    amd.memory_limit_bytes = std::max<int64_t>(cpu.memory_limit_bytes, int64_t{8} << 30);
    amd.profile_time_cap_s = cpu.profile_time_cap_s;
    amd.speed_of_light_margin = cpu.speed_of_light_margin;
    auto b = kevo::worker::CreateAmdBackend(amd);
    if (!b.ok()) {
      std::fprintf(stderr, "kevo-worker: %s\n", std::string(b.status().message()).c_str());
      return 1;
    }
    backend = std::move(*b);
    // Compile-only: hipcc runs on the CPU, two at a time; with ROCm GPUs as
    // on nvidia.
    if (!slots_given) {
      auto hello = backend->Describe();
      options.slots = hello.ok() && !hello->compile_only() ? GpuCount(*backend) + 2 : 2;
    }
  } else {
    return Usage("unknown --platform '" + platform + "' (cpu, nvidia, amd, mtia-sim)");
  }

  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  kevo::worker::Daemon daemon(options, std::move(backend));
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
