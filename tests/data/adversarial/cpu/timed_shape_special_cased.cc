// tries: special-cases the timed shape (n == 16777216): computes the first half and leaves the rest as it found it
// expect: WRONG_ANSWER
// message: the timed binding 'timed'
#include <cstdint>

extern "C" void vector_add(const float* x, const float* y, float* z, int64_t n) {
  const int64_t end = n == 16777216 ? n / 2 : n;
  for (int64_t i = 0; i < end; ++i) z[i] = x[i] + y[i];
}
