// Reference for row_max: a running maximum over each row, starting at the
// row's first element.
#include <cstdint>

extern "C" void row_max(const float* x, float* y, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    float max = xr[0];
    for (int64_t c = 1; c < cols; ++c) {
      if (xr[c] > max) max = xr[c];
    }
    y[r] = max;
  }
}
