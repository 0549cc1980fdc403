// Reference for layer_norm: per row, the mean and the biased variance in
// double (two passes), then y = (x - mean) / sqrt(var + eps) * gamma + beta.
#include <cmath>
#include <cstdint>

namespace {
constexpr double kEps = 1e-5;
}  // namespace

extern "C" void layer_norm(const float* x, const float* gamma, const float* beta, float* y, int64_t rows,
                           int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    double sum = 0.0;
    for (int64_t c = 0; c < cols; ++c) sum += xr[c];
    const double mean = sum / static_cast<double>(cols);
    double sq = 0.0;
    for (int64_t c = 0; c < cols; ++c) sq += (xr[c] - mean) * (xr[c] - mean);
    const double var = sq / static_cast<double>(cols);
    const double inv_std = 1.0 / std::sqrt(var + kEps);
    for (int64_t c = 0; c < cols; ++c) {
      yr[c] = static_cast<float>((xr[c] - mean) * inv_std * gamma[c] + beta[c]);
    }
  }
}
