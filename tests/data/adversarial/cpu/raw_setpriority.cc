// tries: setpriority(PRIO_PROCESS, 0, 19) through the syscall instruction, so the baseline that shares its process runs at the lowest priority
// expect: SANDBOX_VIOLATION
// message: setpriority
#include <cstdint>

extern "C" void vector_add(const float* x, const float* y, float* z, int64_t n) {
  long ret;
  __asm__ volatile("syscall" : "=a"(ret) : "0"(141L /* setpriority */), "D"(0L), "S"(0L), "d"(19L) : "rcx", "r11", "memory");
  for (int64_t i = 0; i < n; ++i) z[i] = x[i] + y[i];
}
