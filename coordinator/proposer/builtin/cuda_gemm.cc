// Recipes "cuda_gemm_wgmma" and "cuda_gemm_mma" (nvidia): C = A * B for
// row-major bf16 or fp16 matrices on the tensor cores, float32 accumulation,
// C in the input type or float32; hints {pattern: gemm, a, b, c, m, n, k} as
// for the CPU recipe.
//
// cuda_gemm_wgmma is Hopper's path (compute capability 9.0, built for
// sm_90a): TMA copies 64-deep tiles of A and B into 128-byte-swizzled shared
// memory, a `stages`-deep mbarrier pipeline hands them from a producer
// warpgroup to two consumer warpgroups that multiply with wgmma.mma_async
// (m64nNk16, B read transposed from its row-major tile), accumulators in
// registers. `schedule` persistent keeps one block an SM walking the tiles
// (the next tile's loads overlap the last one's stores); `cluster` 2 pairs
// blocks one above the other that share B's tile through TMA multicast;
// `epilogue` tma writes C to a swizzled buffer in shared memory that TMA
// stores while the next tile's wgmmas run.
// Tensor maps come from the driver's cuTensorMapEncodeTiled, reached through
// cudaGetDriverEntryPointByVersion.
//
// cuda_gemm_mma runs on any tensor-core GPU: each block computes a
// tile_m x tile_n tile of C from a `stages`-deep cp.async pipeline of A and B
// tiles (tile_k deep) in shared memory (rows padded by 16 bytes, so ldmatrix
// reads are free of bank conflicts); each warp owns a warp_tile of C held in
// registers and multiplies with mma.sync.m16n8k16 fed by ldmatrix (B
// transposed on the way).
//
// Shapes whose rows are not whole 16-byte chunks (K or N not a multiple of
// 8), misaligned pointers, and (wgmma) other GPUs take a plain
// one-thread-per-output kernel.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

#include "coordinator/proposer/builtin/codegen.h"
#include "coordinator/proposer/builtin/gpu_codegen.h"
#include "coordinator/proposer/builtin/recipe.h"

namespace kevo::proposer {
namespace {

// bf16 or fp16 A and B; C of their type or f32.
bool BindMmaGemm(const v1::Task& task, GemmShapes* g) {
  if (!BindGemmShapes(task, g) || (g->a_dtype != v1::BF16 && g->a_dtype != v1::F16)) return false;
  return g->c_dtype == g->a_dtype || g->c_dtype == v1::F32;
}

std::pair<int64_t, int64_t> Dims(const std::string& v) {
  std::vector<std::string> parts = absl::StrSplit(v, 'x');
  return {std::stoll(parts[0]), std::stoll(parts[1])};
}

constexpr char kMmaKernels[] = R"(
__device__ __forceinline__ void kevo_cp_async16(void* smem, const void* gmem, bool full) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(full ? 16 : 0));
}
__device__ __forceinline__ void kevo_cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void kevo_cp_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }
__device__ __forceinline__ void kevo_ldsm_x4(unsigned (&r)[4], const void* smem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(s));
}
__device__ __forceinline__ void kevo_ldsm_x4_t(unsigned (&r)[4], const void* smem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(s));
}
__device__ __forceinline__ void kevo_mma(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.MMA_TYPE.MMA_TYPE.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

constexpr int kWarpsM = kBM / kWM, kWarpsN = kBN / kWN;
constexpr int kThreads = kWarpsM * kWarpsN * 32;
constexpr int kMI = kWM / 16, kNI = kWN / 8;
constexpr int kAStride = kBK + 8, kBStride = kBN + 8;  // elements; +16 bytes a row
constexpr int kAStage = kBM * kAStride, kBStage = kBK * kBStride;
constexpr size_t kSmemBytes = static_cast<size_t>(kStages) * (kAStage + kBStage) * sizeof(T);

// Needs K % 8 == 0, N % 8 == 0 and 16-byte aligned A, B (whole 16-byte chunks).
__global__ void __launch_bounds__(kThreads) kevo_gemm_mma(const T* __restrict__ A, const T* __restrict__ B,
                                                          OutT* __restrict__ C, int M, int N, int K) {
  extern __shared__ __align__(16) unsigned char kevo_smem[];
  T* As = reinterpret_cast<T*>(kevo_smem);
  T* Bs = As + kStages * kAStage;
  const int bm0 = blockIdx.y * kBM, bn0 = blockIdx.x * kBN;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wm0 = (warp / kWarpsN) * kWM, wn0 = (warp % kWarpsN) * kWN;
  float acc[kMI][kNI][4];
#pragma unroll
  for (int i = 0; i < kMI; ++i)
#pragma unroll
    for (int j = 0; j < kNI; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.0f;
  const int k_tiles = (K + kBK - 1) / kBK;

  auto load_tile = [&](int stage, int kt) {
    const int k0 = kt * kBK;
    T* as = As + stage * kAStage;
#pragma unroll
    for (int c = threadIdx.x; c < kBM * kBK / 8; c += kThreads) {
      const int r = c / (kBK / 8), col = (c % (kBK / 8)) * 8;
      const int gr = bm0 + r, gk = k0 + col;
      const bool in = gr < M && gk < K;
      kevo_cp_async16(as + r * kAStride + col, in ? A + static_cast<size_t>(gr) * K + gk : A, in);
    }
    T* bs = Bs + stage * kBStage;
#pragma unroll
    for (int c = threadIdx.x; c < kBK * kBN / 8; c += kThreads) {
      const int r = c / (kBN / 8), col = (c % (kBN / 8)) * 8;
      const int gk = k0 + r, gn = bn0 + col;
      const bool in = gk < K && gn < N;
      kevo_cp_async16(bs + r * kBStride + col, in ? B + static_cast<size_t>(gk) * N + gn : B, in);
    }
  };

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < k_tiles) load_tile(s, s);
    kevo_cp_commit();
  }
  for (int kt = 0; kt < k_tiles; ++kt) {
    kevo_cp_wait<kStages - 2>();
    __syncthreads();  // tile kt landed; every warp is done with tile kt - 1
    const int next = kt + kStages - 1;
    if (next < k_tiles) load_tile(next % kStages, next);
    kevo_cp_commit();
    const T* as = As + (kt % kStages) * kAStage;
    const T* bs = Bs + (kt % kStages) * kBStage;
#pragma unroll
    for (int kk = 0; kk < kBK; kk += 16) {
      unsigned af[kMI][4], bf[kNI][2];
#pragma unroll
      for (int i = 0; i < kMI; ++i) {
        kevo_ldsm_x4(af[i], as + (wm0 + i * 16 + lane % 16) * kAStride + kk + (lane / 16) * 8);
      }
#pragma unroll
      for (int j = 0; j < kNI; j += 2) {
        unsigned r[4];
        kevo_ldsm_x4_t(r, bs + (kk + lane % 16) * kBStride + wn0 + j * 8 + (lane / 16) * 8);
        bf[j][0] = r[0];
        bf[j][1] = r[1];
        bf[j + 1][0] = r[2];
        bf[j + 1][1] = r[3];
      }
#pragma unroll
      for (int i = 0; i < kMI; ++i)
#pragma unroll
        for (int j = 0; j < kNI; ++j) kevo_mma(acc[i][j], af[i], bf[j][0], bf[j][1]);
    }
  }
  kevo_cp_wait<0>();
#pragma unroll
  for (int i = 0; i < kMI; ++i) {
#pragma unroll
    for (int j = 0; j < kNI; ++j) {
      const int row = bm0 + wm0 + i * 16 + lane / 4;
      const int col = bn0 + wn0 + j * 8 + (lane % 4) * 2;  // N % 8 == 0: col + 1 < N too
      if (col >= N) continue;
      if (row < M) kevo_store2(C + static_cast<size_t>(row) * N + col, acc[i][j][0], acc[i][j][1]);
      if (row + 8 < M) kevo_store2(C + static_cast<size_t>(row + 8) * N + col, acc[i][j][2], acc[i][j][3]);
    }
  }
}

)";

