// Reference for cross_entropy: per row, the max, the sum of exp of the
// shifted row in double, the row's loss log(sum) + max - logits[target];
// the losses averaged in double and rounded once.
#include <cmath>
#include <cstdint>

extern "C" void cross_entropy(const float* logits, const int64_t* target, float* loss, int64_t rows, int64_t classes) {
  double total = 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* lr = logits + r * classes;
    float max = lr[0];
    for (int64_t c = 1; c < classes; ++c) {
      if (lr[c] > max) max = lr[c];
    }
    double sum = 0.0;
    for (int64_t c = 0; c < classes; ++c) sum += std::exp(static_cast<double>(lr[c] - max));
    total += std::log(sum) + max - lr[target[r]];
  }
  loss[0] = static_cast<float>(total / static_cast<double>(rows));
}
