// fm_interaction, fast: batch entries shared out to OpenMP threads; per
// entry T = X^T Y is built row by row of Y (T[d][:] += X[m][d] * Y[m][:],
// m ascending: vectorised multiply-adds, T in L1) and then Z = X T the same
// way (Z[n][:] += X[n][d] * T[d][:], d ascending). Each thread has its own
// D x E scratch for T.
#include <cstdint>
#include <cstdlib>

extern "C" void fm_interaction(const float* __restrict X, const float* __restrict Y, float* __restrict Z, int64_t batch,
                               int64_t N, int64_t D, int64_t E) {
#pragma omp parallel
  {
    float* __restrict T = static_cast<float*>(std::malloc(sizeof(float) * (D * E > 0 ? D * E : 1)));
#pragma omp for schedule(dynamic, 1)
    for (int64_t b = 0; b < batch; ++b) {
      const float* __restrict x = X + b * N * D;
      const float* __restrict y = Y + b * N * E;
      float* __restrict z = Z + b * N * E;
      for (int64_t i = 0; i < D * E; ++i) T[i] = 0.0f;
      for (int64_t m = 0; m < N; ++m) {
        for (int64_t d = 0; d < D; ++d) {
          const float a = x[m * D + d];
#pragma omp simd
          for (int64_t e = 0; e < E; ++e) T[d * E + e] += a * y[m * E + e];
        }
      }
      for (int64_t n = 0; n < N; ++n) {
        float* __restrict zr = z + n * E;
#pragma omp simd
        for (int64_t e = 0; e < E; ++e) zr[e] = 0.0f;
        for (int64_t d = 0; d < D; ++d) {
          const float a = x[n * D + d];
#pragma omp simd
          for (int64_t e = 0; e < E; ++e) zr[e] += a * T[d * E + e];
        }
      }
    }
    std::free(T);
  }
}
