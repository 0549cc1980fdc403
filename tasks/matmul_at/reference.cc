// Reference for matmul_at: C = A^T * B with A stored K x M; the i-j-k triple
// loop, one float32 accumulator per output element, k ascending.
#include <cstdint>

extern "C" void matmul_at(const float* A, const float* B, float* C, int64_t M, int64_t N, int64_t K) {
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      float sum = 0.0f;
      for (int64_t k = 0; k < K; ++k) sum += A[k * M + i] * B[k * N + j];
      C[i * N + j] = sum;
    }
  }
}
