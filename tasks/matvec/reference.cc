// Reference for matvec: one dot product per row of A, float32 accumulator,
// k ascending.
#include <cstdint>

extern "C" void matvec(const float* A, const float* x, float* y, int64_t M, int64_t K) {
  for (int64_t i = 0; i < M; ++i) {
    float sum = 0.0f;
    for (int64_t k = 0; k < K; ++k) sum += A[i * K + k] * x[k];
    y[i] = sum;
  }
}
