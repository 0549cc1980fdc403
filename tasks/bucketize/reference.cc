// Reference for bucketize: a plain binary search per value for the first
// boundary greater than the value (std::upper_bound).
#include <cstdint>

extern "C" void bucketize(const float* values, const float* boundaries, int32_t* index, int64_t n, int64_t nb) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = values[i];
    int64_t lo = 0, hi = nb;  // answer in [lo, hi]
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      if (boundaries[mid] <= v) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    index[i] = static_cast<int32_t>(lo);
  }
}
