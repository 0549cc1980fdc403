// vector_add, wrong: every thread of the last block writes, also the 64
// threads past the end of z (an off-by-a-block bound). kevo surrounds every
// device buffer with guard bytes and checks them after each call:
// RUNTIME_ERROR "wrote past the end of tensor 'z'".
#include <cuda_runtime.h>

#include <cstdint>

namespace {

__global__ void Add(const float* x, const float* y, float* z, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n + 64) z[i] = i < n ? x[i] + y[i] : 0.0f;
}

}  // namespace

extern "C" void vector_add(const float* x, const float* y, float* z, int64_t n) {
  Add<<<static_cast<unsigned>((n + 64 + 255) / 256), 256>>>(x, y, z, n);
}
