// Reference for conv2d: the direct seven-deep loop nest, one float32
// accumulator per output pixel, summing over channels, then kernel rows,
// then kernel columns.
#include <cstdint>

extern "C" void conv2d(const float* x, const float* w, float* y, int64_t N, int64_t C, int64_t H, int64_t W, int64_t F,
                       int64_t KH, int64_t KW) {
  const int64_t OH = H - KH + 1;
  const int64_t OW = W - KW + 1;
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t f = 0; f < F; ++f) {
      for (int64_t i = 0; i < OH; ++i) {
        for (int64_t j = 0; j < OW; ++j) {
          float sum = 0.0f;
          for (int64_t c = 0; c < C; ++c) {
            for (int64_t p = 0; p < KH; ++p) {
              for (int64_t q = 0; q < KW; ++q) {
                sum += x[((n * C + c) * H + i + p) * W + j + q] * w[((f * C + c) * KH + p) * KW + q];
              }
            }
          }
          y[((n * F + f) * OH + i) * OW + j] = sum;
        }
      }
    }
  }
}
