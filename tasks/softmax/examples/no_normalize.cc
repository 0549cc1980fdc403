// A WRONG softmax, kept for tests: it subtracts the max and exponentiates but
// never divides by the sum, so rows do not add up to 1 (finite, wrong values).
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
    for (int64_t c = 0; c < cols; ++c) yr[c] = std::exp(xr[c] - max);
  }
}
