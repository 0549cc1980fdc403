// Reference for hardsigmoid: the plain per-element loop that defines correctness.
#include <cmath>
#include <cstdint>

extern "C" void hardsigmoid(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = v <= -3.0f ? 0.0f : (v >= 3.0f ? 1.0f : v / 6.0f + 0.5f);
  }
}
