#include "coordinator/proposer/builtin/hip_codegen.h"

namespace kevo::proposer {

const char kHipPrelude[] = R"(#include <hip/hip_runtime.h>

#include <cmath>
#include <cstdint>

constexpr int kWave = 64;  // CDNA wavefront
static __host__ __device__ inline int64_t kevo_min(int64_t a, int64_t b) { return a < b ? a : b; }
static __host__ __device__ inline int64_t kevo_max(int64_t a, int64_t b) { return a > b ? a : b; }
static __host__ __device__ inline int64_t kevo_ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
// Workgroups for a grid-stride launch: `per_cu` per compute unit of the current device.
static int kevo_grid_blocks(int per_cu) {
  static int cus = 0;
  if (cus == 0) {
    int dev = 0;
    if (hipGetDevice(&dev) != hipSuccess ||
        hipDeviceGetAttribute(&cus, hipDeviceAttributeMultiprocessorCount, dev) != hipSuccess || cus <= 0) {
      cus = 1;
    }
  }
  return cus * per_cu;
}
)";

v1::Candidate HipCandidate(std::string source) {
  v1::Candidate c;
  c.set_language("hip");
  c.set_source(std::move(source));
  return c;
}

}  // namespace kevo::proposer
