// Reference for vector_add: the plain loop that defines correctness.
#include <cstdint>

extern "C" void vector_add(const float* x, const float* y, float* z, int64_t n) {
  for (int64_t i = 0; i < n; ++i) z[i] = x[i] + y[i];
}