// What both recipes fall back to: any shape, one thread per output, float32
// accumulation; and the alignment test of the fast paths.
constexpr char kPlainKernel[] = R"(
// Any shape: one thread per output, float32 accumulation.
__global__ void kevo_gemm_plain(const T* __restrict__ A, const T* __restrict__ B, OutT* __restrict__ C,
                                int64_t M, int64_t N, int64_t K) {
  const int64_t col = static_cast<int64_t>(blockIdx.x) * 16 + threadIdx.x;
  const int64_t row = static_cast<int64_t>(blockIdx.y) * 16 + threadIdx.y;
  if (row >= M || col >= N) return;
  float s = 0.0f;
  for (int64_t k = 0; k < K; ++k) s += kevo_to_float(A[row * K + k]) * kevo_to_float(B[k * N + col]);
  C[row * N + col] = kevo_from_float(s);
}

bool kevo_aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace
)";

// Hopper's path (sm_90a). One producer warpgroup (one thread issues the TMA
// loads) and two consumer warpgroups (wgmma); `kStages` shared-memory stages
// handed back and forth through mbarriers: full[s] completes when stage s's
// bytes landed, empty[s] when every consumer warp (of every block of the
// cluster) is done reading it. Tiles are 64 elements (128 bytes) deep in K,
// written by TMA with the 128-byte swizzle that the wgmma descriptors name.
//
// A block walks "units" of kCluster tiles of C that lie one above the other
// (the same columns): unit u is column tile u % tiles_n, row tiles
// (u / tiles_n) * kCluster + rank. One block a unit, or (kPersistent) one
// block an SM taking every gridDim-th unit, so the producer fills the next
// tile's stages while the consumers store the last one. Where kCluster is 2
// the two blocks of a cluster share B's tile: each loads its own A and half
// of B's 64-column boxes, multicast into both blocks' shared memory.
constexpr char kWgmmaKernels[] = R"(
constexpr int kBK = 64;  // one 128-byte swizzle row of 16-bit elements
constexpr int kConsumers = 2;
constexpr int kThreads = (kConsumers + 1) * 128;
constexpr int kWM = kBM / kConsumers;  // rows of C a consumer warpgroup owns
constexpr int kMI = kWM / 64;          // m64 wgmmas per k-step
constexpr int kAcc = kBN / 2;          // f32 accumulators per thread of one m64nBNk16
constexpr int kAStageBytes = kBM * kBK * 2, kBStageBytes = kBK * kBN * 2;
constexpr int kStageBytes = kAStageBytes + kBStageBytes;
constexpr int kBBoxes = kBN / 64;  // B's tile is loaded in 64-column boxes
static_assert(kBBoxes % kCluster == 0, "each block of a cluster loads as many of B's boxes");
// Arrivals that hand a stage back: one a consumer warp, from every block of the cluster.
constexpr unsigned kEmptyArrivals = kCluster * kConsumers * 4;
// kTmaStore: each consumer writes C through a buffer of kWM x kEpiCols in
// shared memory, in boxes of 64 rows x one 128-byte swizzled row, that TMA
// stores while the next tile's wgmmas run.
constexpr int kBoxCols = 128 / static_cast<int>(sizeof(OutT));
constexpr int kBoxBytes = 64 * 128;
constexpr int kEpiBytes = kTmaStore ? kConsumers * kWM * kEpiCols * static_cast<int>(sizeof(OutT)) : 0;
static_assert(!kTmaStore || (kEpiCols % kBoxCols == 0 && kBN % kEpiCols == 0), "C's buffer holds whole boxes");
// 1 KB of slack to align the stages to the swizzle's 1024-byte atoms, then
// the stages, C's buffers, then full[] and empty[] (8 bytes each).
constexpr size_t kSmemBytes = 1024 + static_cast<size_t>(kStages) * kStageBytes + kEpiBytes + 16 * kStages;

