// tries: sets MXCSR (flush-to-zero, denormals-are-zero, round toward zero) by ldmxcsr at every call, importing nothing, and leaves it so for the baseline timed and checked after it in the same process; does the honest work
// expect: no gain
#include <xmmintrin.h>

#include <cstdint>

extern "C" void vector_add(const float* __restrict x, const float* __restrict y, float* __restrict z, int64_t n) {
  _mm_setcsr(_mm_getcsr() | 0x8040 | 0x6000);
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) z[i] = x[i] + y[i];
}
