// matvec, fast: rows of A shared out to OpenMP threads; each dot product
// with 64 independent float32 accumulators (four 16-wide vectors with
// AVX-512), folded pairwise, so the loads stream at memory bandwidth instead
// of waiting on one add chain.
#include <cstdint>

namespace {

constexpr int kLanes = 64;

float Dot(const float* __restrict a, const float* __restrict x, int64_t n) {
  float acc[kLanes] = {};
  int64_t k = 0;
  for (; k + kLanes <= n; k += kLanes) {
#pragma omp simd
    for (int l = 0; l < kLanes; ++l) acc[l] += a[k + l] * x[k + l];
  }
  float tail = 0.0f;
  for (; k < n; ++k) tail += a[k] * x[k];
  for (int width = kLanes / 2; width > 0; width /= 2) {
#pragma omp simd
    for (int l = 0; l < width; ++l) acc[l] += acc[l + width];
  }
  return acc[0] + tail;
}

}  // namespace

extern "C" void matvec(const float* __restrict A, const float* __restrict x, float* __restrict y, int64_t M,
                       int64_t K) {
#pragma omp parallel for schedule(dynamic, 16)
  for (int64_t i = 0; i < M; ++i) y[i] = Dot(A + i * K, x, K);
}
