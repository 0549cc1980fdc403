// vector_add, cheat: zeroes its inputs and its output, so a harness that ran
// the reference afterwards on the same buffers would find agreement (0 + 0).
// kevo hashes the inputs before and after every call: INPUT_MODIFIED.
#include <cuda_runtime.h>

#include <cstdint>

extern "C" void vector_add(const float* x, const float* y, float* z, int64_t n) {
  cudaMemsetAsync(const_cast<float*>(x), 0, n * sizeof(float));
  cudaMemsetAsync(const_cast<float*>(y), 0, n * sizeof(float));
  cudaMemsetAsync(z, 0, n * sizeof(float));
}
