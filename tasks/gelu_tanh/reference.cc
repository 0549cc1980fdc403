// Reference for gelu_tanh: the plain per-element loop that defines correctness.
#include <cmath>
#include <cstdint>

extern "C" void gelu_tanh(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = 0.5f * v * (1.0f + std::tanh(0.7978845608f * (v + 0.044715f * v * v * v)));
  }
}
