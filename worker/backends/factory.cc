#include "worker/backends/factory.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include "worker/backends/amd/amd_backend.h"
#include "worker/backends/cpu/cpu_backend.h"
#include "worker/backends/mtia_sim/mtia_backend.h"
#include "worker/backends/nvidia/nvidia_backend.h"

namespace kevo::worker {
namespace {

// The GPUs a GPU backend times on (its Hello's capabilities["gpus"]; 1 when
// it does not say).
int GpuCount(Backend& backend) {
  int gpus = 1;
  auto hello = backend.Describe();
  if (hello.ok() && hello->capabilities().contains("gpus")) {
    if (!absl::SimpleAtoi(hello->capabilities().at("gpus"), &gpus)) gpus = 1;
  }
  return gpus;
}

// The options every platform has, copied onto its own options struct; an
// unset timeout keeps the platform's default.
template <typename PlatformOptions>
PlatformOptions SharedOptions(const BackendOptions& o) {
  PlatformOptions p;
  p.work_dir = o.work_dir;
  if (o.compile_timeout) p.compile_timeout = *o.compile_timeout;
  if (o.run_timeout) p.run_timeout = *o.run_timeout;
  p.memory_limit_bytes = o.memory_limit_bytes;
  p.speed_of_light_margin = o.speed_of_light_margin;
  p.use_bwrap = o.use_bwrap;
  p.bwrap_path = o.bwrap_path;
  return p;
}

// And those of the platforms that time candidates against PyTorch (cpu,
// nvidia).
template <typename PlatformOptions>
PlatformOptions TimingOptions(const BackendOptions& o) {
  auto p = SharedOptions<PlatformOptions>(o);
  p.profile_time_cap_s = o.profile_time_cap_s;
  if (o.python) p.kernelbench_python = *o.python;
  p.torch_compile_timeout = o.torch_compile_timeout;
  p.time_production = o.time_production;
  return p;
}

absl::StatusOr<std::unique_ptr<Backend>> CreateCpu(const BackendOptions& o) {
  auto cpu = TimingOptions<CpuBackendOptions>(o);
  cpu.compiler = o.compiler;
  return CreateCpuBackend(cpu);
}

absl::StatusOr<std::unique_ptr<Backend>> CreateMtia(const BackendOptions& o) {
  auto mtia = SharedOptions<MtiaBackendOptions>(o);
  mtia.chip = o.mtia_chip;
  return CreateMtiaBackend(mtia);
}

absl::StatusOr<std::unique_ptr<Backend>> CreateNvidia(const BackendOptions& o) {
  return CreateNvidiaBackend(TimingOptions<NvidiaBackendOptions>(o));
}

absl::StatusOr<std::unique_ptr<Backend>> CreateAmd(const BackendOptions& o) {
  auto amd = SharedOptions<AmdBackendOptions>(o);
  if (!o.amd_targets.empty()) amd.targets = o.amd_targets;
  // Never below the amd backend's default of 8 GiB, as kevo-worker always
  // had it.
  amd.memory_limit_bytes = std::max<int64_t>(o.memory_limit_bytes, int64_t{8} << 30);
  amd.profile_time_cap_s = o.profile_time_cap_s;
  return CreateAmdBackend(amd);
}

}  // namespace

const std::vector<std::string>& BackendPlatforms() {
  static const auto* platforms = new std::vector<std::string>{"cpu", "nvidia", "amd", "mtia-sim"};
  return *platforms;
}

absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(const std::string& platform, const BackendOptions& options) {
  if (platform == "cpu") return CreateCpu(options);
  if (platform == "mtia-sim") return CreateMtia(options);
  if (platform == "nvidia") return CreateNvidia(options);
  if (platform == "amd") return CreateAmd(options);
  return absl::InvalidArgumentError(
      absl::StrCat("unknown platform '", platform, "' (this build has ", absl::StrJoin(BackendPlatforms(), ", "), ")"));
}

int DefaultSlots(const std::string& platform, Backend& backend) {
  if (platform == "nvidia") return GpuCount(backend) + 2;
  if (platform == "amd") {
    auto hello = backend.Describe();
    return hello.ok() && !hello->compile_only() ? GpuCount(backend) + 2 : 2;
  }
  return 1;
}

}  // namespace kevo::worker
