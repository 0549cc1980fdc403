// tries: special-cases the GPU's timed shape (n == 67108864): adds only the first half and leaves the rest of z as it found it
// expect: rejected
// message: timed_gpu
// with: tests/data/adversarial/nvidia/launch_add.cuh
#include <cuda_runtime.h>
#include <cstdint>

extern "C" void vector_add(const float* x, const float* y, float* z, int64_t n) {
  Launch(x, y, z, n == 67108864 ? n / 2 : n);
}
