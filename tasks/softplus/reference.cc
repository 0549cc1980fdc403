// Reference for softplus: the plain per-element loop that defines correctness.
#include <cmath>
#include <cstdint>

extern "C" void softplus(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = std::fmax(v, 0.0f) + std::log1p(std::exp(-std::fabs(v)));
  }
}
