// conv2d, fast: (image, filter) planes shared out to OpenMP threads; each
// output plane (in L1/L2) is accumulated as a sum of shifted input rows
// times one weight, for every channel and kernel offset in the reference's
// order (c, p, q ascending): y[i][0:OW] += w[f][c][p][q] * x[c][i+p][q:q+OW],
// a vectorised multiply-add over each output row.
#include <cstdint>

extern "C" void conv2d(const float* __restrict x, const float* __restrict w, float* __restrict y, int64_t N, int64_t C,
                       int64_t H, int64_t W, int64_t F, int64_t KH, int64_t KW) {
  const int64_t OH = H - KH + 1;
  const int64_t OW = W - KW + 1;
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t nf = 0; nf < N * F; ++nf) {
    const int64_t n = nf / F, f = nf % F;
    float* __restrict out = y + nf * OH * OW;
    for (int64_t t = 0; t < OH * OW; ++t) out[t] = 0.0f;
    for (int64_t c = 0; c < C; ++c) {
      const float* __restrict in = x + (n * C + c) * H * W;
      const float* __restrict wk = w + (f * C + c) * KH * KW;
      for (int64_t p = 0; p < KH; ++p) {
        for (int64_t q = 0; q < KW; ++q) {
          const float wv = wk[p * KW + q];
          for (int64_t i = 0; i < OH; ++i) {
            const float* __restrict src = in + (i + p) * W + q;
            float* __restrict dst = out + i * OW;
#pragma omp simd
            for (int64_t j = 0; j < OW; ++j) dst[j] += wv * src[j];
          }
        }
      }
    }
  }
}
