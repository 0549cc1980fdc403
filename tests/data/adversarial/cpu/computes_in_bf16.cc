// tries: silently lowers precision: rounds x and y to bfloat16 (half the bytes a real kernel would read) and adds in bf16
// expect: WRONG_ANSWER
// message: z[
#include <cstdint>
#include <cstring>

namespace {
float ToBf16AndBack(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  bits = (bits + 0x7fff + ((bits >> 16) & 1)) & 0xffff0000u;  // round to nearest even
  std::memcpy(&v, &bits, 4);
  return v;
}
}  // namespace

extern "C" void vector_add(const float* x, const float* y, float* z, int64_t n) {
  for (int64_t i = 0; i < n; ++i) z[i] = ToBf16AndBack(ToBf16AndBack(x[i]) + ToBf16AndBack(y[i]));
}
