// tries: silently lowers precision: rounds x and y to IEEE half on the GPU and adds in half
// expect: WRONG_ANSWER
// message: z[
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace {
__global__ void AddHalf(const float* x, const float* y, float* z, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    z[i] = __half2float(__hadd(__float2half(x[i]), __float2half(y[i])));
  }
}
}  // namespace

extern "C" void vector_add(const float* x, const float* y, float* z, int64_t n) {
  if (n > 0) AddHalf<<<static_cast<unsigned>((n + 255) / 256 < 4096 ? (n + 255) / 256 : 4096), 256>>>(x, y, z, n);
}