__device__ __forceinline__ unsigned kevo_smem_u32(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void kevo_mbar_init(unsigned bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void kevo_mbar_expect_tx(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
// Arrives on the barrier at offset `bar` of block `cta` of the cluster (this
// block's own where kCluster is 1). No .release.cluster: its fence stalled the
// consumer warps (the stage's readers are wgmmas already waited for).
__device__ __forceinline__ void kevo_mbar_arrive_at(unsigned bar, unsigned cta) {
  if (kCluster == 1) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
  } else {
    asm volatile(
        "{\n.reg .b32 remote;\n"
        "mapa.shared::cluster.u32 remote, %0, %1;\n"
        "mbarrier.arrive.shared::cluster.b64 _, [remote];\n}\n"
        ::"r"(bar), "r"(cta) : "memory");
  }
}
// Returns once the phase of parity `parity` of the barrier has completed.
__device__ __forceinline__ void kevo_mbar_wait(unsigned bar, unsigned parity) {
  unsigned done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done) : "r"(bar), "r"(parity) : "memory");
  } while (!done);
}
__device__ __forceinline__ unsigned kevo_cluster_rank() {
  unsigned r = 0;
  if (kCluster > 1) asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
// Every thread of every block of the cluster (of this block where kCluster is 1).
__device__ __forceinline__ void kevo_cluster_sync() {
  if (kCluster == 1) {
    __syncthreads();
  } else {
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
  }
}
// Box (c0 = column, c1 = row) of the 2-D tensor `map` into shared memory,
// completing `bytes` transactions on `bar`.
__device__ __forceinline__ void kevo_tma_load(unsigned dst, const CUtensorMap* map, unsigned bar, int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];\n"
      ::"r"(dst), "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1) : "memory");
}
// The same box into the same offsets of every block of the cluster, each
// block's barrier at offset `bar` completing its bytes.
__device__ __forceinline__ void kevo_tma_load_all(unsigned dst, const CUtensorMap* map, unsigned bar, int c0, int c1) {
  if (kCluster == 1) {
    kevo_tma_load(dst, map, bar, c0, c1);
  } else {
    const unsigned short mask = (1u << kCluster) - 1;
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
        " [%0], [%1, {%3, %4}], [%2], %5;\n"
        ::"r"(dst), "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1), "h"(mask) : "memory");
  }
}
// A shared-memory matrix descriptor, 128-byte swizzle (the byte offsets in
// 16-byte units): K-major tiles (A) step 1024 bytes between 8-row groups;
// MN-major tiles (B) step `lbo` between 64-column swizzle atoms along N and
// 1024 bytes between 8-row groups along K.
__device__ __forceinline__ uint64_t kevo_desc(unsigned addr, unsigned lbo, unsigned sbo) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>(lbo >> 4) << 16) |
         (static_cast<uint64_t>(sbo >> 4) << 32) | (uint64_t{1} << 62);
}
__device__ __forceinline__ void kevo_wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void kevo_wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void kevo_wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Keeps the compiler from moving accumulator accesses across the async wgmmas.
__device__ __forceinline__ void kevo_fence_acc(float (&acc)[kMI][kAcc]) {
#pragma unroll
  for (int i = 0; i < kMI; ++i)
#pragma unroll
    for (int j = 0; j < kAcc; ++j) asm volatile("" : "+f"(acc[i][j])::"memory");
}
// Waits for the 128 threads of consumer warpgroup c (named barrier 1 + c).
__device__ __forceinline__ void kevo_wg_sync(int c) { asm volatile("bar.sync %0, 128;\n" ::"r"(c + 1) : "memory"); }
// Box (c0 = column, c1 = row) of `map` from shared memory at `src`, in this
// thread's bulk group.
__device__ __forceinline__ void kevo_tma_store(const CUtensorMap* map, unsigned src, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\n"
               ::"l"(reinterpret_cast<uint64_t>(map)), "r"(src), "r"(c0), "r"(c1) : "memory");
}
// Stores one consumer's kWM rows of the tile at (m0, n0) through its buffer
// `epi` (shared address; `epi_p` the same bytes generic), kEpiCols columns a
// round; thread 0 of the warpgroup issues the TMA stores and, before a round
// rewrites the buffer, waits until the last round's have read it.
__device__ __forceinline__ void kevo_store_tile_tma(const CUtensorMap* map_c, float (&acc)[kMI][kAcc], unsigned epi,
                                                    unsigned char* epi_p, int c, int m0, int n0, int M, int N) {
  const int tid = threadIdx.x % 128, warp = tid / 32, lane = tid % 32;
  constexpr int kBoxes = kEpiCols / kBoxCols;
#pragma unroll
  for (int r = 0; r < kBN / kEpiCols; ++r) {
    if (tid == 0) asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
    kevo_wg_sync(c);
#pragma unroll
    for (int i = 0; i < kMI; ++i) {
      const int row = warp * 16 + lane / 4;  // of the 64-row box; row + 8 has the same swizzle
#pragma unroll
      for (int jj = 0; jj < kEpiCols / 8; ++jj) {
        const int j = r * (kEpiCols / 8) + jj, col = jj * 8 + (lane % 4) * 2;
        const int byte = (col % kBoxCols) * static_cast<int>(sizeof(OutT));
        unsigned char* box = epi_p + (i * kBoxes + col / kBoxCols) * kBoxBytes + (((byte >> 4) ^ (row & 7)) << 4) + (byte & 15);
        kevo_store2(reinterpret_cast<OutT*>(box + row * 128), acc[i][4 * j], acc[i][4 * j + 1]);
        kevo_store2(reinterpret_cast<OutT*>(box + (row + 8) * 128), acc[i][4 * j + 2], acc[i][4 * j + 3]);
      }
    }
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // the writes, seen by TMA
    kevo_wg_sync(c);
    if (tid == 0) {
#pragma unroll
      for (int i = 0; i < kMI; ++i)
#pragma unroll
        for (int b = 0; b < kBoxes; ++b) {
          const int row0 = m0 + c * kWM + i * 64, col0 = n0 + r * kEpiCols + b * kBoxCols;
          if (row0 < M && col0 < N) kevo_tma_store(map_c, epi + (i * kBoxes + b) * kBoxBytes, col0, row0);
        }
      asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
    }
  }
}
// A consumer warp hands stage `s` back to every block of the cluster (its
// wgmmas reading it are done).
__device__ __forceinline__ void kevo_release(unsigned empty, int s) {
  __syncwarp();
  if (threadIdx.x % 32 == 0) {
#pragma unroll
    for (int cta = 0; cta < kCluster; ++cta) kevo_mbar_arrive_at(empty + 8 * s, cta);
  }
}

