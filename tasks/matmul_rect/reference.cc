// Reference for matmul_rect: the i-j-k triple loop, one float32 accumulator
// per output element, k ascending.
#include <cstdint>

extern "C" void matmul_rect(const float* A, const float* B, float* C, int64_t M, int64_t N, int64_t K) {
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      float sum = 0.0f;
      for (int64_t k = 0; k < K; ++k) sum += A[i * K + k] * B[k * N + j];
      C[i * N + j] = sum;
    }
  }
}
