// tries: a kernel that never returns (spins on the GPU), after the honest work
// expect: RUN_TIMEOUT
// with: tests/data/adversarial/nvidia/launch_add.cuh
#include <cuda_runtime.h>
#include <cstdint>

__global__ void Spin(float* z, int64_t n) {
  while (n > 0) __nanosleep(1000);
}

extern "C" void vector_add(const float* x, const float* y, float* z, int64_t n) {
  Launch(x, y, z, n);
  Spin<<<1, 1>>>(z, n);
}
