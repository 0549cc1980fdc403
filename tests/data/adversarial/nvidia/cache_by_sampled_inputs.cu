// tries: caches one output in device memory keyed by 3 elements of x and y (first, middle, last, read back to the host) and copies it back on a match
// expect: WRONG_ANSWER
// message: a timed call disagreed with the baseline
// with: tests/data/adversarial/nvidia/launch_add.cuh
#include <cuda_runtime.h>
#include <cstdint>
#include <cstring>

namespace {
float* cached = nullptr;
int64_t cached_n = 0;
float cached_key[6];

void Key(const float* x, const float* y, int64_t n, float* key) {
  const int64_t at[3] = {0, n / 2, n - 1};
  for (int i = 0; i < 3; ++i) {
    cudaMemcpy(&key[i], x + at[i], 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(&key[3 + i], y + at[i], 4, cudaMemcpyDeviceToHost);
  }
}
}  // namespace

extern "C" void vector_add(const float* x, const float* y, float* z, int64_t n) {
  if (n <= 0) return;
  float key[6];
  Key(x, y, n, key);
  if (cached != nullptr && cached_n == n && memcmp(key, cached_key, sizeof key) == 0) {
    cudaMemcpy(z, cached, n * 4, cudaMemcpyDeviceToDevice);
    return;
  }
  Launch(x, y, z, n);
  if (cached_n != n) {
    cudaFree(cached);
    cached = nullptr;
    if (cudaMalloc(&cached, n * 4) != cudaSuccess) return;
    cached_n = n;
  }
  cudaMemcpy(cached, z, n * 4, cudaMemcpyDeviceToDevice);
  memcpy(cached_key, key, sizeof key);
}
