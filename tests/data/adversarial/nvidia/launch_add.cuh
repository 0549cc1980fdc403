// The honest vector_add work that the nvidia candidates naming this file
// (`// with:`) do around their trick: pasted before the candidate's own
// source by adversarial_test, so each candidate is this plus its file.
#include <cuda_runtime.h>

#include <cstdint>

namespace {
__global__ void Add(const float* x, const float* y, float* z, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) z[i] = x[i] + y[i];
}
void Launch(const float* x, const float* y, float* z, int64_t n) {
  if (n > 0) Add<<<static_cast<unsigned>((n + 255) / 256 < 4096 ? (n + 255) / 256 : 4096), 256>>>(x, y, z, n);
}
}  // namespace
