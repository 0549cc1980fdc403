// mse_loss, fast: the vector is cut into fixed 64K-element chunks shared out
// to OpenMP threads; each chunk is summed with 64 independent float32
// accumulators (vectorised), and the chunk sums are added in chunk order in
// double, so the result does not depend on which thread took which chunk.
#include <cstdint>
#include <cstdlib>

namespace {

constexpr int kLanes = 64;
constexpr int64_t kChunk = int64_t{1} << 16;

float SquaredDiffSum(const float* __restrict a, const float* __restrict b, int64_t n) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
#pragma omp simd
    for (int l = 0; l < kLanes; ++l) {
      const float d = a[i + l] - b[i + l];
      acc[l] += d * d;
    }
  }
  float tail = 0.0f;
  for (; i < n; ++i) tail += (a[i] - b[i]) * (a[i] - b[i]);
  for (int width = kLanes / 2; width > 0; width /= 2) {
#pragma omp simd
    for (int l = 0; l < width; ++l) acc[l] += acc[l + width];
  }
  return acc[0] + tail;
}

}  // namespace

extern "C" void mse_loss(const float* __restrict pred, const float* __restrict target, float* __restrict loss,
                         int64_t n) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  float* partial = static_cast<float*>(std::malloc(sizeof(float) * (chunks > 0 ? chunks : 1)));
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < chunks; ++k) {
    const int64_t begin = k * kChunk;
    const int64_t len = n - begin < kChunk ? n - begin : kChunk;
    partial[k] = SquaredDiffSum(pred + begin, target + begin, len);
  }
  double sum = 0.0;
  for (int64_t k = 0; k < chunks; ++k) sum += partial[k];
  std::free(partial);
  loss[0] = static_cast<float>(sum / static_cast<double>(n));
}
