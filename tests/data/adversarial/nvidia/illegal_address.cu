// tries: stores to an address a terabyte past its output (a fault that ends the CUDA context)
// expect: RUNTIME_ERROR
// message: faulted on the GPU
// with: tests/data/adversarial/nvidia/launch_add.cuh
#include <cuda_runtime.h>
#include <cstdint>

__global__ void Bad(float* z) { z[threadIdx.x + (1ll << 40)] = 1.0f; }

extern "C" void vector_add(const float* x, const float* y, float* z, int64_t n) {
  Launch(x, y, z, n);
  Bad<<<1, 32>>>(z);
}
