// The AMD platform of a kevo worker: HIP candidates compiled with Debian's
// hipcc for CDNA targets (gfx90a; gfx940 standing in for gfx942), with the
// static resource analysis of every kernel (worker/backends/amd/hip_build.h).
//
// At start-up the backend looks for ROCm GPUs: /dev/kfd, then the HIP runtime
// (libamdhip64, loaded with dlopen only when /dev/kfd exists) and its device
// count. Where it finds one, and kevo-runner-hip's probe (in the sandbox)
// lists a GPU whose architecture is one of the targets, it runs candidates
// there like the nvidia worker (worker/backends/gpu/gpu_stages.h: golden
// outputs on the CPU, validation, hipEvent timing with the caches flushed
// and the device synchronised, against the task's HIP reference or the C++
// reference on the CPU). That path is built and tested in CI only up to the
// runner's "no device" errors: it has never run on AMD hardware here.
//
// Everywhere else it registers as compile-only (Hello.compile_only, with the
// reason in capabilities["compile_only_reason"]): it compiles, reads each
// kernel's VGPRs, AGPRs, SGPRs, LDS, scratch and spills, derives occupancy,
// and returns status OK with Evaluation.compile_only set and a static score
// (hip_build.h StaticScore) instead of a time. Nothing is validated or timed,
// and the evaluation says so. docs/amd.md says what runs where.
//
//   compile   hipcc --offload-arch=<each target> (sandboxed, timeout,
//             content-addressed cache), symbol check of the host object, the
//             task's function defined, LDS within every target's limit
//   static    resource counters per target (profile map) and the score
//   GPU       (with a ROCm GPU) golden, validate, profile: gpu_stages.h
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "common/sandbox/sandbox.h"
#include "worker/backend.h"
#include "worker/pipeline/speed_of_light.h"

namespace kevo::worker {

struct AmdBackendOptions {
  // Build cache and scratch folders. Required.
  std::string work_dir;
  // Empty: hipcc on PATH (/usr/bin/hipcc on Debian).
  std::string hipcc;
  // Offload targets, each one of gfx90a, gfx940.
  std::vector<std::string> targets = {"gfx90a", "gfx940"};
  absl::Duration compile_timeout = absl::Seconds(180);
  int64_t memory_limit_bytes = int64_t{8} << 30;
  sandbox::SandboxOptions::Bwrap use_bwrap = sandbox::SandboxOptions::Bwrap::kAuto;
  std::string bwrap_path = "/usr/bin/bwrap";  // the bubblewrap binary
  // Tests: pretend the host has no GPU whatever it has.
  bool ignore_gpus = false;
  // The GPU path. Empty: kevo-runner-hip / kevo-runner-cpu next to
  // /proc/self/exe.
  std::string runner_path;
  std::string cpu_runner_path;
  // Compiles the C++ reference for the golden outputs.
  std::string host_compiler = "g++";
  absl::Duration run_timeout = absl::Seconds(60);
  double profile_time_cap_s = 3.0;
  // A result beyond the device's limits by more than this fraction is timed
  // again in a fresh runner and, if it still is, rejected as SUSPICIOUS
  // (worker/pipeline/speed_of_light.h).
  double speed_of_light_margin = kDefaultSpeedOfLightMargin;
};

// What the ROCm detection found.
struct RocmProbe {
  bool kfd = false;         // /dev/kfd exists
  bool runtime = false;     // libamdhip64 loaded and answered
  int gpus = 0;             // hipGetDeviceCount
  std::string description;  // one line for the log and the Hello
};
// Looks for ROCm GPUs (see the header comment). Never fails: what it could
// not find is in the description.
RocmProbe ProbeRocm();

// Creates the backend: checks the targets, finds hipcc and checks it runs,
// probes for GPUs. Returns InvalidArgument for unusable options (an unknown
// target) and FailedPrecondition when hipcc is missing or does not run.
absl::StatusOr<std::unique_ptr<Backend>> CreateAmdBackend(const AmdBackendOptions& options);

// The hipcc the backend would use for `configured`, or "" when none is found.
std::string FindHipcc(const std::string& configured);

}  // namespace kevo::worker