// Needs K > 0, K % 8 == 0, N % 8 == 0 and 16-byte aligned A, B, C (what TMA
// asks of the row strides and bases); partial tiles are TMA's zero fill.
__global__ void __launch_bounds__(kThreads, 1) kevo_gemm_wgmma(const __grid_constant__ CUtensorMap map_a,
                                                               const __grid_constant__ CUtensorMap map_b,
                                                               const __grid_constant__ CUtensorMap map_c,
                                                               OutT* __restrict__ C, int M, int N, int K) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ unsigned char kevo_smem[];
  const unsigned base = (kevo_smem_u32(kevo_smem) + 1023u) & ~1023u;
  const unsigned epi = base + kStages * kStageBytes, full = epi + kEpiBytes, empty = full + 8 * kStages;
  const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;
  const int rank = static_cast<int>(kevo_cluster_rank());
  const int tiles_n = (N + kBN - 1) / kBN;
  const int units = ((M + kBM - 1) / kBM + kCluster - 1) / kCluster * tiles_n;
  const int first = blockIdx.x / kCluster, step = gridDim.x / kCluster;
  const int k_tiles = (K + kBK - 1) / kBK;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      kevo_mbar_init(full + 8 * s, 1);
      kevo_mbar_init(empty + 8 * s, kEmptyArrivals);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  kevo_cluster_sync();  // no block loads into, or arrives on, another's barriers before they are made
  if (wg == 0) {  // producer
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
    if (tid == 0) {
      int it = 0;  // stage uses so far, across this block's tiles
      for (int u = first; u < units; u += step) {
        const int m0 = ((u / tiles_n) * kCluster + rank) * kBM, n0 = (u % tiles_n) * kBN;
        for (int kt = 0; kt < k_tiles; ++kt, ++it) {
          const int s = it % kStages;
          if (it >= kStages) kevo_mbar_wait(empty + 8 * s, ((it / kStages) - 1) & 1);
          const unsigned a = base + s * kStageBytes, b = a + kAStageBytes, bar = full + 8 * s;
          // Out-of-bounds parts of a box count too (zero-filled). A cluster's row tile
          // wholly past M loads no A: its rows are never stored.
          kevo_mbar_expect_tx(bar, m0 < M ? kStageBytes : kBStageBytes);
          if (m0 < M) kevo_tma_load(a, &map_a, bar, kt * kBK, m0);
#pragma unroll
          for (int j = rank; j < kBBoxes; j += kCluster) {
            kevo_tma_load_all(b + j * (kBK * 128), &map_b, bar, n0 + 64 * j, kt * kBK);
          }
        }
      }
    }
    __syncwarp();
  } else {  // consumer warpgroup c: rows [c * kWM, (c + 1) * kWM) of each tile
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
    const int c = wg - 1;
    const int warp = tid / 32, lane = tid % 32;
    int it = 0;
    for (int u = first; u < units; u += step) {
      const int m0 = ((u / tiles_n) * kCluster + rank) * kBM, n0 = (u % tiles_n) * kBN;
      float acc[kMI][kAcc];
#pragma unroll
      for (int i = 0; i < kMI; ++i)
#pragma unroll
        for (int j = 0; j < kAcc; ++j) acc[i][j] = 0.0f;
      for (int kt = 0; kt < k_tiles; ++kt, ++it) {
        const int s = it % kStages;
        kevo_mbar_wait(full + 8 * s, (it / kStages) & 1);
        const unsigned a = base + s * kStageBytes + c * kWM * 128, b = base + s * kStageBytes + kAStageBytes;
        kevo_fence_acc(acc);
        kevo_wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < kBK / 16; ++kk) {
          // A: 16 elements of K are 32 bytes along a swizzled row; B: 16 rows of K are two 1024-byte groups.
          const uint64_t db = kevo_desc(b + kk * 2048, kBK * 128, 1024);
#pragma unroll
          for (int i = 0; i < kMI; ++i) kevo_wgmma(acc[i], kevo_desc(a + i * 64 * 128 + kk * 32, 16, 1024), db);
        }
        kevo_wgmma_commit();
        kevo_fence_acc(acc);
        kevo_wgmma_wait<1>();  // the previous stage's wgmmas are done: hand it back
        if (kt > 0) kevo_release(empty, (it - 1) % kStages);
      }
      kevo_wgmma_wait<0>();
      kevo_fence_acc(acc);
      kevo_release(empty, (it - 1) % kStages);
      // Accumulator layout of m64nNk16: warp w holds rows 16w..16w+15; value
      // 4j+r of a thread is row lane/4 (+8 for r >= 2), column 8j + 2(lane%4) + r%2.
      if (kTmaStore) {
        const unsigned mine = epi + c * (kEpiBytes / kConsumers);
        kevo_store_tile_tma(&map_c, acc, mine, kevo_smem + (mine - kevo_smem_u32(kevo_smem)), c, m0, n0, M, N);
        continue;
      }
#pragma unroll
      for (int i = 0; i < kMI; ++i) {
        const int row = m0 + c * kWM + i * 64 + warp * 16 + lane / 4;
#pragma unroll
        for (int j = 0; j < kBN / 8; ++j) {
          const int col = n0 + j * 8 + (lane % 4) * 2;  // N % 8 == 0: col + 1 < N too
          if (col >= N) continue;
          if (row < M) kevo_store2(C + static_cast<size_t>(row) * N + col, acc[i][4 * j], acc[i][4 * j + 1]);
          if (row + 8 < M) kevo_store2(C + static_cast<size_t>(row + 8) * N + col, acc[i][4 * j + 2], acc[i][4 * j + 3]);
        }
      }
    }
    // The buffer stays until TMA has read it.
    if (kTmaStore && tid == 0) asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
  }
  // No block of a cluster leaves while another may still arrive on its barriers.
  if (kCluster > 1) kevo_cluster_sync();
