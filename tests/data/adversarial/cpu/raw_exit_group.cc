// tries: exit_group(0) through the syscall instruction at the timed size (validation passes first), importing no symbol
// expect: RUNTIME_ERROR
// message: the profiler ended without writing its results
#include <cstdint>

extern "C" void vector_add(const float* x, const float* y, float* z, int64_t n) {
  if (n == 16777216) {
    long ret;
    __asm__ volatile("syscall" : "=a"(ret) : "0"(231L /* exit_group */), "D"(0L) : "rcx", "r11", "memory");
  }
  for (int64_t i = 0; i < n; ++i) z[i] = x[i] + y[i];
}
