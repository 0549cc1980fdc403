// cast_i64_i32, fast: a branch-free clamp and count (the reference branches
// on every out-of-range value, which the uniform data make unpredictable),
// vectorised and threaded; the per-thread counts are integers, so their sum
// does not depend on the schedule.
#include <cstdint>

extern "C" void cast_i64_i32(const int64_t* __restrict x, int32_t* __restrict y, int64_t* __restrict out_of_range,
                             int64_t n) {
  const int64_t lo = INT32_MIN, hi = INT32_MAX;
  int64_t count = 0;
#pragma omp parallel for simd schedule(static) reduction(+ : count)
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = x[i];
    const int64_t c = v < lo ? lo : (v > hi ? hi : v);
    count += c != v;
    y[i] = static_cast<int32_t>(c);
  }
  out_of_range[0] = count;
}
