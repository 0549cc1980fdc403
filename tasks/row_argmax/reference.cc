// Reference for row_argmax: a running maximum over each row that moves only
// on a strictly greater value, so ties keep the first index.
#include <cstdint>

extern "C" void row_argmax(const float* x, int64_t* index, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    int64_t best = 0;
    for (int64_t c = 1; c < cols; ++c) {
      if (xr[c] > xr[best]) best = c;
    }
    index[r] = best;
  }
}
