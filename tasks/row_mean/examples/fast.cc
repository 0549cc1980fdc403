// row_mean, fast: rows shared out to OpenMP threads; each row summed with 64
// independent float32 accumulators (four 16-wide vectors with AVX-512),
// folded pairwise, then divided by the row length. Few, very wide rows are
// cut into fixed chunks summed in parallel and added in order (bitwise
// reproducible whatever thread takes which chunk).
#include <cstdint>

namespace {

constexpr int kLanes = 64;
constexpr int64_t kChunk = int64_t{1} << 14;
constexpr int64_t kMaxChunks = 256;

float SumRange(const float* __restrict x, int64_t n) {
  float acc[kLanes] = {};
  int64_t c = 0;
  for (; c + kLanes <= n; c += kLanes) {
#pragma omp simd
    for (int l = 0; l < kLanes; ++l) acc[l] += x[c + l];
  }
  float tail = 0.0f;
  for (; c < n; ++c) tail += x[c];
  for (int width = kLanes / 2; width > 0; width /= 2) {
#pragma omp simd
    for (int l = 0; l < width; ++l) acc[l] += acc[l + width];
  }
  return acc[0] + tail;
}

}  // namespace

extern "C" void row_mean(const float* __restrict x, float* __restrict y, int64_t rows, int64_t cols) {
  const float inv = 1.0f / static_cast<float>(cols);
  if (rows >= 64 || cols < 4 * kChunk) {
#pragma omp parallel for schedule(dynamic, 32)
    for (int64_t r = 0; r < rows; ++r) y[r] = SumRange(x + r * cols, cols) * inv;
    return;
  }
  int64_t chunks = (cols + kChunk - 1) / kChunk;
  chunks = chunks < kMaxChunks ? chunks : kMaxChunks;
  const int64_t chunk = (cols + chunks - 1) / chunks;
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    float partial[kMaxChunks];
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t k = 0; k < chunks; ++k) {
      const int64_t begin = k * chunk;
      const int64_t len = cols - begin < chunk ? cols - begin : chunk;
      partial[k] = len > 0 ? SumRange(xr + begin, len) : 0.0f;
    }
    float sum = 0.0f;
    for (int64_t k = 0; k < chunks; ++k) sum += partial[k];
    y[r] = sum * inv;
  }
}
