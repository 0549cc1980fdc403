#include "coordinator/proposer/builtin/gpu_codegen.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kevo::proposer {
namespace {

// kevo_min, kevo_max and kevo_ceil_div for host and device code, declared
// `inline_keyword` (the dialects spell forced inlining differently).
std::string IntHelpers(const char* inline_keyword) {
  return absl::StrCat("static __host__ __device__ ", inline_keyword,
                      " int64_t kevo_min(int64_t a, int64_t b) { return a < b ? a : b; }\n",
                      "static __host__ __device__ ", inline_keyword,
                      " int64_t kevo_max(int64_t a, int64_t b) { return a > b ? a : b; }\n",
                      "static __host__ __device__ ", inline_keyword,
                      " int64_t kevo_ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }\n");
}

// Each dialect's kevo_grid_blocks. The raw strings start on a line of their
// own (skipped by `+ 1`) so that docs/kb can quote them as whole lines.
constexpr char kCudaGridBlocks[] = R"(
// Blocks for a grid-stride launch: `per_sm` per multiprocessor of the current device.
static int kevo_grid_blocks(int per_sm) {
  static int sms = 0;
  if (sms == 0) {
    int dev = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    if (sms <= 0) sms = 1;
  }
  return sms * per_sm;
}
)";
constexpr char kHipGridBlocks[] = R"(
// Workgroups for a grid-stride launch: `per_cu` per compute unit of the current device.
static int kevo_grid_blocks(int per_cu) {
  static int cus = 0;
  if (cus == 0) {
    int dev = 0;
    if (hipGetDevice(&dev) != hipSuccess ||
        hipDeviceGetAttribute(&cus, hipDeviceAttributeMultiprocessorCount, dev) != hipSuccess || cus <= 0) {
      cus = 1;
    }
  }
  return cus * per_cu;
}
)";

}  // namespace

const std::string& CudaGridSum() {
  static const std::string* text = new std::string(R"(constexpr int kMaxBlocks = 4096;

__device__ double g_partial[kMaxBlocks];
__device__ unsigned int g_done = 0;

__device__ __forceinline__ double BlockSum(double v) {
  __shared__ double warp_sums[32];
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = v;
  __syncthreads();
  v = threadIdx.x < kThreads / 32 ? warp_sums[threadIdx.x] : 0.0;
  if (threadIdx.x < 32) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  }
  __syncthreads();
  return v;  // in thread 0
}

__device__ __forceinline__ bool GridSum(double v, double* total) {
  v = BlockSum(v);
  __shared__ bool last;
  if (threadIdx.x == 0) {
    g_partial[blockIdx.x] = v;
    __threadfence();
    last = atomicAdd(&g_done, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last) return false;
  __threadfence();
  double t = 0.0;  // the partials in block order, a fixed tree
  for (int b = threadIdx.x; b < static_cast<int>(gridDim.x); b += kThreads) t += __ldcg(&g_partial[b]);
  t = BlockSum(t);
  if (threadIdx.x != 0) return false;
  g_done = 0;
  *total = t;
  return true;
}

)");
  return *text;
}

const std::string& CudaPrelude() {
  static const std::string* prelude = new std::string(absl::StrCat(R"(#include <cstdint>
#include <cuda_runtime.h>

)",
                                                                   IntHelpers("__forceinline__"), kCudaGridBlocks + 1));
  return *prelude;
}

const std::string& HipPrelude() {
  static const std::string* prelude = new std::string(absl::StrCat(R"(#include <hip/hip_runtime.h>

#include <cmath>
#include <cstdint>

constexpr int kWave = 64;  // CDNA wavefront
)",
                                                                   IntHelpers("inline"), kHipGridBlocks + 1));
  return *prelude;
}

ElementwiseParams MakeElementwiseParams(const std::vector<std::string>& inputs, const std::string& out) {
  ElementwiseParams p;
  for (const std::string& in : inputs) {
    p.scalars.push_back(absl::StrCat("float ", in));
    p.pointers.push_back(absl::StrCat("const float* __restrict__ ", in));
    p.args.push_back(in);
    p.aligned.push_back(absl::StrCat("kevo_aligned(", in, ")"));
    p.at_i.push_back(absl::StrCat(in, "[i]"));
  }
  p.pointers.push_back(absl::StrCat("float* __restrict__ ", out));
  p.args.push_back(out);
  p.aligned.push_back(absl::StrCat("kevo_aligned(", out, ")"));
  return p;
}

std::string ElementwiseKernelEnd(const ElementwiseParams& p, const std::string& out, const std::string& definition,
                                 const v1::TensorSpec& out_spec) {
  return absl::StrCat(R"(  // The tail after the last whole vector.
  for (int64_t i = nv * N + static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < n; i += stride) {
    )",
                      out, "[i] = kevo_op(", absl::StrJoin(p.at_i, ", "), R"();
  }
}

bool kevo_aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % (4 * kVec) == 0; }

}  // namespace

)",
                      definition, " {\n  const int64_t kevo_n = ", ElementCountExpr(out_spec), R"(;
  if (kevo_n <= 0) return;
  const int64_t per_block = static_cast<int64_t>(kThreads) * kVec * kUnroll;
)");
}

std::string ElementwiseLaunches(
    const ElementwiseParams& p,
    const std::function<std::string(const std::string& kernel, const std::string& args)>& launch) {
  const std::string args = absl::StrJoin(p.args, ", ");
  return absl::StrCat("  if (", absl::StrJoin(p.aligned, " && "), ") {\n", launch("kevo_kernel<kVec>", args),
                      "  } else {\n", launch("kevo_kernel<1>", args), "  }\n");
}

}  // namespace kevo::proposer
