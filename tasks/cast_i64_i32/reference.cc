// Reference for cast_i64_i32: clamp each value to the int32 range, count the
// ones that did not fit.
#include <cstdint>

extern "C" void cast_i64_i32(const int64_t* x, int32_t* y, int64_t* out_of_range, int64_t n) {
  const int64_t lo = INT32_MIN, hi = INT32_MAX;
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) {
    int64_t v = x[i];
    if (v < lo) {
      v = lo;
      ++count;
    } else if (v > hi) {
      v = hi;
      ++count;
    }
    y[i] = static_cast<int32_t>(v);
  }
  out_of_range[0] = count;
}
