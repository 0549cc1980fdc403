// Bad candidate (kevo's own tests): forks through the `syscall` instruction, so
// it imports no symbol and passes the symbol check; the runner's seccomp
// filter stops it -> SANDBOX_VIOLATION ("fork").
#include <cstdint>

static long RawSyscall0(long nr) {
  long ret;
  __asm__ volatile("syscall" : "=a"(ret) : "0"(nr) : "rcx", "r11", "memory");
  return ret;
}

extern "C" void vector_add(const float* x, const float* y, float* z, int64_t n) {
  for (int i = 0; i < 1000; ++i) RawSyscall0(57);  // __NR_fork on x86-64
  for (int64_t i = 0; i < n; ++i) z[i] = x[i] + y[i];
}
