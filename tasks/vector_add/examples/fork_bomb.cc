// Bad candidate (kevo's own tests): calls libc fork() in a loop. Stopped by the
// imported-symbol check ("fork"), and without it by the seccomp filter
// (glibc's fork is clone() without CLONE_THREAD) -> SANDBOX_VIOLATION.
#include <unistd.h>

#include <cstdint>

extern "C" void vector_add(const float* x, const float* y, float* z, int64_t n) {
  for (int i = 0; i < 1000000; ++i) fork();
  for (int64_t i = 0; i < n; ++i) z[i] = x[i] + y[i];
}
