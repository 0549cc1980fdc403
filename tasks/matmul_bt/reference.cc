// Reference for matmul_bt: C = A * B^T with B stored N x K; every output is a
// dot product of a row of A and a row of B, one float32 accumulator, k
// ascending.
#include <cstdint>

extern "C" void matmul_bt(const float* A, const float* B, float* C, int64_t M, int64_t N, int64_t K) {
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      float sum = 0.0f;
      for (int64_t k = 0; k < K; ++k) sum += A[i * K + k] * B[j * K + k];
      C[i * N + j] = sum;
    }
  }
}
