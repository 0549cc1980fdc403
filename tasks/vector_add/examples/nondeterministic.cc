// Bad candidate (kevo's own tests): a static call counter makes every second
// call differ, although the first call of each case is right ->
// NONDETERMINISTIC.
#include <cstdint>

static int64_t calls = 0;

extern "C" void vector_add(const float* x, const float* y, float* z, int64_t n) {
  const float bump = (calls++ % 2 == 0) ? 0.0f : 1.0f;
  for (int64_t i = 0; i < n; ++i) z[i] = x[i] + y[i] + bump;
}
