// Reference for gelu_erf: the plain per-element loop that defines correctness.
#include <cmath>
#include <cstdint>

extern "C" void gelu_erf(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = 0.5f * v * (1.0f + std::erf(v * 0.70710678f));
  }
}
