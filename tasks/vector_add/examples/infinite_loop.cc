// Bad candidate (kevo's own tests): never returns -> RUN_TIMEOUT. The volatile
// flag keeps the loop from being optimised away.
#include <cstdint>

static volatile int keep_going = 1;

extern "C" void vector_add(const float* x, const float* y, float* z, int64_t n) {
  while (keep_going) {
  }
  for (int64_t i = 0; i < n; ++i) z[i] = x[i] + y[i];
}
