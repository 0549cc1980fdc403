// matmul, tiled (CUDA): C = A * B, row-major float32. Each 256-thread block
// computes a 64x64 tile of C; each thread a 4x4 sub-tile held in registers.
// A and B tiles of depth 16 are staged in shared memory (A stored transposed
// so both are read as rows), all in plain FP32 FMAs: no tensor cores, no
// TF32, so it meets the task's float32 tolerance. Edges of odd shapes are
// zero-padded on load and masked on store.
#include <cuda_runtime.h>

#include <cstdint>

namespace {

constexpr int kTile = 64;   // C tile per block: kTile x kTile
constexpr int kDepth = 16;  // K step staged in shared memory
constexpr int kPer = 4;     // C values per thread in each dimension

__global__ void __launch_bounds__(256) TiledGemm(const float* __restrict__ A, const float* __restrict__ B,
                                                 float* __restrict__ C, int64_t M, int64_t N, int64_t K) {
  __shared__ float As[kDepth][kTile + 4];  // As[k][m]: A tile transposed
  __shared__ float Bs[kDepth][kTile + 4];  // Bs[k][n]
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int64_t row0 = static_cast<int64_t>(blockIdx.y) * kTile;
  const int64_t col0 = static_cast<int64_t>(blockIdx.x) * kTile;
  float acc[kPer][kPer] = {};
  for (int64_t k0 = 0; k0 < K; k0 += kDepth) {
    // 64x16 of A and 16x64 of B: 1024 values each, 4 per thread.
    for (int i = threadIdx.x; i < kTile * kDepth; i += 256) {
      const int am = i / kDepth, ak = i % kDepth;  // A: consecutive threads walk k
      const int64_t ar = row0 + am, ac = k0 + ak;
      As[ak][am] = (ar < M && ac < K) ? A[ar * K + ac] : 0.0f;
      const int bk = i / kTile, bn = i % kTile;  // B: consecutive threads walk n
      const int64_t br = k0 + bk, bc = col0 + bn;
      Bs[bk][bn] = (br < K && bc < N) ? B[br * N + bc] : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kDepth; ++k) {
      float a[kPer], b[kPer];
#pragma unroll
      for (int i = 0; i < kPer; ++i) a[i] = As[k][ty + 16 * i];
#pragma unroll
      for (int j = 0; j < kPer; ++j) b[j] = Bs[k][tx + 16 * j];
#pragma unroll
      for (int i = 0; i < kPer; ++i) {
#pragma unroll
        for (int j = 0; j < kPer; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int64_t r = row0 + ty + 16 * i;
    if (r >= M) continue;
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      const int64_t c = col0 + tx + 16 * j;
      if (c < N) C[r * N + c] = acc[i][j];
    }
  }
}

}  // namespace

extern "C" void matmul(const float* A, const float* B, float* C, int64_t M, int64_t N, int64_t K) {
  if (M <= 0 || N <= 0) return;
  const dim3 grid(static_cast<unsigned>((N + kTile - 1) / kTile), static_cast<unsigned>((M + kTile - 1) / kTile));
  TiledGemm<<<grid, 256>>>(A, B, C, M, N, K);
}
