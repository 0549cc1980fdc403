// matmul, fast: the GotoBLAS/BLIS scheme. C is computed in KC-deep slices;
// for each slice a KC x NC panel of B is packed into NR-wide strips (shared by
// all threads) and each thread packs MC x KC blocks of A into MR-tall strips,
// then a register-blocked MR x NR micro-kernel (AVX-512 FMA: 2 x 16 floats
// wide, MR rows, 2*MR accumulators) runs over the packed data, which stays in
// L1 (B strip) and L2 (A block). Blocks of A rows are shared out to OpenMP
// threads dynamically. Edges are zero-padded in the packed copies, so the
// micro-kernel always runs full tiles; partial tiles are written through a
// small buffer. Without AVX-512 a portable loop with the same blocking is used.
#include <cstdint>
#include <cstdlib>
#include <cstring>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace {

constexpr int64_t kMR = 12;    // rows of a micro-tile
constexpr int64_t kNR = 32;    // columns of a micro-tile (two 16-float vectors)
constexpr int64_t kKC = 256;   // depth of a slice: B strip = 32 KiB, A strip = 12 KiB
constexpr int64_t kMC = 96;    // rows of an A block: 96 KiB packed, in L2
constexpr int64_t kNC = 2048;  // columns of a B panel: 2 MiB packed

inline int64_t Min(int64_t a, int64_t b) { return a < b ? a : b; }
inline int64_t RoundUp(int64_t a, int64_t b) { return (a + b - 1) / b * b; }

// Packs B[0:kc, 0:nc] (row stride ldb) into strips of kNR columns: strip s
// holds kc rows of 32 consecutive floats. Columns past nc are zero.
void PackBStrip(const float* b, int64_t ldb, int64_t kc, int64_t nr, float* out) {
  for (int64_t k = 0; k < kc; ++k) {
    const float* row = b + k * ldb;
    float* dst = out + k * kNR;
    int64_t j = 0;
    for (; j < nr; ++j) dst[j] = row[j];
    for (; j < kNR; ++j) dst[j] = 0.0f;
  }
}

// Packs A[0:mc, 0:kc] (row stride lda) into strips of kMR rows, k-major:
// strip s holds, for each k, the kMR values A[s*kMR + 0..kMR-1][k]. Rows past
// mc are zero.
void PackA(const float* a, int64_t lda, int64_t mc, int64_t kc, float* out) {
  for (int64_t i0 = 0; i0 < mc; i0 += kMR) {
    const int64_t mr = Min(kMR, mc - i0);
    float* strip = out + i0 * kc;
    for (int64_t k = 0; k < kc; ++k) {
      float* dst = strip + k * kMR;
      int64_t i = 0;
      for (; i < mr; ++i) dst[i] = a[(i0 + i) * lda + k];
      for (; i < kMR; ++i) dst[i] = 0.0f;
    }
  }
}

// tile (kMR x kNR) = sum over k of a-strip x b-strip. Not inlined: inside
// the OpenMP region GCC would otherwise wrap the intrinsics (not declared
// nothrow) in a must-not-throw region and pull in the C++ personality
// routine (__gxx_personality_v0); the kernel needs no C++ runtime at all.
__attribute__((noinline)) void MicroKernel(int64_t kc, const float* __restrict a, const float* __restrict b,
                                           float* __restrict tile) {
#if defined(__AVX512F__)
  __m512 acc0[kMR], acc1[kMR];
#pragma GCC unroll 12
  for (int i = 0; i < kMR; ++i) acc0[i] = acc1[i] = _mm512_setzero_ps();
  for (int64_t k = 0; k < kc; ++k) {
    const __m512 b0 = _mm512_load_ps(b + k * kNR);
    const __m512 b1 = _mm512_load_ps(b + k * kNR + 16);
#pragma GCC unroll 12
    for (int i = 0; i < kMR; ++i) {
      const __m512 av = _mm512_set1_ps(a[k * kMR + i]);
      acc0[i] = _mm512_fmadd_ps(av, b0, acc0[i]);
      acc1[i] = _mm512_fmadd_ps(av, b1, acc1[i]);
    }
  }
#pragma GCC unroll 12
  for (int i = 0; i < kMR; ++i) {
    _mm512_store_ps(tile + i * kNR, acc0[i]);
    _mm512_store_ps(tile + i * kNR + 16, acc1[i]);
  }
#else
  for (int64_t i = 0; i < kMR * kNR; ++i) tile[i] = 0.0f;
  for (int64_t k = 0; k < kc; ++k) {
    for (int64_t i = 0; i < kMR; ++i) {
      const float av = a[k * kMR + i];
#pragma omp simd
      for (int64_t j = 0; j < kNR; ++j) tile[i * kNR + j] += av * b[k * kNR + j];
    }
  }
#endif
}

// C[0:mr, 0:nr] (row stride ldc) = tile, or += tile when `accumulate`.
inline void StoreTile(const float* __restrict tile, int64_t mr, int64_t nr, float* __restrict c, int64_t ldc,
                      bool accumulate) {
  for (int64_t i = 0; i < mr; ++i) {
    float* row = c + i * ldc;
    const float* t = tile + i * kNR;
    if (accumulate) {
#pragma omp simd
      for (int64_t j = 0; j < nr; ++j) row[j] += t[j];
    } else {
#pragma omp simd
      for (int64_t j = 0; j < nr; ++j) row[j] = t[j];
    }
  }
}

}  // namespace

extern "C" void matmul(const float* A, const float* B, float* C, int64_t M, int64_t N, int64_t K) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    std::memset(C, 0, sizeof(float) * M * N);
    return;
  }
  const int64_t nc_max = RoundUp(Min(N, kNC), kNR);
  float* b_pack = static_cast<float*>(std::aligned_alloc(64, sizeof(float) * kKC * nc_max));
#pragma omp parallel
  {
    float* a_pack = static_cast<float*>(std::aligned_alloc(64, sizeof(float) * kMC * kKC));
    alignas(64) float tile[kMR * kNR];
    for (int64_t jc = 0; jc < N; jc += kNC) {
      const int64_t nc = Min(kNC, N - jc);
      for (int64_t pc = 0; pc < K; pc += kKC) {
        const int64_t kc = Min(kKC, K - pc);
        const bool accumulate = pc > 0;
#pragma omp for schedule(static)
        for (int64_t jr = 0; jr < nc; jr += kNR) {
          PackBStrip(B + pc * N + jc + jr, N, kc, Min(kNR, nc - jr), b_pack + jr * kc);
        }
#pragma omp for schedule(dynamic, 1)
        for (int64_t ic = 0; ic < M; ic += kMC) {
          const int64_t mc = Min(kMC, M - ic);
          PackA(A + ic * K + pc, K, mc, kc, a_pack);
          for (int64_t jr = 0; jr < nc; jr += kNR) {
            const int64_t nr = Min(kNR, nc - jr);
            for (int64_t ir = 0; ir < mc; ir += kMR) {
              MicroKernel(kc, a_pack + ir * kc, b_pack + jr * kc, tile);
              StoreTile(tile, Min(kMR, mc - ir), nr, C + (ic + ir) * N + jc + jr, N, accumulate);
            }
          }
        }
      }
    }
    std::free(a_pack);
  }
  std::free(b_pack);
}
