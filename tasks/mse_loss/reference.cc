// Reference for mse_loss: the squared differences added in double, divided by
// n, rounded once.
#include <cstdint>

extern "C" void mse_loss(const float* pred, const float* target, float* loss, int64_t n) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(pred[i]) - static_cast<double>(target[i]);
    sum += d * d;
  }
  loss[0] = static_cast<float>(sum / static_cast<double>(n));
}
