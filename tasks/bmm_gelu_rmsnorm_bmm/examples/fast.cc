// bmm_gelu_rmsnorm_bmm, fast: (batch entry, block of 4 rows) pairs shared
// out to OpenMP threads. Per pair the 4 x H block of U = X W1 is computed
// i-k-j into per-thread scratch (L1/L2), GELU (vectorisable erf) and the RMS
// norm are applied to it in place, and the 4 x N block of Y = R W2 follows
// i-k-j: the batch x M x H intermediate never goes to memory.
#include <cmath>
#include <cstdint>
#include <cstdlib>

namespace {

constexpr int64_t kRowBlock = 4;

// C[0:mr, 0:N] (row stride ldc) = sum over k of a(r, k) * B[k][0:N], where
// a(r, k) = A[r * a_row + k * a_k] (so a transposed A needs no copy) and B
// has row stride ldb. i-k-j order: the mr rows of C stay in L1 while B
// streams through, every update a vectorised multiply-add over a row.
// Each C element is accumulated over k in ascending order.
inline void GemmRows(const float* __restrict A, int64_t a_row, int64_t a_k, const float* __restrict B, int64_t ldb,
                     float* __restrict C, int64_t ldc, int64_t mr, int64_t N, int64_t K) {
  for (int64_t r = 0; r < mr; ++r) {
#pragma omp simd
    for (int64_t j = 0; j < N; ++j) C[r * ldc + j] = 0.0f;
  }
  for (int64_t k = 0; k < K; ++k) {
    const float* __restrict b = B + k * ldb;
    for (int64_t r = 0; r < mr; ++r) {
      const float a = A[r * a_row + k * a_k];
      float* __restrict c = C + r * ldc;
#pragma omp simd
      for (int64_t j = 0; j < N; ++j) c[j] += a * b[j];
    }
  }
}

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

extern "C" void bmm_gelu_rmsnorm_bmm(const float* __restrict X, const float* __restrict W1,
                                     const float* __restrict gamma, const float* __restrict W2, float* __restrict Y,
                                     int64_t batch, int64_t M, int64_t K, int64_t H, int64_t N) {
  const int64_t blocks = (M + kRowBlock - 1) / kRowBlock;
  const float inv_h = 1.0f / static_cast<float>(H);
#pragma omp parallel
  {
    float* __restrict u = static_cast<float*>(std::malloc(sizeof(float) * kRowBlock * H));
#pragma omp for schedule(dynamic, 2)
    for (int64_t t = 0; t < batch * blocks; ++t) {
      const int64_t b = t / blocks;
      const int64_t i0 = (t % blocks) * kRowBlock;
      const int64_t mr = M - i0 < kRowBlock ? M - i0 : kRowBlock;
      GemmRows(X + b * M * K + i0 * K, K, 1, W1 + b * K * H, H, u, H, mr, H, K);
      for (int64_t r = 0; r < mr; ++r) {
        float* __restrict ur = u + r * H;
        float sq = 0.0f;
#pragma omp simd reduction(+ : sq)
        for (int64_t h = 0; h < H; ++h) {
          const float g = 0.5f * ur[h] * (1.0f + Erf(ur[h] * 0.70710678f));
          ur[h] = g;
          sq += g * g;
        }
        const float inv_rms = 1.0f / std::sqrt(sq * inv_h + 1e-6f);
#pragma omp simd
        for (int64_t h = 0; h < H; ++h) ur[h] = ur[h] * inv_rms * gamma[h];
      }
      GemmRows(u, H, 1, W2 + b * H * N, N, Y + b * M * N + i0 * N, N, mr, N, H);
    }
    std::free(u);
  }
}
