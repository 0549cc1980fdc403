// row_sum, fast: rows split across OpenMP threads; each row summed with 64
// independent float32 accumulators (four 16-wide vectors with AVX-512), which
// hides the add latency and keeps the loads streaming at memory bandwidth.
// Short rows (narrower than one block) and the tail of each row go through a
// scalar loop. When there are few, very wide rows, each row is also split
// across threads, so that a few long rows still use every core.
#include <cstdint>

namespace {

constexpr int kLanes = 64;
constexpr int64_t kMinChunk = int64_t{1} << 14;

inline int64_t Min(int64_t a, int64_t b) { return a < b ? a : b; }

float SumRange(const float* __restrict x, int64_t n) {
  float acc[kLanes] = {};
  int64_t c = 0;
  for (; c + kLanes <= n; c += kLanes) {
#pragma omp simd
    for (int l = 0; l < kLanes; ++l) acc[l] += x[c + l];
  }
  float tail = 0.0f;
  for (; c < n; ++c) tail += x[c];
  // Pairwise fold of the accumulators.
  for (int width = kLanes / 2; width > 0; width /= 2) {
#pragma omp simd
    for (int l = 0; l < width; ++l) acc[l] += acc[l + width];
  }
  return acc[0] + tail;
}

}  // namespace

extern "C" void row_sum(const float* __restrict x, float* __restrict y, int64_t rows, int64_t cols) {
  if (rows >= 64 || cols < (int64_t{1} << 16)) {
    // Dynamic chunks of rows: on a busy host a descheduled thread does not
    // hold the others up at the end of the loop.
#pragma omp parallel for schedule(dynamic, 32)
    for (int64_t r = 0; r < rows; ++r) y[r] = SumRange(x + r * cols, cols);
    return;
  }
  // Few, very wide rows: each row is cut into at most kMaxChunks fixed chunks
  // summed in parallel, and the chunk sums are added in order, so the result
  // does not depend on which thread took which chunk (it must be bitwise
  // reproducible).
  constexpr int64_t kMaxChunks = 256;
  const int64_t chunks = Min(kMaxChunks, (cols + kMinChunk - 1) / kMinChunk);
  const int64_t chunk = (cols + chunks - 1) / chunks;
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    float partial[kMaxChunks];
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t k = 0; k < chunks; ++k) {
      const int64_t begin = k * chunk;
      partial[k] = begin < cols ? SumRange(xr + begin, Min(chunk, cols - begin)) : 0.0f;
    }
    float sum = 0.0f;
    for (int64_t k = 0; k < chunks; ++k) sum += partial[k];
    y[r] = sum;
  }
}
