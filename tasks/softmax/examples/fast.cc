// softmax, fast: rows shared out to OpenMP threads; per row three vectorised
// passes over data that stays in L1: the max, exp(x - max) into y with its
// sum, and y scaled by 1/sum. exp is a
// vectorisable polynomial (Cody-Waite range reduction + degree-7 Taylor
// series on [-ln2/2, ln2/2], relative error < 2e-7), valid for the arguments
// softmax feeds it: x - max <= 0. Arguments below -87.3 give 0 (the true value
// is < 1e-38, far under any tolerance).
#include <cstdint>

namespace {

// exp(t) for t <= 0; written so that `#pragma omp simd` loops vectorise it.
inline float ExpNonPositive(float t) {
  t = t < -87.3f ? -87.3f : t;
  // n = round(t / ln2) with the 1.5 * 2^23 trick (round to nearest).
  const float kMagic = 12582912.0f;
  const float n = (t * 1.44269504088896341f + kMagic) - kMagic;
  // r = t - n*ln2 in two steps, so r keeps full precision.
  float r = t - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  // e^r, |r| <= 0.347: Taylor to r^7 (Horner).
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  // Scale by 2^n through the exponent bits; n >= -126 here, so the exponent
  // field n + 127 is at least 1.
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  return p * __builtin_bit_cast(float, bits);
}

}  // namespace

extern "C" void softmax(const float* __restrict x, float* __restrict y, int64_t rows, int64_t cols) {
  // Dynamic chunks of rows: on a busy host a descheduled thread does not
  // hold the others up at the end of the loop.
#pragma omp parallel for schedule(dynamic, 16)
  for (int64_t r = 0; r < rows; ++r) {
    const float* __restrict xr = x + r * cols;
    float* __restrict yr = y + r * cols;
    float max = xr[0];
#pragma omp simd reduction(max : max)
    for (int64_t c = 0; c < cols; ++c) max = xr[c] > max ? xr[c] : max;
    // exp once per element into y (the row stays in L1), then scale in place.
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int64_t c = 0; c < cols; ++c) {
      const float e = ExpNonPositive(xr[c] - max);
      yr[c] = e;
      sum += e;
    }
    const float inv = 1.0f / sum;
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) yr[c] *= inv;
  }
}
