// bucketize, fast: a branch-free binary search, vectorised across values and
// threaded with OpenMP. The search keeps "the answer is in [base, base+len]"
// and halves len the same way for every value, so all values of a block take
// the same steps; each step is a conditional add (no unpredictable branch)
// and, across a block of 64 values, four independent 16-wide gathers from the
// boundaries, which stay in L1. Same result as std::upper_bound, including
// NaN -> 0 (every comparison with NaN is false).
#include <cstdint>

namespace {

constexpr int64_t kBlock = 64;

// index[0:count] for values[0:count]; count <= kBlock.
inline void SearchBlock(const float* __restrict values, const float* __restrict boundaries,
                        int64_t nb, int32_t* __restrict index, int64_t count) {
  int32_t base[kBlock];
  float v[kBlock];
  for (int64_t l = 0; l < kBlock; ++l) {
    base[l] = 0;
    v[l] = l < count ? values[l] : 0.0f;
  }
  for (int64_t len = nb; len > 1; len -= len / 2) {
    const int32_t half = static_cast<int32_t>(len / 2);
#pragma omp simd
    for (int64_t l = 0; l < kBlock; ++l) {
      base[l] = boundaries[base[l] + half] <= v[l] ? base[l] + half : base[l];
    }
  }
  // len == 1: the answer is base or base + 1.
#pragma omp simd
  for (int64_t l = 0; l < kBlock; ++l) base[l] += boundaries[base[l]] <= v[l] ? 1 : 0;
  for (int64_t l = 0; l < count; ++l) index[l] = base[l];
}

}  // namespace

extern "C" void bucketize(const float* __restrict values, const float* __restrict boundaries,
                          int32_t* __restrict index, int64_t n, int64_t nb) {
  if (nb <= 0) {
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) index[i] = 0;
    return;
  }
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  // Dynamic chunks of 64 blocks (4096 values): on a busy host a descheduled
  // thread does not hold the others up at the end of the loop.
#pragma omp parallel for schedule(dynamic, 64)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t begin = b * kBlock;
    const int64_t count = n - begin < kBlock ? n - begin : kBlock;
    SearchBlock(values + begin, boundaries, nb, index + begin, count);
  }
}
