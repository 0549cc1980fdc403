// Reference for matmul_bias_gelu: the i-j-k triple loop (float32
// accumulator, k ascending), then bias and exact GELU on each output.
#include <cmath>
#include <cstdint>

extern "C" void matmul_bias_gelu(const float* A, const float* B, const float* bias, float* C, int64_t M, int64_t N,
                                 int64_t K) {
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      float sum = 0.0f;
      for (int64_t k = 0; k < K; ++k) sum += A[i * K + k] * B[k * N + j];
      const float z = sum + bias[j];
      C[i * N + j] = 0.5f * z * (1.0f + std::erf(z * 0.70710678f));
    }
  }
}
