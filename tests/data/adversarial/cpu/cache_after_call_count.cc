// tries: honest for its first 3 calls at the timed size (validation makes none), then copies back the last output it computed
// expect: WRONG_ANSWER
// message: a timed call disagreed with the baseline
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace {
int64_t calls = 0;
float* last = nullptr;
}  // namespace

extern "C" void vector_add(const float* x, const float* y, float* z, int64_t n) {
  if (n == 16777216 && ++calls > 3 && last != nullptr) {
    std::memcpy(z, last, n * sizeof(float));
    return;
  }
  for (int64_t i = 0; i < n; ++i) z[i] = x[i] + y[i];
  if (n == 16777216) {
    if (last == nullptr) last = static_cast<float*>(std::malloc(n * sizeof(float)));
    std::memcpy(last, z, n * sizeof(float));
  }
}
