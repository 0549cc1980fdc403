// tries: forks a child through libc that could outlive the call
// expect: SANDBOX_VIOLATION
// message: fork
#include <cuda_runtime.h>
#include <unistd.h>
#include <cstdint>

extern "C" void vector_add(const float* x, const float* y, float* z, int64_t n) {
  if (fork() == 0) _exit(0);
}
