// CUDA reference for gelu_erf (exact GELU): the baseline the nvidia platform times
// candidates against (correctness is still defined by reference.cc). The
// plain port of the C++ reference: one thread per element, scalar loads.
#include <cuda_runtime.h>

#include <cstdint>

namespace {

__global__ void Gelu(const float* x, float* y, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float v = x[i];
  y[i] = 0.5f * v * (1.0f + erff(v * 0.70710678f));
}

}  // namespace

extern "C" void gelu_erf(const float* x, float* y, int64_t n) {
  if (n <= 0) return;
  Gelu<<<static_cast<unsigned>((n + 255) / 256), 256>>>(x, y, n);
}
