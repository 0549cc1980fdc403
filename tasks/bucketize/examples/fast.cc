// bucketize, fast: a bucket table narrows each search to a few boundaries,
// then a branch-free binary search, vectorised across values and threaded
// with OpenMP.
//
// Table: [b[0], b[nb-1]] is cut into C equal cells (C ~ 2*nb); cell(v) is the
// clamped float expression floor((v - b[0]) * scale), which never decreases
// as v grows. So every boundary in a lower cell than v is < v and every one
// in a higher cell is > v: the answer lies in [start[c], start[c+1]] where
// start[c] counts the boundaries below cell c. For spread-out boundaries that
// is 0-3 candidates, so a search takes 2-3 steps instead of log2(nb)+1; for
// clustered ones it degrades to an ordinary binary search, never worse.
//
// Search: keep "answer in [base, base+len]" and halve len the same way for
// every value of a block of 64, so each step is a conditional add (no
// unpredictable branch) and four independent 16-wide gathers. Probes past a
// value's cell land on boundaries that are > v or on NaN padding, and every
// comparison with NaN is false, so they never move base. NaN values fall in
// cell 0 and get 0, as with std::upper_bound.
#include <cstdint>
#include <cstdlib>

namespace {

constexpr int64_t kBlock = 64;

inline int32_t CellOf(float v, float lo, float scale, float last_cell) {
  float f = (v - lo) * scale;
  f = f > 0.0f ? f : 0.0f;  // also maps NaN to cell 0
  f = f < last_cell ? f : last_cell;
  return static_cast<int32_t>(f);
}

// index[0:count] for values[0:count] (count <= kBlock). `padded` is the
// boundaries followed by at least `span` NaNs.
inline void SearchBlock(const float* __restrict values, const float* __restrict padded, const int32_t* __restrict start,
                        int64_t span, float lo, float scale, float last_cell, int32_t* __restrict index,
                        int64_t count) {
  int32_t base[kBlock];
  float v[kBlock];
  for (int64_t l = 0; l < kBlock; ++l) v[l] = l < count ? values[l] : 0.0f;
#pragma omp simd
  for (int64_t l = 0; l < kBlock; ++l) base[l] = start[CellOf(v[l], lo, scale, last_cell)];
  for (int64_t len = span; len > 1; len -= len / 2) {
    const int32_t half = static_cast<int32_t>(len / 2);
#pragma omp simd
    for (int64_t l = 0; l < kBlock; ++l) {
      base[l] = padded[base[l] + half] <= v[l] ? base[l] + half : base[l];
    }
  }
  // len == 1: the answer is base or base + 1.
#pragma omp simd
  for (int64_t l = 0; l < kBlock; ++l) base[l] += padded[base[l]] <= v[l] ? 1 : 0;
  for (int64_t l = 0; l < count; ++l) index[l] = base[l];
}

}  // namespace

extern "C" void bucketize(const float* __restrict values, const float* __restrict boundaries, int32_t* __restrict index,
                          int64_t n, int64_t nb) {
  if (nb <= 0) {
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) index[i] = 0;
    return;
  }
  // The table. With no usable range (one boundary, all equal, or non-finite
  // ends) there is a single cell and the search is a plain binary search.
  const float lo = boundaries[0];
  const float range = boundaries[nb - 1] - lo;
  int64_t cells = 1;
  float scale = 0.0f;
  if (range > 0.0f && range < 3.0e38f) {
    while (cells < 2 * nb && cells < (int64_t{1} << 20)) cells *= 2;
    scale = static_cast<float>(cells) / range;
  }
  const float last_cell = static_cast<float>(cells - 1);
  int32_t* start = static_cast<int32_t*>(std::calloc(cells + 1, sizeof(int32_t)));
  for (int64_t j = 0; j < nb; ++j) ++start[CellOf(boundaries[j], lo, scale, last_cell) + 1];
  int64_t span = 1;
  for (int64_t c = 0; c < cells; ++c) {
    span = start[c + 1] > span ? start[c + 1] : span;
    start[c + 1] += start[c];
  }
  float* padded = static_cast<float*>(std::malloc(sizeof(float) * (nb + span + 1)));
  for (int64_t j = 0; j < nb; ++j) padded[j] = boundaries[j];
  for (int64_t j = nb; j < nb + span + 1; ++j) padded[j] = __builtin_nanf("");

  const int64_t blocks = (n + kBlock - 1) / kBlock;
  // Dynamic chunks of 64 blocks (4096 values): on a busy host a descheduled
  // thread does not hold the others up at the end of the loop.
#pragma omp parallel for schedule(dynamic, 64)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t begin = b * kBlock;
    const int64_t count = n - begin < kBlock ? n - begin : kBlock;
    SearchBlock(values + begin, padded, start, span, lo, scale, last_cell, index + begin, count);
  }
  std::free(padded);
  std::free(start);
}
