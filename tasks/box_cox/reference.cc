// Reference for box_cox: per element, log(x) where the feature's lambda is 0,
// else (pow(x, lambda) - 1) / lambda, in float32 with libm.
#include <cmath>
#include <cstdint>

extern "C" void box_cox(const float* x, const float* lmbda, float* y, int64_t rows, int64_t features) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t f = 0; f < features; ++f) {
      const float v = x[r * features + f];
      const float l = lmbda[f];
      y[r * features + f] = l == 0.0f ? std::log(v) : (std::pow(v, l) - 1.0f) / l;
    }
  }
}
