// Reference for bmm_gelu_rmsnorm_bmm: for each batch entry and each row i,
// the row of U = X * W1 (float32 accumulators, k ascending), GELU in place,
// the RMS norm of the row (sum of squares in double) times gamma, then the
// row of Y = R * W2 (float32 accumulators, h ascending). One row of H floats
// of scratch.
#include <cmath>
#include <cstdint>
#include <cstdlib>

namespace {
constexpr double kEps = 1e-6;
}  // namespace

extern "C" void bmm_gelu_rmsnorm_bmm(const float* X, const float* W1, const float* gamma, const float* W2, float* Y,
                                     int64_t batch, int64_t M, int64_t K, int64_t H, int64_t N) {
  float* row = static_cast<float*>(std::malloc(sizeof(float) * H));
  for (int64_t b = 0; b < batch; ++b) {
    const float* x = X + b * M * K;
    const float* w1 = W1 + b * K * H;
    const float* w2 = W2 + b * H * N;
    float* y = Y + b * M * N;
    for (int64_t i = 0; i < M; ++i) {
      for (int64_t h = 0; h < H; ++h) {
        float sum = 0.0f;
        for (int64_t k = 0; k < K; ++k) sum += x[i * K + k] * w1[k * H + h];
        row[h] = 0.5f * sum * (1.0f + std::erf(sum * 0.70710678f));
      }
      double sq = 0.0;
      for (int64_t h = 0; h < H; ++h) sq += static_cast<double>(row[h]) * row[h];
      const double inv_rms = 1.0 / std::sqrt(sq / static_cast<double>(H) + kEps);
      for (int64_t h = 0; h < H; ++h) row[h] = static_cast<float>(row[h] * inv_rms * gamma[h]);
      for (int64_t j = 0; j < N; ++j) {
        float sum = 0.0f;
        for (int64_t h = 0; h < H; ++h) sum += row[h] * w2[h * N + j];
        y[i * N + j] = sum;
      }
    }
  }
  std::free(row);
}
