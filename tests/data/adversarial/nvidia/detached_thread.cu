// tries: leaves the work running on a detached std::thread and returns at once
// expect: SANDBOX_VIOLATION
// message: _M_start_thread
#include <cuda_runtime.h>
#include <cstdint>
#include <thread>

__global__ void AddOnThread(const float* x, const float* y, float* z, int64_t n) {
  for (int64_t i = blockIdx.x * 256ll + threadIdx.x; i < n; i += 256ll * gridDim.x) z[i] = x[i] + y[i];
}

extern "C" void vector_add(const float* x, const float* y, float* z, int64_t n) {
  std::thread([=] {
    AddOnThread<<<1024, 256>>>(x, y, z, n);
    cudaDeviceSynchronize();
  }).detach();
}
