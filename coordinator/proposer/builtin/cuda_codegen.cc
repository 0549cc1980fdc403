#include "coordinator/proposer/builtin/cuda_codegen.h"

namespace kevo::proposer {

const char kCudaPrelude[] = R"(#include <cstdint>
#include <cuda_runtime.h>

static __host__ __device__ __forceinline__ int64_t kevo_min(int64_t a, int64_t b) { return a < b ? a : b; }
static __host__ __device__ __forceinline__ int64_t kevo_max(int64_t a, int64_t b) { return a > b ? a : b; }
static __host__ __device__ __forceinline__ int64_t kevo_ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
// Blocks for a grid-stride launch: `per_sm` per multiprocessor of the current device.
static int kevo_grid_blocks(int per_sm) {
  static int sms = 0;
  if (sms == 0) {
    int dev = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    if (sms <= 0) sms = 1;
  }
  return sms * per_sm;
}
)";

v1::Candidate CudaCandidate(std::string source) {
  v1::Candidate c;
  c.set_language("cuda");
  c.set_source(std::move(source));
  return c;
}

}  // namespace kevo::proposer
