// Reference for silu: the plain per-element loop that defines correctness.
#include <cmath>
#include <cstdint>

extern "C" void silu(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = v / (1.0f + std::exp(-v));
  }
}
