// Creates a worker's Backend for one platform from the options the worker's
// command line gives (worker/daemon/main.cc parses them; tests may fill them
// in directly). The one place that knows which platforms this build has and
// how the shared options map onto each platform's own options struct.
//
// Thread-compatible: call from one thread (main), before the daemon starts.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "common/sandbox/sandbox.h"
#include "worker/backend.h"
#include "worker/pipeline/speed_of_light.h"

namespace kevo::worker {

// What a worker's command line says about its backend. An unset optional
// leaves the platform's own default (e.g. the nvidia and amd compile timeout
// is 180 s, the cpu's 60 s).
struct BackendOptions {
  // Build cache, golden outputs and per-evaluation scratch folders.
  std::string work_dir = "/tmp/kevo-worker";
  std::optional<absl::Duration> compile_timeout;
  std::optional<absl::Duration> run_timeout;
  // Address-space limit of the runners and compilers (amd: at least 8 GiB).
  int64_t memory_limit_bytes = int64_t{8} << 30;
  // cpu, nvidia, amd: how long the profile stage samples at most.
  double profile_time_cap_s = 3.0;
  // cpu: the C++ compiler of candidates and the reference.
  std::string compiler = "g++";
  double speed_of_light_margin = kDefaultSpeedOfLightMargin;
  // cpu, nvidia: the interpreter with PyTorch for KernelBench problems and
  // production baselines.
  std::optional<std::string> python;
  // cpu, nvidia: cap on torch.compile's compile and warm-up.
  absl::Duration torch_compile_timeout = absl::Seconds(120);
  // cpu, nvidia: time the task's production baselines beside candidates.
  bool time_production = true;
  // mtia-sim: the simulated chip (2i, 1 or 300).
  std::string mtia_chip = "2i";
  // amd: offload targets (empty: the backend's default, gfx90a and gfx940).
  std::vector<std::string> amd_targets;
  sandbox::SandboxOptions::Bwrap use_bwrap = sandbox::SandboxOptions::Bwrap::kAuto;
  std::string bwrap_path = "/usr/bin/bwrap";
};

// The platforms this build can serve, in the order --help lists them.
const std::vector<std::string>& BackendPlatforms();

// Creates the backend of `platform` (one of BackendPlatforms()) with
// `options`. Returns InvalidArgument naming the platforms this build has for
// an unknown one; otherwise what the platform's Create...Backend returns
// (FailedPrecondition when its compiler, runner or device is missing, ...).
absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(const std::string& platform, const BackendOptions& options);

// How many evaluations a worker of `platform` runs at once when --slots is
// not given: 1 on cpu and mtia-sim (timing is most stable alone); on a GPU
// platform the GPUs + 2, so candidates compile on the CPU while each GPU
// times one; 2 on a compile-only amd worker (hipcc runs on the CPU).
int DefaultSlots(const std::string& platform, Backend& backend);

}  // namespace kevo::worker
