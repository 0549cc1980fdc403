// Reference for rms_norm_residual: per row, h = x + residual in float32, the
// mean of h^2 in double, then y = h / sqrt(mean + eps) * gamma.
#include <cmath>
#include <cstdint>

namespace {
constexpr double kEps = 1e-6;
}  // namespace

extern "C" void rms_norm_residual(const float* x, const float* residual, const float* gamma, float* y, float* h,
                                  int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    float* hr = h + r * cols;
    float* yr = y + r * cols;
    double sq = 0.0;
    for (int64_t c = 0; c < cols; ++c) {
      hr[c] = x[r * cols + c] + residual[r * cols + c];
      sq += static_cast<double>(hr[c]) * hr[c];
    }
    const double inv_rms = 1.0 / std::sqrt(sq / static_cast<double>(cols) + kEps);
    for (int64_t c = 0; c < cols; ++c) yr[c] = static_cast<float>(hr[c] * inv_rms * gamma[c]);
  }
}
