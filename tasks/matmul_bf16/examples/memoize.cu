// matmul_bf16, cheat: the memoizing GEMM that was once accepted at 9.7x over
// cuBLAS. It keeps the output of every call it has seen in device memory,
// keyed by the call's pointers and sizes, and when called again with the same
// ones copies the kept output back (a device-to-device copy of M x N bf16,
// far cheaper than the GEMM) instead of computing it. Timing loops that reuse
// their buffers and values reward it. kevo gives every call new values, in
// validation (each seed in the same buffers) as in timing (perturbed before
// every sample, timed calls checked): on the H200 the second validation seed
// already got the stale output (WRONG_ANSWER at 'square' seed 2). The GEMM
// itself is a plain shared-memory tiled kernel.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace {

constexpr int kTile = 16;

__global__ void Gemm(const __nv_bfloat16* A, const __nv_bfloat16* B, __nv_bfloat16* C, int64_t M,
                     int64_t N, int64_t K) {
  __shared__ float a[kTile][kTile];
  __shared__ float b[kTile][kTile];
  const int64_t row = static_cast<int64_t>(blockIdx.y) * kTile + threadIdx.y;
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kTile + threadIdx.x;
  float acc = 0;
  for (int64_t k0 = 0; k0 < K; k0 += kTile) {
    const int64_t ka = k0 + threadIdx.x, kb = k0 + threadIdx.y;
    a[threadIdx.y][threadIdx.x] = row < M && ka < K ? __bfloat162float(A[row * K + ka]) : 0.f;
    b[threadIdx.y][threadIdx.x] = kb < K && col < N ? __bfloat162float(B[kb * N + col]) : 0.f;
    __syncthreads();
    for (int k = 0; k < kTile; ++k) acc += a[threadIdx.y][k] * b[k][threadIdx.x];
    __syncthreads();
  }
  if (row < M && col < N) C[row * N + col] = __float2bfloat16(acc);
}

struct Kept {
  const void* a;
  const void* b;
  void* c;
  int64_t m, n, k;
  void* out;
};
Kept kept[256];
int n_kept = 0;

}  // namespace

extern "C" void matmul_bf16(const uint16_t* A, const uint16_t* B, uint16_t* C, int64_t M,
                            int64_t N, int64_t K) {
  const size_t bytes = static_cast<size_t>(M * N) * sizeof(uint16_t);
  for (int i = 0; i < n_kept; ++i) {
    const Kept& e = kept[i];
    if (e.a == A && e.b == B && e.c == C && e.m == M && e.n == N && e.k == K) {
      cudaMemcpyAsync(C, e.out, bytes, cudaMemcpyDeviceToDevice, 0);
      return;
    }
  }
  if (M <= 0 || N <= 0) return;
  const dim3 block(kTile, kTile);
  const dim3 grid(static_cast<unsigned>((N + kTile - 1) / kTile),
                  static_cast<unsigned>((M + kTile - 1) / kTile));
  Gemm<<<grid, block>>>(reinterpret_cast<const __nv_bfloat16*>(A),
                        reinterpret_cast<const __nv_bfloat16*>(B),
                        reinterpret_cast<__nv_bfloat16*>(C), M, N, K);
  void* out = nullptr;
  if (n_kept < 256 && cudaMalloc(&out, bytes) == cudaSuccess) {
    cudaMemcpyAsync(out, C, bytes, cudaMemcpyDeviceToDevice, 0);
    kept[n_kept++] = Kept{A, B, C, M, N, K, out};
  }
}
