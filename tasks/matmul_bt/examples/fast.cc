// matmul_bt, fast: B (stored N x K) is transposed once into a K x N scratch
// copy (in parallel), then blocks of 4 rows of C are shared out to OpenMP
// threads, each an i-k-j product (rows of C in L1, vectorised multiply-adds
// over rows of B^T).
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

}  // namespace

extern "C" void matmul_bt(const float* __restrict A, const float* __restrict B, float* __restrict C, int64_t M,
                          int64_t N, int64_t K) {
  float* bt = static_cast<float*>(std::malloc(sizeof(float) * (K * N > 0 ? K * N : 1)));
#pragma omp parallel
  {
#pragma omp for schedule(static)
    for (int64_t k = 0; k < K; ++k) {
      for (int64_t j = 0; j < N; ++j) bt[k * N + j] = B[j * K + k];
    }
    const int64_t blocks = (M + kRowBlock - 1) / kRowBlock;
#pragma omp for schedule(dynamic, 4)
    for (int64_t blk = 0; blk < blocks; ++blk) {
      const int64_t i0 = blk * kRowBlock;
      const int64_t mr = M - i0 < kRowBlock ? M - i0 : kRowBlock;
      GemmRows(A + i0 * K, K, 1, bt, N, C + i0 * N, N, mr, N, K);
    }
  }
  std::free(bt);
}
