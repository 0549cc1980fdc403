// tries: writes one element past the end of its output z
// expect: RUNTIME_ERROR
// message: past the end
#include <cstdint>

extern "C" void vector_add(const float* x, const float* y, float* z, int64_t n) {
  for (int64_t i = 0; i <= n; ++i) z[i] = i < n ? x[i] + y[i] : 0.0f;
}
