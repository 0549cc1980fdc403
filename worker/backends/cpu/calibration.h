// Measures a CPU worker's ceilings for the roofline and the speed-of-light
// check: memory bandwidth as the best of a STREAM triad (counted with the
// reads its ordinary stores cause), the triad and a copy with streaming
// stores and a read-only sum, on all cores and on one; the FP32 peak as the
// best of independent FMA chains at each vector width the host has, on all
// cores and on one core times the cores; and, where the host has AVX512_BF16,
// the bf16 dot-product peak the same way. Each figure is meant as a limit no
// kernel can beat, so each is the best of several ways to reach it
// (calibration.cc says why each is there). The benchmark is compiled with the
// candidates' flags (g++ -O3 -march=native -fopenmp) and run in the sandbox;
// it takes under a second (less for the bandwidth alone). The worker
// measures everything at start-up and again after timing candidates, and
// keeps the highest figures it has seen (cpu_backend.cc).
//
// Thread-safe.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

#include "common/sandbox/sandbox.h"
#include "worker/pipeline/kernel_builder.h"

namespace kevo::worker {

struct Ceilings {
  double mem_bandwidth_gbs = 0;  // 1e9 bytes/s
  double fp32_peak_gflops = 0;   // 0 when only the bandwidth was measured
  double bf16_peak_gflops = 0;   // 0 without AVX512_BF16 or when not measured
  // For a roofline that knows a kernel's mix of reads and writes
  // (DeviceLimits): a read-only sum and a copy with streaming stores (its
  // bytes read and written both counted) over arrays too large for a cache,
  // memory's own rates, not limits (0 when not measured).
  double read_gbs = 0;
  double copy_gbs = 0;

  // The higher of each figure of this and `other`.
  void KeepHighest(const Ceilings& other);
};

enum class CeilingProbe { kAll, kBandwidth };

// Returns Internal when the benchmark cannot be compiled or run, DataLoss
// when its output does not parse.
// `visible_paths` are the read-only system folders the benchmark may see
// (the folder of the compiled benchmark is added).
absl::StatusOr<Ceilings> MeasureCeilings(const KernelBuilder& builder, const sandbox::Sandbox& sandbox,
                                         const std::string& scratch_dir, std::vector<std::string> visible_paths,
                                         CeilingProbe probe = CeilingProbe::kAll);

}  // namespace kevo::worker
