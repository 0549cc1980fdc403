// Reference for log_softmax: the row max, the sum of exp of the shifted row
// (float32, std::exp), then y = x - max - log(sum).
#include <cmath>
#include <cstdint>

extern "C" void log_softmax(const float* x, float* y, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    float max = xr[0];
    for (int64_t c = 1; c < cols; ++c) {
      if (xr[c] > max) max = xr[c];
    }
    float sum = 0.0f;
    for (int64_t c = 0; c < cols; ++c) sum += std::exp(xr[c] - max);
    const float log_sum = std::log(sum);
    for (int64_t c = 0; c < cols; ++c) yr[c] = xr[c] - max - log_sum;
  }
}
