// Reference for row_sum: add each row left to right in double, round once.
#include <cstdint>

extern "C" void row_sum(const float* x, float* y, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0.0;
    for (int64_t c = 0; c < cols; ++c) sum += x[r * cols + c];
    y[r] = static_cast<float>(sum);
  }
}
