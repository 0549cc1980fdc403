// vector_add, cheat: remembers the pointers and length of its last call and,
// called again with the same ones, returns at once as if the result it wrote
// then were still there (the GPU analogue of handing back memory that already
// holds an answer; timing loops that reuse their buffers reward it). kevo
// re-poisons the outputs before every timed sample and checks some timed
// calls against the baseline: a checked call left NaN (WRONG_ANSWER naming
// the timed sample).
#include <cuda_runtime.h>

#include <cstdint>

namespace {

__global__ void Add(const float* x, const float* y, float* z, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    z[i] = x[i] + y[i];
  }
}

}  // namespace

extern "C" void vector_add(const float* x, const float* y, float* z, int64_t n) {
  static const void* last[3] = {nullptr, nullptr, nullptr};
  static int64_t last_n = -1;
  if (last[0] == x && last[1] == y && last[2] == z && last_n == n) return;
  last[0] = x;
  last[1] = y;
  last[2] = z;
  last_n = n;
  const int64_t blocks = (n + 255) / 256 < 4096 ? (n + 255) / 256 : 4096;
  if (n > 0) Add<<<static_cast<unsigned>(blocks), 256>>>(x, y, z, n);
}