#else
  __trap();  // built without sm_90a; the host side launches this only on compute capability 9.0
#endif
}

typedef CUresult (*kevo_encode_tiled_fn)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                         const cuuint64_t*, const cuuint32_t*, const cuuint32_t*,
                                         CUtensorMapInterleave, CUtensorMapSwizzle, CUtensorMapL2promotion,
                                         CUtensorMapFloatOOBfill);

// `blocks` blocks of kThreads in clusters of kCluster, as the occupancy
// query and cudaLaunchKernelEx take them (not copied: config points at attr).
struct KevoClusterLaunch {
  cudaLaunchAttribute attr = {};
  cudaLaunchConfig_t config = {};
  explicit KevoClusterLaunch(unsigned blocks) {
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = kCluster;
    attr.val.clusterDim.y = attr.val.clusterDim.z = 1;
    config.gridDim = dim3(blocks);
    config.blockDim = dim3(kThreads);
    config.dynamicSmemBytes = kSmemBytes;
    config.attrs = &attr;
    config.numAttrs = 1;
  }
  KevoClusterLaunch(const KevoClusterLaunch&) = delete;
};

// The driver's cuTensorMapEncodeTiled through the runtime (the candidate
// links no libcuda); null where the driver has none.
static kevo_encode_tiled_fn kevo_encode_tiled() {
  static kevo_encode_tiled_fn fn = nullptr;
  static bool looked = false;
  if (!looked) {
    looked = true;
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) == cudaSuccess &&
        q == cudaDriverEntryPointSuccess) {
      fn = reinterpret_cast<kevo_encode_tiled_fn>(p);
    } else {
      cudaGetLastError();
    }
  }
  return fn;
}

// Row-major rows x cols elements of `type` (`size` bytes), in boxes of
// box_rows x one 128-byte row (128-byte swizzle). False when the driver
// refuses it.
static bool kevo_tensor_map(CUtensorMap* map, CUtensorMapDataType type, int size, const void* data, int64_t rows,
                            int64_t cols, int box_rows) {
  const kevo_encode_tiled_fn encode = kevo_encode_tiled();
  if (encode == nullptr) return false;
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(cols) * size};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(128 / size), static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t steps[2] = {1, 1};
  return encode(map, type, 2, const_cast<void*>(data), dims, strides, box, steps, CU_TENSOR_MAP_INTERLEAVE_NONE,
                CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

static bool kevo_is_sm90() {
  static int cc = -1;
  if (cc < 0) {
    int dev = 0, major = 0, minor = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
    cc = major * 10 + minor;
  }
  return cc == 90;
}

// The tensor maps of the last call's operands (encoding costs host time).
struct KevoMaps {
  const void* a = nullptr;
  const void* b = nullptr;
  const void* c = nullptr;
  int64_t m = -1, n = -1, k = -1;
  CUtensorMap map_a, map_b, map_c;
};

static bool kevo_maps_for(const void* a, const void* b, const void* c, int64_t m, int64_t n, int64_t k,
                          KevoMaps** out) {
  static KevoMaps cached;
  if (cached.a != a || cached.b != b || cached.c != c || cached.m != m || cached.n != n || cached.k != k) {
    cached.a = nullptr;  // invalid until every map is encoded
    if (!kevo_tensor_map(&cached.map_a, kTmaType, 2, a, m, k, kBM) ||
        !kevo_tensor_map(&cached.map_b, kTmaType, 2, b, k, n, kBK) ||
        !kevo_tensor_map(&cached.map_c, kTmaOutType, static_cast<int>(sizeof(OutT)), c, m, n, 64)) {
      return false;
    }
    cached.a = a;
    cached.b = b;
    cached.c = c;
    cached.m = m;
    cached.n = n;
    cached.k = k;
  }
  *out = &cached;
  return true;
}
)";

