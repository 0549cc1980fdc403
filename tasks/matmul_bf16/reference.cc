// Reference for matmul_bf16: the i-j-k triple loop over bf16 values widened
// to float32, one float32 accumulator per output element, k ascending, the
// sum rounded to bf16 (round to nearest even; NaN stays NaN).
#include <cstdint>
#include <cstring>

namespace {

float Bf16ToFloat(uint16_t v) {
  const uint32_t bits = static_cast<uint32_t>(v) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

uint16_t FloatToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

}  // namespace

extern "C" void matmul_bf16(const uint16_t* A, const uint16_t* B, uint16_t* C, int64_t M, int64_t N, int64_t K) {
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      float sum = 0.0f;
      for (int64_t k = 0; k < K; ++k) sum += Bf16ToFloat(A[i * K + k]) * Bf16ToFloat(B[k * N + j]);
      C[i * N + j] = FloatToBf16(sum);
    }
  }
}
