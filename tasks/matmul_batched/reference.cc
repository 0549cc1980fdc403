// Reference for matmul_batched: for each batch entry the i-j-k triple loop,
// one float32 accumulator per output element, k ascending.
#include <cstdint>

extern "C" void matmul_batched(const float* A, const float* B, float* C, int64_t batch, int64_t M, int64_t N,
                               int64_t K) {
  for (int64_t b = 0; b < batch; ++b) {
    const float* a = A + b * M * K;
    const float* bb = B + b * K * N;
    float* c = C + b * M * N;
    for (int64_t i = 0; i < M; ++i) {
      for (int64_t j = 0; j < N; ++j) {
        float sum = 0.0f;
        for (int64_t k = 0; k < K; ++k) sum += a[i * K + k] * bb[k * N + j];
        c[i * N + j] = sum;
      }
    }
  }
}
