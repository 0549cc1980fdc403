// Bad candidate (kevo's own tests): computes the right answer but then
// overwrites its input -> INPUT_MODIFIED.
#include <cstdint>

extern "C" void vector_add(const float* x, const float* y, float* z, int64_t n) {
  for (int64_t i = 0; i < n; ++i) z[i] = x[i] + y[i];
  float* writable_x = const_cast<float*>(x);
  for (int64_t i = 0; i < n; ++i) writable_x[i] = 0.0f;
}
