// tries: honest for its first 3 calls at a size, then copies back the last output it computed (kept in device memory) instead of reading x and y
// expect: WRONG_ANSWER
// with: tests/data/adversarial/nvidia/launch_add.cuh
#include <cuda_runtime.h>
#include <cstdint>

namespace {
float* last = nullptr;
int64_t last_n = 0;
int calls = 0;
}  // namespace

extern "C" void vector_add(const float* x, const float* y, float* z, int64_t n) {
  if (n <= 0) return;
  if (n != last_n) {
    cudaFree(last);
    last = nullptr;
    if (cudaMalloc(&last, n * 4) != cudaSuccess) return;
    last_n = n;
    calls = 0;
  }
  if (++calls > 3) {
    cudaMemcpy(z, last, n * 4, cudaMemcpyDeviceToDevice);
    return;
  }
  Launch(x, y, z, n);
  cudaMemcpy(last, z, n * 4, cudaMemcpyDeviceToDevice);
}
