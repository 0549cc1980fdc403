// Bad candidate (kevo's own tests): stores through a null pointer -> SIGSEGV
// -> RUNTIME_ERROR. The pointer is a volatile global so the compiler can
// neither drop the stores nor turn them into a trap instruction (SIGILL).
#include <cstdint>

float* volatile crash_target = nullptr;

extern "C" void vector_add(const float* x, const float* y, float* z, int64_t n) {
  float* target = crash_target;
  for (int64_t i = 0; i < n; ++i) target[i] = x[i] + y[i];
  (void)z;
}