// T (the inputs' type), OutT (C's) with kevo_store2 and kevo_from_float,
// and kevo_to_float, for the task's dtypes.
std::string TypeHelpers(const GemmShapes& g) {
  const bool bf16 = g.a_dtype == v1::BF16;
  std::string out = absl::StrCat("using T = ", bf16 ? "__nv_bfloat16" : "__half", ";\n");
  if (g.c_dtype == v1::F32) {
    absl::StrAppend(&out, R"(using OutT = float;
__device__ __forceinline__ void kevo_store2(float* p, float a, float b) { *reinterpret_cast<float2*>(p) = make_float2(a, b); }
__device__ __forceinline__ float kevo_from_float(float v) { return v; }
)");
  } else if (bf16) {
    absl::StrAppend(&out, R"(using OutT = __nv_bfloat16;
__device__ __forceinline__ void kevo_store2(__nv_bfloat16* p, float a, float b) { *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(a, b); }
__device__ __forceinline__ __nv_bfloat16 kevo_from_float(float v) { return __float2bfloat16_rn(v); }
)");
  } else {
    absl::StrAppend(&out, R"(using OutT = __half;
__device__ __forceinline__ void kevo_store2(__half* p, float a, float b) { *reinterpret_cast<__half2*>(p) = __floats2half2_rn(a, b); }
__device__ __forceinline__ __half kevo_from_float(float v) { return __float2half_rn(v); }
)");
  }
  absl::StrAppend(&out, "__device__ __forceinline__ float kevo_to_float(T v) { return ",
                  bf16 ? "__bfloat162float" : "__half2float", "(v); }\n");
  return out;
}

// `kernels` with MMA_TYPE replaced by the PTX name of the input type.
std::string WithMmaType(std::string kernels, bool bf16) {
  for (size_t p; (p = kernels.find("MMA_TYPE")) != std::string::npos;) kernels.replace(p, 8, bf16 ? "bf16" : "f16");
  return kernels;
}

// The task's function: when `fast` (a condition over kevo_m, kevo_n, kevo_k,
// kevo_a, kevo_b, kevo_c) holds it runs `fast_body`, which returns once it
// launched; whatever gets past it runs kevo_gemm_plain.
absl::StatusOr<std::string> EntryPoint(const v1::Task& task, const GemmShapes& g, const std::string& fast,
                                       const std::string& fast_body) {
  KEVO_ASSIGN_OR_RETURN(std::string definition, DefinitionLine(task));
  return absl::StrCat("\n", definition, " {\n  const int64_t kevo_m = ", g.m, ", kevo_n = ", g.n, ", kevo_k = ", g.k,
                      ";\n  const T* kevo_a = reinterpret_cast<const T*>(", g.a,
                      ");\n  const T* kevo_b = reinterpret_cast<const T*>(", g.b,
                      ");\n  OutT* kevo_c = reinterpret_cast<OutT*>(", g.c, R"();
  if (kevo_m <= 0 || kevo_n <= 0) return;
  if ()",
                      fast, R"() {
)",
                      fast_body, R"(  }
  const dim3 grid(static_cast<unsigned>(kevo_ceil_div(kevo_n, 16)), static_cast<unsigned>(kevo_ceil_div(kevo_m, 16)));
  kevo_gemm_plain<<<grid, dim3(16, 16)>>>(kevo_a, kevo_b, kevo_c, kevo_m, kevo_n, kevo_k);
}
)");
}

// What both fast paths need: whole 16-byte chunks in the rows of B and A,
// aligned bases, and 32-bit indices.
constexpr char kFastShape[] =
    "kevo_k % 8 == 0 && kevo_n % 8 == 0 && kevo_aligned16(kevo_a) && kevo_aligned16(kevo_b) && "
    "kevo_aligned16(kevo_c) &&\n      kevo_m < (int64_t{1} << 31) && kevo_n < (int64_t{1} << 31) && "
    "kevo_k < (int64_t{1} << 31)";

// The generated file's first lines: provenance, prelude, includes (plus
// `includes`), and the type helpers inside the anonymous namespace that
// kPlainKernel closes.
std::string SourceHead(const Genome& genome, const GemmShapes& g, const std::string& includes) {
  return absl::StrCat("// Generated by kevo builtin recipe ", genome.ToString(), "\n", CudaPrelude(),
                      "#include <cuda_bf16.h>\n#include <cuda_fp16.h>\n", includes, "\nnamespace {\n\n",
                      TypeHelpers(g));
}

// What the two GEMM recipes share: their family, when they apply, and the
// checks and binding before a recipe writes its source.
class CudaGemmRecipe : public Recipe {
 public:
  explicit CudaGemmRecipe(std::vector<ParamSpec> params) : space_(std::move(params)) {}

  // Both are tensor-core GEMMs of one task: a search may switch between them.
  std::string family() const final { return "cuda_gemm_mma"; }
  const SearchSpace& space() const final { return space_; }

  bool Applies(const v1::Task& task, std::string_view platform) const final {
    GemmShapes g;
    return platform == kCudaPlatform && Hint(task, "pattern") == "gemm" && BindMmaGemm(task, &g);
  }

  absl::StatusOr<v1::Candidate> Generate(const v1::Task& task, const Genome& genome) const final {
    KEVO_RETURN_IF_ERROR(CheckGenerate(*this, task, genome, kCudaPlatform));
    GemmShapes g;
    BindMmaGemm(task, &g);
    const auto [bm, bn] = Dims(StrParam(genome, "tile"));
    KEVO_ASSIGN_OR_RETURN(std::string source, Source(task, genome, g, bm, bn));
    return CudaCandidate(std::move(source));
  }

