// Bad candidate (kevo's own tests): one output element is NaN where the
// reference is finite -> NONFINITE.
#include <cstdint>

extern "C" void vector_add(const float* x, const float* y, float* z, int64_t n) {
  for (int64_t i = 0; i < n; ++i) z[i] = x[i] + y[i];
  if (n > 0) z[n / 2] = __builtin_nanf("");
}
