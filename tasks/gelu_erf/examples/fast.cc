// gelu_erf, fast: 0.5 x (1 + erf(x / sqrt(2))) with a vectorisable erf
// (Abramowitz & Stegun 7.1.26 on a vectorisable exp).
// Threaded with OpenMP in static blocks; each block is a vectorised
// `omp simd` loop (AVX-512 with -march=native).
#include <cstdint>

namespace {

// exp(t) for t <= 0, written so that `#pragma omp simd` loops vectorise it:
// Cody-Waite range reduction t = n*ln2 + r, a degree-7 Taylor polynomial for
// e^r on [-ln2/2, ln2/2] (relative error < 2e-7) and 2^n built in the
// exponent bits. Arguments below -87.3 give exp(-87.3) ~ 1e-38 (the true
// value is smaller still, far under any tolerance).
inline float ExpNonPositive(float t) {
  t = t < -87.3f ? -87.3f : t;
  const float kMagic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float n = (t * 1.44269504088896341f + kMagic) - kMagic;
  float r = t - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  return p * __builtin_bit_cast(float, bits);
}

// erf(v) by Abramowitz & Stegun 7.1.26 (absolute error < 1.5e-7):
// erf(a) = 1 - (a1 s + a2 s^2 + ... + a5 s^5) exp(-a^2), s = 1 / (1 + p a),
// for a = |v|, then the sign.
inline float Erf(float v) {
  const float a = v < 0.0f ? -v : v;
  const float s = 1.0f / (1.0f + 0.3275911f * a);
  float poly = 1.061405429f;
  poly = poly * s - 1.453152027f;
  poly = poly * s + 1.421413741f;
  poly = poly * s - 0.284496736f;
  poly = poly * s + 0.254829592f;
  poly = poly * s;
  const float r = 1.0f - poly * ExpNonPositive(-a * a);
  return v < 0.0f ? -r : r;
}

}  // namespace

extern "C" void gelu_erf(const float* __restrict x, float* __restrict y, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] = 0.5f * x[i] * (1.0f + Erf(x[i] * 0.70710678f));
}
