// tries: opens a TCP socket through the syscall instruction from the host function, importing no symbol
// expect: rejected
// message: socket
// with: tests/data/adversarial/nvidia/launch_add.cuh
#include <cuda_runtime.h>
#include <cstdint>

extern "C" void vector_add(const float* x, const float* y, float* z, int64_t n) {
  long fd;
  __asm__ volatile("syscall" : "=a"(fd) : "0"(41L /* socket */), "D"(2L), "S"(1L), "d"(0L) : "rcx", "r11", "memory");
  Launch(x, y, z, n);
}
