// tries: caches one output keyed by a hash of 3 input elements (first, middle, last of x and y) and copies it back on a match
// expect: WRONG_ANSWER
// message: a timed call disagreed with the baseline
#include <cstdint>
#include <initializer_list>
#include <cstdlib>
#include <cstring>

namespace {
float* cached = nullptr;
int64_t cached_n = 0;
uint64_t cached_key = 0;

uint64_t Key(const float* x, const float* y, int64_t n) {
  uint64_t k = 1469598103934665603ull;
  for (const float* p : {x, y}) {
    for (int64_t i : {int64_t{0}, n / 2, n - 1}) {
      uint32_t bits;
      std::memcpy(&bits, &p[i], 4);
      k = (k ^ bits) * 1099511628211ull;
    }
  }
  return k;
}
}  // namespace

extern "C" void vector_add(const float* x, const float* y, float* z, int64_t n) {
  const uint64_t key = Key(x, y, n);
  if (cached != nullptr && cached_n == n && cached_key == key) {
    std::memcpy(z, cached, n * sizeof(float));
    return;
  }
  for (int64_t i = 0; i < n; ++i) z[i] = x[i] + y[i];
  if (cached_n != n) {
    std::free(cached);
    cached = static_cast<float*>(std::malloc(n * sizeof(float)));
    cached_n = n;
  }
  std::memcpy(cached, z, n * sizeof(float));
  cached_key = key;
}
