// Reference for fm_interaction: per batch entry, T = X^T * Y (float32
// accumulators, m ascending) into scratch, then Z = X * T (float32
// accumulators, d ascending).
#include <cstdint>
#include <cstdlib>

extern "C" void fm_interaction(const float* X, const float* Y, float* Z, int64_t batch, int64_t N, int64_t D,
                               int64_t E) {
  float* T = static_cast<float*>(std::malloc(sizeof(float) * D * E));
  for (int64_t b = 0; b < batch; ++b) {
    const float* x = X + b * N * D;
    const float* y = Y + b * N * E;
    float* z = Z + b * N * E;
    for (int64_t d = 0; d < D; ++d) {
      for (int64_t e = 0; e < E; ++e) {
        float sum = 0.0f;
        for (int64_t m = 0; m < N; ++m) sum += x[m * D + d] * y[m * E + e];
        T[d * E + e] = sum;
      }
    }
    for (int64_t n = 0; n < N; ++n) {
      for (int64_t e = 0; e < E; ++e) {
        float sum = 0.0f;
        for (int64_t d = 0; d < D; ++d) sum += x[n * D + d] * T[d * E + e];
        z[n * E + e] = sum;
      }
    }
  }
  std::free(T);
}
