// Reference for leaky_relu: the plain per-element loop that defines correctness.
#include <cmath>
#include <cstdint>

extern "C" void leaky_relu(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = v > 0.0f ? v : 0.01f * v;
  }
}
