// tries: exit(0) through libc at its first call, before any result is written (the CUDA import policy allows exit; the runner's end is caught)
// expect: RUNTIME_ERROR
#include <cuda_runtime.h>
#include <cstdint>
#include <cstdlib>

extern "C" void vector_add(const float* x, const float* y, float* z, int64_t n) {
  exit(0);
}
