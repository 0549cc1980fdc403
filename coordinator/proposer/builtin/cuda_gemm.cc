// Recipe "cuda_gemm_mma" (nvidia): C = A * B for row-major bf16 or fp16
// matrices on the tensor cores, float32 accumulation, C in the input type
// or float32; hints {pattern: gemm, a, b, c, m, n, k} as for the CPU recipe.
// Each block computes a tile_m x tile_n tile of C: `stages`-deep cp.async
// pipeline of A and B tiles (tile_k deep) in shared memory (rows padded by 16
// bytes, so ldmatrix reads are free of bank conflicts); each warp owns a
// warp_tile of C held in registers (register blocking) and multiplies with
// mma.sync.m16n8k16 fed by ldmatrix (B transposed on the way). Shapes whose
// rows are not whole 16-byte chunks (K or N not a multiple of 8), or
// misaligned pointers, take a plain one-thread-per-output kernel.
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "coordinator/proposer/builtin/codegen.h"
#include "coordinator/proposer/builtin/cuda_codegen.h"
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

class CudaGemmMmaRecipe final : public Recipe {
 public:
  CudaGemmMmaRecipe()
      : space_({
            {"tile", {"64x128", "128x64", "128x128", "128x256", "256x128"}, "128x256",
             "rows x columns of C a block computes"},
            {"tile_k", {"32", "64"}, "32", "depth of the A and B tiles a pipeline stage holds"},
            {"warp_tile", {"32x64", "64x32", "64x64"}, "64x64",
             "rows x columns of C a warp holds in registers"},
            {"stages", {"2", "3", "4"}, "3", "shared-memory pipeline stages (cp.async in flight)"},
        }) {}

  std::string name() const override { return "cuda_gemm_mma"; }
  std::string family() const override { return "cuda_gemm_mma"; }
  std::string description() const override {
    return "CUDA bf16/fp16 GEMM on tensor cores: cp.async pipelined shared-memory tiles, "
           "ldmatrix + mma.sync m16n8k16, warp tiles in registers, float32 accumulation";
  }
  const SearchSpace& space() const override { return space_; }
  std::vector<std::map<std::string, std::string>> SeedOverrides() const override {
    return {{{"tile", "128x128"}, {"stages", "4"}}, {{"tile", "256x128"}}, {{"tile_k", "64"}}};
  }

  bool Applies(const v1::Task& task, std::string_view platform) const override {
    GemmShapes g;
    return platform == kCudaPlatform && Hint(task, "pattern") == "gemm" && BindMmaGemm(task, &g);
  }

  absl::StatusOr<v1::Candidate> Generate(const v1::Task& task, const Genome& genome) const override {
    KEVO_RETURN_IF_ERROR(CheckGenerate(*this, task, genome, kCudaPlatform));
    GemmShapes g;
    BindMmaGemm(task, &g);
    KEVO_ASSIGN_OR_RETURN(std::string definition, DefinitionLine(task));
    const auto [bm, bn] = Dims(StrParam(genome, "tile"));
    const auto [wm, wn] = Dims(StrParam(genome, "warp_tile"));
    const bool bf16 = g.a_dtype == v1::BF16;
    const std::string t = bf16 ? "__nv_bfloat16" : "__half";
    std::string out_helpers;
    if (g.c_dtype == v1::F32) {
      out_helpers = R"(using OutT = float;
__device__ __forceinline__ void kevo_store2(float* p, float a, float b) { *reinterpret_cast<float2*>(p) = make_float2(a, b); }
__device__ __forceinline__ float kevo_from_float(float v) { return v; }
)";
    } else if (bf16) {
      out_helpers = R"(using OutT = __nv_bfloat16;
__device__ __forceinline__ void kevo_store2(__nv_bfloat16* p, float a, float b) { *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(a, b); }
__device__ __forceinline__ __nv_bfloat16 kevo_from_float(float v) { return __float2bfloat16_rn(v); }
)";
    } else {
      out_helpers = R"(using OutT = __half;
__device__ __forceinline__ void kevo_store2(__half* p, float a, float b) { *reinterpret_cast<__half2*>(p) = __floats2half2_rn(a, b); }
__device__ __forceinline__ __half kevo_from_float(float v) { return __float2half_rn(v); }
)";
    }
    std::string kernels = kMmaKernels;
    for (size_t p; (p = kernels.find("MMA_TYPE")) != std::string::npos;) kernels.replace(p, 8, bf16 ? "bf16" : "f16");
    std::string s = absl::StrCat(
        "// Generated by kevo builtin recipe ", genome.ToString(), "\n", kCudaPrelude,
        "#include <cuda_bf16.h>\n#include <cuda_fp16.h>\n\nnamespace {\n\n",
        "constexpr int kBM = ", bm, ", kBN = ", bn, ", kBK = ", IntParam(genome, "tile_k"), ";\n",
        "constexpr int kWM = ", wm, ", kWN = ", wn, ";\n",
        "constexpr int kStages = ", IntParam(genome, "stages"), ";\n",
        "using T = ", t, ";\n", out_helpers,
        "__device__ __forceinline__ float kevo_to_float(T v) { return ", bf16 ? "__bfloat162float" : "__half2float",
        "(v); }\n", kernels);
    const std::string cast_in = absl::StrCat("reinterpret_cast<const T*>(");
    const std::string args = absl::StrCat(cast_in, g.a, "), ", cast_in, g.b, "), reinterpret_cast<OutT*>(", g.c, ")");
    absl::StrAppend(&s, "\n", definition, " {\n  const int64_t kevo_m = ", g.m, ", kevo_n = ", g.n, ", kevo_k = ", g.k, R"(;
  if (kevo_m <= 0 || kevo_n <= 0) return;
  if (kevo_k % 8 == 0 && kevo_n % 8 == 0 && kevo_aligned16()", g.a, ") && kevo_aligned16(", g.b, ") && kevo_aligned16(", g.c,
                    R"() &&
      kevo_m < (int64_t{1} << 31) && kevo_n < (int64_t{1} << 31) && kevo_k < (int64_t{1} << 31)) {
    static bool configured = false;
    if (!configured) {
      cudaFuncSetAttribute(kevo_gemm_mma, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kSmemBytes));
      configured = true;
    }
    const dim3 grid(static_cast<unsigned>(kevo_ceil_div(kevo_n, kBN)), static_cast<unsigned>(kevo_ceil_div(kevo_m, kBM)));
    kevo_gemm_mma<<<grid, kThreads, kSmemBytes>>>()", args, R"(, static_cast<int>(kevo_m), static_cast<int>(kevo_n), static_cast<int>(kevo_k));
  } else {
    const dim3 grid(static_cast<unsigned>(kevo_ceil_div(kevo_n, 16)), static_cast<unsigned>(kevo_ceil_div(kevo_m, 16)));
    kevo_gemm_plain<<<grid, dim3(16, 16)>>>()", args, R"(, kevo_m, kevo_n, kevo_k);
  }
}
)");
    return CudaCandidate(std::move(s));
  }

 private:
  SearchSpace space_;
};

}  // namespace

std::unique_ptr<Recipe> NewCudaGemmMmaRecipe() { return std::make_unique<CudaGemmMmaRecipe>(); }

}  // namespace kevo::proposer
