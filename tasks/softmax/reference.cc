// Reference for softmax: the three-pass definition (row max, sum of exp of the
// shifted row, divide), in float32 with std::exp.
#include <cmath>
#include <cstdint>

extern "C" void softmax(const float* x, float* y, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    float max = xr[0];
    for (int64_t c = 1; c < cols; ++c) {
      if (xr[c] > max) max = xr[c];
    }
    float sum = 0.0f;
    for (int64_t c = 0; c < cols; ++c) {
      yr[c] = std::exp(xr[c] - max);
      sum += yr[c];
    }
    for (int64_t c = 0; c < cols; ++c) yr[c] = yr[c] / sum;
  }
}
