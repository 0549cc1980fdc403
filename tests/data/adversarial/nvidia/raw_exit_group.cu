// tries: exit_group(0) through the syscall instruction at the GPU's timed size (validation passes first), importing no symbol
// expect: rejected
// with: tests/data/adversarial/nvidia/launch_add.cuh
#include <cuda_runtime.h>
#include <cstdint>

extern "C" void vector_add(const float* x, const float* y, float* z, int64_t n) {
  if (n == 67108864) {
    long ret;
    __asm__ volatile("syscall" : "=a"(ret) : "0"(231L /* exit_group */), "D"(0L) : "rcx", "r11", "memory");
  }
  Launch(x, y, z, n);
}
