// tries: fesetround(FE_TOWARDZERO) through libm, leaving the rounding mode changed for the baseline that shares its process
// expect: SANDBOX_VIOLATION
// message: fesetround
#include <cfenv>
#include <cstdint>

extern "C" void vector_add(const float* x, const float* y, float* z, int64_t n) {
  std::fesetround(FE_TOWARDZERO);
  for (int64_t i = 0; i < n; ++i) z[i] = x[i] + y[i];
}
