// tries: writes the 64 bytes before its output z (the allocator's bookkeeping), then computes honestly
// expect: RUNTIME_ERROR
#include <cstdint>
#include <cstring>

extern "C" void vector_add(const float* x, const float* y, float* z, int64_t n) {
  std::memset(reinterpret_cast<char*>(z) - 64, 0x41, 64);
  for (int64_t i = 0; i < n; ++i) z[i] = x[i] + y[i];
}
