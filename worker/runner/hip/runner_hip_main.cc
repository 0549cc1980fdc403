// kevo-runner-hip: the GPU runner of the amd platform. Its modes (probe,
// health, run, profile), buffers, guards, timing (hipEvent around each call,
// the cache flushed before each sample, the whole device synchronised after
// it) and fault handling (a HIP error after candidate code ends the runner;
// the worker checks the GPU's health in a fresh one) are the shared core's
// (worker/runner/device/device_runner.h), the same code kevo-runner-cuda
// runs. This file is what is HIP's own: the runtime calls (runtime_shim.h,
// Debian's libamdhip64), the properties the probe reports, and the runner's
// kernels (device_kernels.hip, built by hipcc for gfx90a and gfx940).
//
// It has never run on AMD hardware here: no AMD GPU is available to this
// project (docs/amd.md). Without one it ends at once with kExitInfra and
// "error HIP ...: hipErrorNoDevice: ..." (probe: "hipGetDeviceCount: ...").
#include <unistd.h>

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include <hip/hip_runtime_api.h>
#include <nlohmann/json.hpp>

#include "worker/runner/device/device_runner.h"
#include "worker/runner/device/runtime_shim.h"
#include "worker/runner/hip/device_kernels.h"
#include "worker/runner/protocol.h"

namespace kevo::runner {
namespace {

// MI300 (gfx94x) puts a 256 MiB Infinity Cache (MALL) behind its L2, which
// HIP 5.2 reports nowhere: the flush must evict it too.
constexpr int64_t kMi300InfinityCacheBytes = int64_t{256} << 20;

std::string ArchName(int device) {
  hipDeviceProp_t p{};
  if (hipGetDeviceProperties(&p, device) != hipSuccess) return "";
  return p.gcnArchName;
}

class HipRuntime final : public device::Runtime {
 public:
  KEVO_DEVICE_RUNTIME_CALLS(hip)
  const char* RunnerName() const override { return "kevo-runner-hip"; }
  const char* Name() const override { return "HIP"; }
  const char* ApiPrefix() const override { return "hip"; }
  // The last-level cache the flush must evict: L2, plus MI300's Infinity
  // Cache.
  Error L2Bytes(int* bytes) override {
    int dev = 0, l2 = 0;
    hipError_t e = hipGetDevice(&dev);
    if (e == hipSuccess) e = hipDeviceGetAttribute(&l2, hipDeviceAttributeL2CacheSize, dev);
    if (e != hipSuccess) return e;
    int64_t total = l2;
    if (absl::StartsWith(ArchName(dev), "gfx94")) total += kMi300InfinityCacheBytes;
    *bytes = static_cast<int>(total);
    return hipSuccess;
  }
  Error DescribeDevice(int d, nlohmann::json* dev) override {
    hipDeviceProp_t p{};
    if (const hipError_t e = hipGetDeviceProperties(&p, d); e != hipSuccess) return e;
    device::DescribeCommonProperties(p, dev);
    // "gfx90a:sramecc+:xnack-": the target, then its features.
    (*dev)["arch"] = p.gcnArchName;
    (*dev)["warp_size"] = p.warpSize;
    (*dev)["lds_per_block_bytes"] = p.sharedMemPerBlock;
    (*dev)["lds_per_cu_bytes"] = p.maxSharedMemoryPerMultiProcessor;
    (*dev)["sm_clock_khz"] = p.clockRate;
    (*dev)["memory_clock_khz"] = p.memoryClockRate;
    (*dev)["memory_bus_bits"] = p.memoryBusWidth;
    return hipSuccess;
  }
};

}  // namespace
}  // namespace kevo::runner

// See runtime_shim.h: work candidates leave on non-blocking streams is caught.
KEVO_DEVICE_STREAM_INTERPOSERS(hip)

int main(int argc, char** argv) {
  kevo::runner::HipRuntime rt;
  int code = kevo::runner::device::RunnerMain(rt, argc, argv);
  // Skip static destructors and atexit handlers (the candidate's, the HIP
  // runtime's teardown): results are already written.
  _exit(code);
}