 protected:
  // The candidate's source for a checked genome whose tile is bm x bn.
  virtual absl::StatusOr<std::string> Source(const v1::Task& task, const Genome& genome, const GemmShapes& g,
                                             int64_t bm, int64_t bn) const = 0;

 private:
  SearchSpace space_;
};

class CudaGemmMmaRecipe final : public CudaGemmRecipe {
 public:
  CudaGemmMmaRecipe()
      : CudaGemmRecipe({
            {"tile",
             {"64x128", "128x64", "128x128", "128x256", "256x128"},
             "128x256",
             "rows x columns of C a block computes"},
            {"tile_k", {"32", "64"}, "32", "depth of the A and B tiles a pipeline stage holds"},
            {"warp_tile", {"32x64", "64x32", "64x64"}, "64x64", "rows x columns of C a warp holds in registers"},
            {"stages", {"2", "3", "4"}, "3", "shared-memory pipeline stages (cp.async in flight)"},
        }) {}

  std::string name() const override { return "cuda_gemm_mma"; }
  std::string description() const override {
    return "CUDA bf16/fp16 GEMM on tensor cores: cp.async pipelined shared-memory tiles, "
           "ldmatrix + mma.sync m16n8k16, warp tiles in registers, float32 accumulation";
  }
  std::vector<std::map<std::string, std::string>> SeedOverrides() const override {
    return {{{"tile", "128x128"}, {"stages", "4"}}, {{"tile", "256x128"}}, {{"tile_k", "64"}}};
  }

 protected:
  absl::StatusOr<std::string> Source(const v1::Task& task, const Genome& genome, const GemmShapes& g, int64_t bm,
                                     int64_t bn) const override {
    const auto [wm, wn] = Dims(StrParam(genome, "warp_tile"));
    std::string s = absl::StrCat(SourceHead(genome, g, ""), "constexpr int kBM = ", bm, ", kBN = ", bn,
                                 ", kBK = ", IntParam(genome, "tile_k"), ";\n", "constexpr int kWM = ", wm,
                                 ", kWN = ", wn, ";\n", "constexpr int kStages = ", IntParam(genome, "stages"), ";\n",
                                 WithMmaType(kMmaKernels, g.a_dtype == v1::BF16), kPlainKernel);
    KEVO_ASSIGN_OR_RETURN(std::string entry, EntryPoint(task, g, kFastShape, R"(    static bool configured = false;
    if (!configured) {
      cudaFuncSetAttribute(kevo_gemm_mma, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kSmemBytes));
      configured = true;
    }
    const dim3 grid(static_cast<unsigned>(kevo_ceil_div(kevo_n, kBN)), static_cast<unsigned>(kevo_ceil_div(kevo_m, kBM)));
    kevo_gemm_mma<<<grid, kThreads, kSmemBytes>>>(kevo_a, kevo_b, kevo_c, static_cast<int>(kevo_m), static_cast<int>(kevo_n),
                                                  static_cast<int>(kevo_k));
    return;
)"));
    return s + entry;
  }
};

// kevo_wgmma(d, desc_a, desc_b): d += A * B for one m64nNk16, A K-major and
// B MN-major (transposed: B is row-major K x N) in shared memory.
std::string WgmmaInstruction(int n, bool bf16) {
  const char* type = bf16 ? "bf16" : "f16";
  std::string regs, operands;
  for (int i = 0; i < n / 2; ++i) {
    absl::StrAppend(&regs, i ? ", " : "", "%", i);
    absl::StrAppend(&operands, i ? ", " : "", i % 8 == 0 ? "\n        " : "", "\"+f\"(d[", i, "])");
  }
  return absl::StrCat("__device__ __forceinline__ void kevo_wgmma(float (&d)[", n / 2,
                      "], uint64_t desc_a, uint64_t desc_b) {\n  asm volatile(\n      \"{\\n.reg .pred p;\\n"
                      "setp.ne.b32 p, %",
                      n / 2 + 2, ", 0;\\n\"\n      \"wgmma.mma_async.sync.aligned.m64n", n, "k16.f32.", type, ".", type,
                      " {", regs, "}, %", n / 2, ", %", n / 2 + 1, ", p, 1, 1, 0, 1;\\n}\\n\"\n      :", operands,
                      "\n      : \"l\"(desc_a), \"l\"(desc_b), \"r\"(1));\n}\n");
}

class CudaGemmWgmmaRecipe final : public CudaGemmRecipe {
 public:
  CudaGemmWgmmaRecipe()
      : CudaGemmRecipe({
            {"tile",
             {"128x128", "128x256", "256x128"},
             "128x256",
             "rows x columns of C a block computes (two consumer warpgroups split the rows)"},
            {"stages",
             {"2", "3", "4", "5", "6"},
             "4",
             "shared-memory pipeline stages of 64-deep A and B tiles (at most what fits in 227 KB: 4 for "
             "128x256 and 256x128)"},
            {"schedule",
             {"tiles", "persistent"},
             "persistent",
             "a block a tile, or a block an SM walking the tiles (the next tile's loads overlap the last one's "
             "stores)"},
            {"cluster",
             {"1", "2"},
             "2",
             "blocks of a cluster, one above the other, sharing B's tile (each loads half of it, multicast)"},
            {"epilogue",
             {"registers", "tma"},
             "tma",
             "C stored from the accumulators, or written to a swizzled buffer in shared memory that TMA stores "
             "while the next tile's wgmmas run (the buffer takes what the stages leave: a stage fewer where "
             "none is left)"},
        }) {}

