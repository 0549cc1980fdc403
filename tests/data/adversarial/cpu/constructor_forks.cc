// tries: a static constructor, which runs inside dlopen before the kernel is ever called, forks through the syscall instruction
// expect: SANDBOX_VIOLATION
// message: fork
#include <cstdint>

__attribute__((constructor)) static void BeforeTheKernel() {
  long ret;
  __asm__ volatile("syscall" : "=a"(ret) : "0"(57L /* fork */) : "rcx", "r11", "memory");
}

extern "C" void vector_add(const float* x, const float* y, float* z, int64_t n) {
  for (int64_t i = 0; i < n; ++i) z[i] = x[i] + y[i];
}
