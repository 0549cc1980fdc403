// Measures a CPU worker's ceilings for the roofline: memory bandwidth as the
// best of a STREAM triad, the triad with streaming stores and a read-only sum
// on all cores and on one, and FP32 peak with independent vector FMA chains on all
// cores. The benchmark is compiled with the candidates' flags (g++ -O3
// -march=native -fopenmp) and run in the sandbox; it takes about a second
// (half that for the bandwidth alone). The worker measures everything at
// start-up and the bandwidth again right after timing each candidate, under
// the load the candidate was timed in.
//
// Thread-safe.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/sandbox/sandbox.h"
#include "worker/backends/cpu/kernel_builder.h"

namespace kevo::worker {

struct Ceilings {
  double mem_bandwidth_gbs = 0;  // 1e9 bytes/s
  double fp32_peak_gflops = 0;  // 0 when only the bandwidth was measured
};

enum class CeilingProbe { kAll, kBandwidth };

// Returns Internal when the benchmark cannot be compiled or run, DataLoss
// when its output does not parse.
// `visible_paths` are the read-only system folders the benchmark may see
// (the folder of the compiled benchmark is added).
absl::StatusOr<Ceilings> MeasureCeilings(const KernelBuilder& builder,
                                         const sandbox::Sandbox& sandbox,
                                         const std::string& scratch_dir,
                                         std::vector<std::string> visible_paths,
                                         CeilingProbe probe = CeilingProbe::kAll);

}  // namespace kevo::worker