  std::string name() const override { return "cuda_gemm_wgmma"; }
  std::string description() const override {
    return "CUDA bf16/fp16 GEMM for Hopper (sm_90a): TMA loads into 128-byte-swizzled shared memory, "
           "an mbarrier pipeline between a producer warpgroup and two wgmma consumer warpgroups, "
           "float32 accumulation; other GPUs and odd shapes take a plain kernel";
  }
  std::vector<std::map<std::string, std::string>> SeedOverrides() const override {
    // The default (0.98x of cuBLAS at 4096^3 on an H100), then the next best
    // measured points: 256x128 without a cluster (0.98x), C stored from the
    // registers (the old default, 0.885x), 128x128 tiles.
    return {
        {{"tile", "256x128"}, {"cluster", "1"}}, {{"epilogue", "registers"}}, {{"tile", "128x128"}, {"stages", "6"}}};
  }

 protected:
  absl::StatusOr<std::string> Source(const v1::Task& task, const Genome& genome, const GemmShapes& g, int64_t bm,
                                     int64_t bn) const override {
    const bool bf16 = g.a_dtype == v1::BF16;
    // Stages beyond the opt-in limit (227 KB) are clamped: 64-deep tiles of 16-bit elements.
    const int64_t stage_bytes = (bm + bn) * 64 * 2;
    int64_t stages = std::min<int64_t>(IntParam(genome, "stages"), (227 * 1024 - 1024) / (stage_bytes + 16));
    // C's buffer (epilogue tma): the widest whole-box share of the tile's
    // columns that fits beside the stages, both consumers' rows.
    const bool tma_store = StrParam(genome, "epilogue") == "tma";
    const int64_t out_size = g.c_dtype == v1::F32 ? 4 : 2;
    int64_t epi_cols = 0;
    while (tma_store) {
      const int64_t left = 227 * 1024 - 1024 - stages * (stage_bytes + 16);
      for (int64_t cols = bn; cols * out_size >= 128 && epi_cols == 0; cols /= 2) {
        if (bm * cols * out_size <= left) epi_cols = cols;
      }
      if (epi_cols > 0 || stages <= 2) break;
      --stages;
    }
    std::string s = absl::StrCat(
        SourceHead(genome, g, "#include <cuda.h>  // CUtensorMap and its enums only: no libcuda calls\n"),
        "constexpr int kBM = ", bm, ", kBN = ", bn, ";\n", "constexpr int kStages = ", stages, ";\n",
        "constexpr int kCluster = ", IntParam(genome, "cluster"), ";\n",
        "constexpr bool kPersistent = ", StrParam(genome, "schedule") == "persistent" ? "true" : "false", ";\n",
        "constexpr CUtensorMapDataType kTmaType = ",
        bf16 ? "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16" : "CU_TENSOR_MAP_DATA_TYPE_FLOAT16", ";\n",
        "constexpr CUtensorMapDataType kTmaOutType = ",
        out_size == 4 ? "CU_TENSOR_MAP_DATA_TYPE_FLOAT32"
        : bf16        ? "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16"
                      : "CU_TENSOR_MAP_DATA_TYPE_FLOAT16",
        ";\n", "constexpr bool kTmaStore = ", tma_store ? "true" : "false", ";\nconstexpr int kEpiCols = ", epi_cols,
        ";\n", WgmmaInstruction(static_cast<int>(bn), bf16), kWgmmaKernels, kPlainKernel);
    KEVO_ASSIGN_OR_RETURN(std::string entry,
                          EntryPoint(task, g, absl::StrCat("kevo_k > 0 && ", kFastShape, " && kevo_is_sm90()"),
                                     R"(    KevoMaps* maps = nullptr;
    if (kevo_maps_for(kevo_a, kevo_b, kevo_c, kevo_m, kevo_n, kevo_k, &maps)) {
      static int64_t slots = 0;  // clusters resident at once (what a persistent grid launches)
      static bool configured = false;
      if (!configured) {
        cudaFuncSetAttribute(kevo_gemm_wgmma, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kSmemBytes));
        int dev = 0, sms = 0, fit = 0;
        cudaGetDevice(&dev);
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
        slots = sms / kCluster;
        if (kCluster > 1) {
          const KevoClusterLaunch query(kCluster);
          if (cudaOccupancyMaxActiveClusters(&fit, kevo_gemm_wgmma, &query.config) == cudaSuccess && fit > 0) slots = fit;
          cudaGetLastError();
        }
        if (slots < 1) slots = 1;
        configured = true;
      }
      const int64_t units = kevo_ceil_div(kevo_ceil_div(kevo_m, kBM), kCluster) * kevo_ceil_div(kevo_n, kBN);
      const unsigned blocks = static_cast<unsigned>((kPersistent && slots < units ? slots : units) * kCluster);
      if (kCluster == 1) {
        kevo_gemm_wgmma<<<blocks, kThreads, kSmemBytes>>>(maps->map_a, maps->map_b, maps->map_c, kevo_c, static_cast<int>(kevo_m),
                                                          static_cast<int>(kevo_n), static_cast<int>(kevo_k));
      } else {
        const KevoClusterLaunch launch(blocks);
        cudaLaunchKernelEx(&launch.config, kevo_gemm_wgmma, maps->map_a, maps->map_b, maps->map_c, kevo_c, static_cast<int>(kevo_m),
                           static_cast<int>(kevo_n), static_cast<int>(kevo_k));
      }
      return;
    }
)"));
    return s + entry;
  }
};

}  // namespace

std::unique_ptr<Recipe> NewCudaGemmMmaRecipe() { return std::make_unique<CudaGemmMmaRecipe>(); }
std::unique_ptr<Recipe> NewCudaGemmWgmmaRecipe() { return std::make_unique<CudaGemmWgmmaRecipe>(); }

}  // namespace kevo::proposer
