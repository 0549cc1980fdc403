// Bad candidate (kevo's own tests): asks for a 50 GB scratch buffer. The
// runner's address-space limit makes operator new fail (recorded as "alloc
// failed"), std::bad_alloc escapes -> RESOURCE_EXHAUSTED.
#include <cstddef>
#include <cstdint>
#include <vector>

extern "C" void vector_add(const float* x, const float* y, float* z, int64_t n) {
  std::vector<char> scratch(std::size_t{50} << 30, 1);
  for (int64_t i = 0; i < n; ++i) z[i] = x[i] + y[i] + static_cast<float>(scratch[i] - 1);
}
