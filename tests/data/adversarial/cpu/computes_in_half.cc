// tries: silently lowers precision: adds in IEEE half (_Float16) where f32 is asked
// expect: WRONG_ANSWER
// message: z[
#include <cstdint>

extern "C" void vector_add(const float* x, const float* y, float* z, int64_t n) {
  for (int64_t i = 0; i < n; ++i) z[i] = static_cast<float>(static_cast<_Float16>(x[i]) + static_cast<_Float16>(y[i]));
}
