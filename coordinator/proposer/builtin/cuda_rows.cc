// Row-wise CUDA recipes (nvidia) for float32 matrices x[rows, cols]:
//   cuda_softmax     y[r, :] = softmax(x[r, :]), or log_softmax
//       hints {pattern: row_softmax | row_log_softmax, in, out, rows, cols}
//   cuda_layer_norm  y[r, :] = (x[r, :] - mean) / sqrt(var + eps) * gamma + beta
//       hints {pattern: layer_norm, in, gamma, beta, out, rows, cols, eps}
//   cuda_row_reduce  y[r] = sum | max | mean of x[r, :]
//       hints {pattern: row_reduce, op, in, out, rows, cols}
//   cuda_row_scale   y[r, :] = x[r, :] / d_r, d_r the row's L2 norm (norm: l2)
//                    or the mean of its absolute values (norm: l1_mean)
//       hints {pattern: row_scale, norm, in, out, rows, cols}
// A row belongs to one warp (`mapping: warp`, `warps` rows per block) or to a
// whole block (`mapping: block`, `warps` warps a row). Reductions are warp
// shuffles, then shared memory across the warps of a block. With `cache:
// registers` a row that fits (up to 8 vectors a thread) is read once into
// registers and written from them, so x is read once; longer rows, and
// `cache: reread`, read x again for the output pass (softmax: an online
// (max, sum) pass, or max and sum passes apart with `online: off`; layer
// norm: shifted sums). Loads are `vec` floats (16 bytes for 4) when the row
// length and the pointers allow it. Layer norm over fewer rows than the GPU
// has multiprocessors, each long, splits every row across blocks instead
// (two launches: chunk sums, then the row's sums and the output).
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

#include "coordinator/proposer/builtin/codegen.h"
#include "coordinator/proposer/builtin/gpu_codegen.h"
#include "coordinator/proposer/builtin/recipe.h"

namespace kevo::proposer {
namespace {

enum class RowOp { kSoftmax, kLayerNorm, kReduce, kScale };

// Signature names a row recipe binds to (empty gamma/beta unless layer norm).
struct CudaRowBinding {
  std::string in, out, rows, cols, gamma, beta;
};

bool BindCudaRows(const v1::Task& task, RowOp op, CudaRowBinding* b) {
  RowBinding rows;
  if (!BindRows(task, op == RowOp::kReduce, &rows)) return false;
  b->in = rows.in;
  b->out = rows.out;
  b->rows = rows.rows;
  b->cols = rows.cols;
  if (op == RowOp::kLayerNorm) {
    // A residual add (row_norm's residual and sum_out hints) is not fused here.
    if (!Hint(task, "residual").empty() || !Hint(task, "sum_out").empty()) return false;
    b->gamma = Hint(task, "gamma", "gamma");
    b->beta = Hint(task, "beta", "beta");
    if (!IsRowVector(task, b->gamma, b->cols) || !IsRowVector(task, b->beta, b->cols)) return false;
    double eps = 0;
    if (!absl::SimpleAtod(Hint(task, "eps", "1e-5"), &eps)) return false;
  }
  return true;
}

// Warp and group reductions, the vector type, the loads.
constexpr char kRowHelpers[] = R"(
template <int N>
struct alignas(4 * N) Vec {
  float v[N];
};

__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float WarpMax(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
// (max, sum of exp(x - max)) pairs combined.
__device__ __forceinline__ void Combine(float& m, float& s, float mo, float so) {
  const float mn = fmaxf(m, mo);
  s = (m == -INFINITY ? 0.0f : s * __expf(m - mn)) + (mo == -INFINITY ? 0.0f : so * __expf(mo - mn));
  m = mn;
}
__device__ __forceinline__ void WarpMaxSum(float& m, float& s) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    Combine(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
  }
}

// Reductions over the threads that share a row: one warp, or the kGroupWarps
// warps of a block (then every thread of the block calls them together).
__device__ __forceinline__ float GroupSum(float v, float* smem) {
  v = WarpSum(v);
  if (kGroupWarps == 1) return v;
  __syncthreads();
  if (threadIdx.x % 32 == 0) smem[threadIdx.x / 32] = v;
  __syncthreads();
  return WarpSum(threadIdx.x % 32 < kGroupWarps ? smem[threadIdx.x % 32] : 0.0f);
}
__device__ __forceinline__ float GroupMax(float v, float* smem) {
  v = WarpMax(v);
  if (kGroupWarps == 1) return v;
  __syncthreads();
  if (threadIdx.x % 32 == 0) smem[threadIdx.x / 32] = v;
  __syncthreads();
  return WarpMax(threadIdx.x % 32 < kGroupWarps ? smem[threadIdx.x % 32] : -INFINITY);
}
__device__ __forceinline__ void GroupMaxSum(float& m, float& s, float* smem) {
  WarpMaxSum(m, s);
  if (kGroupWarps == 1) return;
  __syncthreads();
  if (threadIdx.x % 32 == 0) {
    smem[threadIdx.x / 32] = m;
    smem[32 + threadIdx.x / 32] = s;
  }
  __syncthreads();
  const bool live = threadIdx.x % 32 < kGroupWarps;
  m = live ? smem[threadIdx.x % 32] : -INFINITY;
  s = live ? smem[32 + threadIdx.x % 32] : 0.0f;
  WarpMaxSum(m, s);
}
// The kPer vectors a thread of a kGT-thread group holds of its row (every
// kGT-th from t), `pad` in the lanes past the row's end.
template <int kPer, int kV, int kGT>
__device__ __forceinline__ void LoadRow(Vec<kV> (&v)[kPer], const Vec<kV>* xr, int t, int64_t nv, float pad) {
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int64_t c = t + static_cast<int64_t>(i) * kGT;
#pragma unroll
    for (int l = 0; l < kV; ++l) v[i].v[l] = pad;
    if (c < nv) v[i] = xr[c];
  }
}
)";

// The kernel's head: the row this group owns and its pointers. `extra`
// declares more parameters before rows, cols.
std::string KernelHead(const std::string& params) {
  return absl::StrCat(R"(
// kPer vectors of kV floats per thread cached in registers; kPer = 0: the
// row is streamed from memory (read again for the output pass).
template <int kPer, int kV>
__global__ void __launch_bounds__(kThreads) kevo_rows()",
                      params, R"(int64_t rows, int64_t cols) {
  __shared__ float smem[64];
  constexpr int kGT = kGroupWarps * 32;  // threads per row
  constexpr int kRowsPerBlock = kThreads / kGT;
  using V = Vec<kV>;
  const int t = threadIdx.x % kGT;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kGT;
  if (row >= rows) return;  // a block-wide group has kRowsPerBlock = 1: all return together
  const int64_t nv = cols / kV;
  const V* xr = reinterpret_cast<const V*>(x + row * cols);
  (void)xr;
)");
}

// softmax, or with `log` log_softmax: y = x - (max + log(sum of exp(x - max))).
std::string SoftmaxBody(bool online, bool log) {
  return absl::StrCat(R"(  float* yr = y + row * cols;
  if constexpr (kPer > 0) {
    V v[kPer];
    LoadRow<kPer, kV, kGT>(v, xr, t, nv, -INFINITY);
    float m = -INFINITY;
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
#pragma unroll
      for (int l = 0; l < kV; ++l) m = fmaxf(m, v[i].v[l]);
    }
    m = GroupMax(m, smem);
    float s = 0;
)",
                      log ? R"(#pragma unroll
    for (int i = 0; i < kPer; ++i) {
#pragma unroll
      for (int l = 0; l < kV; ++l) s += __expf(v[i].v[l] - m);  // the padding's exp(-inf) is 0
    }
    const float lse = m + logf(GroupSum(s, smem));
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int64_t c = t + static_cast<int64_t>(i) * kGT;
#pragma unroll
      for (int l = 0; l < kV; ++l) v[i].v[l] -= lse;
      if (c < nv) reinterpret_cast<V*>(yr)[c] = v[i];
    }
)"
                          : R"(#pragma unroll
    for (int i = 0; i < kPer; ++i) {
#pragma unroll
      for (int l = 0; l < kV; ++l) {
        v[i].v[l] = __expf(v[i].v[l] - m);  // the padding's exp(-inf) is 0
        s += v[i].v[l];
      }
    }
    const float inv = 1.0f / GroupSum(s, smem);
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int64_t c = t + static_cast<int64_t>(i) * kGT;
#pragma unroll
      for (int l = 0; l < kV; ++l) v[i].v[l] *= inv;
      if (c < nv) reinterpret_cast<V*>(yr)[c] = v[i];
    }
)",
                      R"(  } else {
    float m = -INFINITY, s = 0;
)",
                      online ? R"(    for (int64_t c = t; c < nv; c += kGT) {
      const V v = xr[c];
#pragma unroll
      for (int l = 0; l < kV; ++l) {
        const float a = v.v[l];
        if (a > m) {
          s = s * __expf(m - a) + 1.0f;
          m = a;
        } else {
          s += __expf(a - m);
        }
      }
    }
    GroupMaxSum(m, s, smem);
)"
                             : R"(    for (int64_t c = t; c < nv; c += kGT) {
      const V v = xr[c];
#pragma unroll
      for (int l = 0; l < kV; ++l) m = fmaxf(m, v.v[l]);
    }
    m = GroupMax(m, smem);
    for (int64_t c = t; c < nv; c += kGT) {
      const V v = xr[c];
#pragma unroll
      for (int l = 0; l < kV; ++l) s += __expf(v.v[l] - m);
    }
    s = GroupSum(s, smem);
)",
                      log ? R"(    const float lse = m + logf(s);
    for (int64_t c = t; c < nv; c += kGT) {
      V v = xr[c];
#pragma unroll
      for (int l = 0; l < kV; ++l) v.v[l] -= lse;
      reinterpret_cast<V*>(yr)[c] = v;
    }
  }
}
)"
                          : R"(    const float inv = 1.0f / s;
    for (int64_t c = t; c < nv; c += kGT) {
      V v = xr[c];
#pragma unroll
      for (int l = 0; l < kV; ++l) v.v[l] = __expf(v.v[l] - m) * inv;
      reinterpret_cast<V*>(yr)[c] = v;
    }
  }
}
)");
}

std::string LayerNormBody(const std::string& eps) {
  return absl::StrCat(R"(  constexpr float kEps = static_cast<float>()", eps, R"();
  float* yr = y + row * cols;
  const V* gv = reinterpret_cast<const V*>(gamma);
  const V* bv = reinterpret_cast<const V*>(beta);
  const float inv_n = 1.0f / static_cast<float>(cols);
  if constexpr (kPer > 0) {
    V v[kPer];
    LoadRow<kPer, kV, kGT>(v, xr, t, nv, 0.0f);
    float s = 0;
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
#pragma unroll
      for (int l = 0; l < kV; ++l) s += v[i].v[l];
    }
    const float mean = GroupSum(s, smem) * inv_n;
    float q = 0;
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int64_t c = t + static_cast<int64_t>(i) * kGT;
#pragma unroll
      for (int l = 0; l < kV; ++l) {
        const float d = v[i].v[l] - mean;
        q += c < nv ? d * d : 0.0f;
      }
    }
    const float inv_std = rsqrtf(GroupSum(q, smem) * inv_n + kEps);
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int64_t c = t + static_cast<int64_t>(i) * kGT;
      if (c >= nv) continue;
      const V g = gv[c], b = bv[c];
      V o;
#pragma unroll
      for (int l = 0; l < kV; ++l) o.v[l] = (v[i].v[l] - mean) * inv_std * g.v[l] + b.v[l];
      reinterpret_cast<V*>(yr)[c] = o;
    }
  } else {
    // Sums shifted by the row's first value: no cancellation when the mean
    // is large against the spread.
    const float k = x[row * cols];
    float s1 = 0, s2 = 0;
    for (int64_t c = t; c < nv; c += kGT) {
      const V v = xr[c];
#pragma unroll
      for (int l = 0; l < kV; ++l) {
        const float d = v.v[l] - k;
        s1 += d;
        s2 += d * d;
      }
    }
    s1 = GroupSum(s1, smem) * inv_n;
    s2 = GroupSum(s2, smem) * inv_n;
    const float mean = k + s1;
    const float inv_std = rsqrtf(fmaxf(s2 - s1 * s1, 0.0f) + kEps);
    for (int64_t c = t; c < nv; c += kGT) {
      const V v = xr[c], g = gv[c], b = bv[c];
      V o;
#pragma unroll
      for (int l = 0; l < kV; ++l) o.v[l] = (v.v[l] - mean) * inv_std * g.v[l] + b.v[l];
      reinterpret_cast<V*>(yr)[c] = o;
    }
  }
}
)");
}

std::string ReduceBody(const std::string& op) {
  const bool max = op == "max";
  return absl::StrCat(R"(  float a = )", max ? "-INFINITY" : "0.0f", R"(;
  for (int64_t c = t; c < nv; c += kGT) {
    const V v = xr[c];
#pragma unroll
    for (int l = 0; l < kV; ++l) a = )",
                      max ? "fmaxf(a, v.v[l])" : "a + v.v[l]", R"(;
  }
  a = )",
                      max ? "GroupMax" : "GroupSum", R"((a, smem);
  if (t == 0) y[row] = a)",
                      op == "mean" ? " / static_cast<float>(cols)" : "", R"(;
}
)");
}

// x divided by the row's L2 norm (`l2`) or the mean of its absolute values,
// as PyTorch divides (no reciprocal) where the row is cached, so that only
// the sum's order differs; streamed rows multiply by the reciprocal.
std::string ScaleBody(bool l2) {
  const std::string term = l2 ? "a * a" : "fabsf(a)";
  const std::string norm = l2 ? "sqrtf(GroupSum(s, smem))" : "GroupSum(s, smem) / static_cast<float>(cols)";
  return absl::StrCat(R"(  float* yr = y + row * cols;
  float s = 0;
  if constexpr (kPer > 0) {
    V v[kPer];
    LoadRow<kPer, kV, kGT>(v, xr, t, nv, 0.0f);
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
#pragma unroll
      for (int l = 0; l < kV; ++l) {
        const float a = v[i].v[l];
        s += )",
                      term, R"(;
      }
    }
    const float d = )",
                      norm, R"(;
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int64_t c = t + static_cast<int64_t>(i) * kGT;
#pragma unroll
      for (int l = 0; l < kV; ++l) v[i].v[l] /= d;
      if (c < nv) reinterpret_cast<V*>(yr)[c] = v[i];
    }
  } else {
    // Streamed: x read twice, kLoads float4s a thread in flight. A row whose
    // start is not 16-byte aligned (an odd length) goes as float4s from its
    // first boundary on, where its y row has the same offset; the values
    // before it and after the last float4 one by one.
    constexpr int kLoads = 4;
    const float* xs = x + row * cols;
    const uintptr_t ax = reinterpret_cast<uintptr_t>(xs), ay = reinterpret_cast<uintptr_t>(yr);
    const int64_t skip = static_cast<int64_t>((16 - ax % 16) % 16 / 4);
    const int64_t head = ax % 16 == ay % 16 && skip < cols ? skip : cols;
    const int64_t n4 = (cols - head) / 4, tail = head + n4 * 4;
    const float4* x4 = reinterpret_cast<const float4*>(xs + head);
    float4* y4 = reinterpret_cast<float4*>(yr + head);
    for (int64_t c = t; c < head; c += kGT) {
      const float a = xs[c];
      s += )",
                      term, R"(;
    }
    for (int64_t c = tail + t; c < cols; c += kGT) {
      const float a = xs[c];
      s += )",
                      term, R"(;
    }
    for (int64_t c0 = t; c0 < n4; c0 += kLoads * kGT) {
      float4 v[kLoads];
#pragma unroll
      for (int u = 0; u < kLoads; ++u) {
        const int64_t c = c0 + u * kGT;
        v[u] = c < n4 ? __ldg(x4 + c) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      }
#pragma unroll
      for (int u = 0; u < kLoads; ++u) {
        float a = v[u].x;
        s += )",
                      term, R"(;
        a = v[u].y;
        s += )",
                      term, R"(;
        a = v[u].z;
        s += )",
                      term, R"(;
        a = v[u].w;
        s += )",
                      term, R"(;
      }
    }
    // A product with the reciprocal (within an ulp of the quotient): a
    // division's slow path is a call, around which the loads in flight spill.
    const float inv = 1.0f / ()",
                      norm, R"();
    for (int64_t c = t; c < head; c += kGT) yr[c] = xs[c] * inv;
    for (int64_t c = tail + t; c < cols; c += kGT) yr[c] = xs[c] * inv;
    for (int64_t c0 = t; c0 < n4; c0 += kLoads * kGT) {
      float4 v[kLoads];
#pragma unroll
      for (int u = 0; u < kLoads; ++u) {
        const int64_t c = c0 + u * kGT;
        if (c < n4) v[u] = __ldg(x4 + c);
      }
#pragma unroll
      for (int u = 0; u < kLoads; ++u) {
        const int64_t c = c0 + u * kGT;
        if (c < n4) y4[c] = make_float4(v[u].x * inv, v[u].y * inv, v[u].z * inv, v[u].w * inv);
      }
    }
  }
}
)");
}

// Layer norm of a few long rows (fewer rows than multiprocessors: a block a
// row would leave most of the GPU idle): each row in `splits` chunks, a block
// a chunk, in two launches. The first writes each chunk's sums, shifted by
// the row's first value, to g_ln_part; the second adds its row's partials in
// double, in chunk order (the same result every call), and normalises its
// chunk. x is read twice, as the streamed single-block path reads it.
std::string LayerNormSplitKernels(const std::string& eps) {
  return absl::StrCat(R"(
constexpr int kMaxParts = 8192;  // rows x splits
__device__ float2 g_ln_part[kMaxParts];

__device__ __forceinline__ float BlockSum(float v, float* smem) {
  v = WarpSum(v);
  __syncthreads();
  if (threadIdx.x % 32 == 0) smem[threadIdx.x / 32] = v;
  __syncthreads();
  return WarpSum(threadIdx.x % 32 < kThreads / 32 ? smem[threadIdx.x % 32] : 0.0f);
}

template <int kV>
__global__ void __launch_bounds__(kThreads)
kevo_ln_sums(const float* __restrict__ x, int64_t cols, int64_t chunk) {
  __shared__ float smem[32];
  const int64_t row = blockIdx.y, nv = cols / kV;
  const Vec<kV>* xr = reinterpret_cast<const Vec<kV>*>(x + row * cols);
  const float k = x[row * cols];
  const int64_t end = kevo_min(nv, (blockIdx.x + 1) * chunk);
  float s1 = 0, s2 = 0;
#pragma unroll 4
  for (int64_t c = blockIdx.x * chunk + threadIdx.x; c < end; c += kThreads) {
    const Vec<kV> v = xr[c];
#pragma unroll
    for (int l = 0; l < kV; ++l) {
      const float d = v.v[l] - k;
      s1 += d;
      s2 += d * d;
    }
  }
  s1 = BlockSum(s1, smem);
  s2 = BlockSum(s2, smem);
  if (threadIdx.x == 0) g_ln_part[row * gridDim.x + blockIdx.x] = make_float2(s1, s2);
}

template <int kV>
__global__ void __launch_bounds__(kThreads)
kevo_ln_apply(const float* __restrict__ x, const float* __restrict__ gamma, const float* __restrict__ beta,
              float* __restrict__ y, int64_t cols, int64_t chunk) {
  constexpr float kEps = static_cast<float>()",
                      eps, R"();
  const int64_t row = blockIdx.y, nv = cols / kV;
  double s1 = 0, s2 = 0;
  for (unsigned i = 0; i < gridDim.x; ++i) {
    const float2 p = g_ln_part[row * gridDim.x + i];
    s1 += p.x;
    s2 += p.y;
  }
  const double inv_n = 1.0 / static_cast<double>(cols), shift = s1 * inv_n;
  const float mean = x[row * cols] + static_cast<float>(shift);
  // The variance in double: the chunks' shifted sums cancel less there.
  const float inv_std = rsqrtf(static_cast<float>(fmax(s2 * inv_n - shift * shift, 0.0)) + kEps);
  const Vec<kV>* xr = reinterpret_cast<const Vec<kV>*>(x + row * cols);
  const Vec<kV>* gv = reinterpret_cast<const Vec<kV>*>(gamma);
  const Vec<kV>* bv = reinterpret_cast<const Vec<kV>*>(beta);
  Vec<kV>* yr = reinterpret_cast<Vec<kV>*>(y + row * cols);
  const int64_t end = kevo_min(nv, (blockIdx.x + 1) * chunk);
#pragma unroll 4
  for (int64_t c = blockIdx.x * chunk + threadIdx.x; c < end; c += kThreads) {
    const Vec<kV> v = xr[c], g = gv[c], b = bv[c];
    Vec<kV> o;
#pragma unroll
    for (int l = 0; l < kV; ++l) o.v[l] = (v.v[l] - mean) * inv_std * g.v[l] + b.v[l];
    yr[c] = o;
  }
}
)");
}

// The launcher's split path for layer norm, over the task's tensors: taken
// when the rows are fewer than the multiprocessors and long (each chunk at
// least 4096 vectors).
std::string LayerNormSplitLaunch(const CudaRowBinding& b) {
  const std::string args = absl::StrCat(b.in, ", ", b.gamma, ", ", b.beta, ", ", b.out);
  return absl::StrCat(R"(  if (rows < kevo_grid_blocks(1) && nv >= 8192) {
    const int64_t splits = kevo_max(2, kevo_min(kevo_min(kevo_ceil_div(kevo_grid_blocks(8), rows), kMaxParts / rows),
                                                nv / 4096));
    const int64_t chunk = kevo_ceil_div(nv, splits);
    const dim3 split_grid(static_cast<unsigned>(splits), static_cast<unsigned>(rows));
    if (vec) {
      kevo_ln_sums<kVec><<<split_grid, kThreads>>>()",
                      b.in, R"(, cols, chunk);
      kevo_ln_apply<kVec><<<split_grid, kThreads>>>()",
                      args, R"(, cols, chunk);
    } else {
      kevo_ln_sums<1><<<split_grid, kThreads>>>()",
                      b.in, R"(, cols, chunk);
      kevo_ln_apply<1><<<split_grid, kThreads>>>()",
                      args, R"(, cols, chunk);
    }
    return;
  }
)");
}

// The exported function: picks the vector width the row length and the
// pointers allow, and the smallest register cache that holds the row.
// `early`: code that may launch something else and return, with vec and nv
// known.
std::string Launcher(const std::string& definition, const std::string& args, const std::vector<std::string>& vec_ptrs,
                     const std::string& early = "") {
  std::string aligned = "cols % kVec == 0";
  for (const std::string& p : vec_ptrs) {
    absl::StrAppend(&aligned, " && reinterpret_cast<uintptr_t>(", p, ") % (4 * kVec) == 0");
  }
  return absl::StrCat("\n}  // namespace\n\n", definition, R"( {
  if (rows <= 0 || cols <= 0) return;
  constexpr int kGT = kGroupWarps * 32;
  const dim3 grid(static_cast<unsigned>(kevo_ceil_div(rows, kThreads / kGT)));
  const bool vec = )",
                      aligned, R"(;
  const int64_t nv = vec ? cols / kVec : cols;
  const int64_t per = kevo_ceil_div(nv, kGT);  // vectors a thread holds
)",
                      early, R"(#define KEVO_LAUNCH(P, W) kevo_rows<P, W><<<grid, kThreads>>>()", args, R"(, rows, cols)
#define KEVO_DISPATCH(W)                     \
  if (!kCache || per > 8) KEVO_LAUNCH(0, W); \
  else if (per <= 1) KEVO_LAUNCH(1, W);      \
  else if (per <= 2) KEVO_LAUNCH(2, W);      \
  else if (per <= 4) KEVO_LAUNCH(4, W);      \
  else KEVO_LAUNCH(8, W);
  if (vec) {
    KEVO_DISPATCH(kVec)
  } else {
    KEVO_DISPATCH(1)
  }
#undef KEVO_DISPATCH
#undef KEVO_LAUNCH
}
)");
}

class CudaRowRecipe final : public Recipe {
 public:
  explicit CudaRowRecipe(RowOp op) : op_(op) {
    std::vector<ParamSpec> params = {
        {"mapping", {"warp", "block"}, "warp", "a warp per row, or a block per row"},
        {"warps", {"1", "2", "4", "8"}, "4", "warps per block (warp mapping: rows per block)"},
        {"vec", {"1", "2", "4"}, "4", "floats per load and store when the row length allows"},
    };
    if (op != RowOp::kReduce) {
      params.push_back({"cache",
                        {"registers", "reread"},
                        "registers",
                        "hold the row in registers (x read once), or read it again to write"});
    }
    if (op == RowOp::kSoftmax) {
      params.push_back(
          {"online", {"on", "off"}, "on", "streamed rows: one online (max, sum) pass, or a max pass and a sum pass"});
    }
    space_ = SearchSpace(std::move(params));
  }

  std::string name() const override {
    switch (op_) {
      case RowOp::kSoftmax:
        return "cuda_softmax";
      case RowOp::kLayerNorm:
        return "cuda_layer_norm";
      case RowOp::kReduce:
        return "cuda_row_reduce";
      case RowOp::kScale:
        return "cuda_row_scale";
    }
    return "";
  }
  std::string family() const override { return name(); }
  std::string description() const override {
    return absl::StrCat("CUDA ",
                        op_ == RowOp::kSoftmax     ? "softmax"
                        : op_ == RowOp::kLayerNorm ? "layer norm"
                        : op_ == RowOp::kReduce    ? "row reduction"
                                                   : "row norm and divide",
                        ": a warp or a block per row, shuffle reductions, rows cached in registers, 16-byte loads");
  }
  const SearchSpace& space() const override { return space_; }
  std::vector<std::map<std::string, std::string>> SeedOverrides() const override {
    std::vector<std::map<std::string, std::string>> seeds = {{{"warps", "8"}}, {{"mapping", "block"}}};
    if (op_ != RowOp::kReduce) seeds.push_back({{"cache", "reread"}});
    return seeds;
  }

  bool Applies(const v1::Task& task, std::string_view platform) const override {
    if (platform != kCudaPlatform) return false;
    const std::string pattern = Hint(task, "pattern");
    CudaRowBinding b;
    switch (op_) {
      case RowOp::kSoftmax:
        return (pattern == "row_softmax" || pattern == "row_log_softmax") && BindCudaRows(task, op_, &b);
      case RowOp::kLayerNorm:
        return pattern == "layer_norm" && BindCudaRows(task, op_, &b);
      case RowOp::kReduce: {
        const std::string op = Hint(task, "op");
        return pattern == "row_reduce" && (op == "sum" || op == "max" || op == "mean") && BindCudaRows(task, op_, &b);
      }
      case RowOp::kScale: {
        const std::string norm = Hint(task, "norm");
        return pattern == "row_scale" && (norm == "l2" || norm == "l1_mean") && BindCudaRows(task, op_, &b);
      }
    }
    return false;
  }

  absl::StatusOr<v1::Candidate> Generate(const v1::Task& task, const Genome& genome) const override {
    KEVO_RETURN_IF_ERROR(CheckGenerate(*this, task, genome, kCudaPlatform));
    CudaRowBinding b;
    BindCudaRows(task, op_, &b);
    KEVO_ASSIGN_OR_RETURN(std::string definition, DefinitionLine(task));
    const bool block = StrParam(genome, "mapping") == "block";
    const int64_t warps = IntParam(genome, "warps");
    const bool cache = op_ != RowOp::kReduce && StrParam(genome, "cache") == "registers";
    std::string s =
        absl::StrCat("// Generated by kevo builtin recipe ", genome.ToString(), "\n", CudaPrelude(),
                     "\nnamespace {\n\n", "constexpr int kGroupWarps = ", block ? warps : 1, ";  // warps per row\n",
                     "constexpr int kThreads = ", warps * 32, ";\n", "constexpr int kVec = ", IntParam(genome, "vec"),
                     ";\n", "constexpr bool kCache = ", cache ? "true" : "false", ";\n", kRowHelpers);
    // Kernel parameters are named as the generated body uses them (x, y,
    // gamma, beta); the launcher passes the task's names.
    std::string args;
    std::vector<std::string> vec_ptrs = {b.in};
    switch (op_) {
      case RowOp::kSoftmax:
        absl::StrAppend(&s, KernelHead("const float* __restrict__ x, float* __restrict__ y, "),
                        SoftmaxBody(StrParam(genome, "online") == "on", Hint(task, "pattern") == "row_log_softmax"));
        args = absl::StrCat(b.in, ", ", b.out);
        vec_ptrs.push_back(b.out);
        break;
      case RowOp::kLayerNorm:
        absl::StrAppend(&s,
                        KernelHead("const float* __restrict__ x, const float* __restrict__ gamma, "
                                   "const float* __restrict__ beta, float* __restrict__ y, "),
                        LayerNormBody(Hint(task, "eps", "1e-5")), LayerNormSplitKernels(Hint(task, "eps", "1e-5")));
        args = absl::StrCat(b.in, ", ", b.gamma, ", ", b.beta, ", ", b.out);
        vec_ptrs.push_back(b.gamma);
        vec_ptrs.push_back(b.beta);
        vec_ptrs.push_back(b.out);
        break;
      case RowOp::kReduce:
        absl::StrAppend(&s, KernelHead("const float* __restrict__ x, float* __restrict__ y, "),
                        ReduceBody(Hint(task, "op")));
        args = absl::StrCat(b.in, ", ", b.out);
        break;
      case RowOp::kScale:
        absl::StrAppend(&s, KernelHead("const float* __restrict__ x, float* __restrict__ y, "),
                        ScaleBody(Hint(task, "norm") == "l2"));
        args = absl::StrCat(b.in, ", ", b.out);
        vec_ptrs.push_back(b.out);
        break;
    }
    absl::StrAppend(&s, Launcher(definition, args, vec_ptrs, op_ == RowOp::kLayerNorm ? LayerNormSplitLaunch(b) : ""));
    return CudaCandidate(std::move(s));
  }

 private:
  RowOp op_;
  SearchSpace space_;
};

}  // namespace

std::unique_ptr<Recipe> NewCudaSoftmaxRecipe() { return std::make_unique<CudaRowRecipe>(RowOp::kSoftmax); }
std::unique_ptr<Recipe> NewCudaLayerNormRecipe() { return std::make_unique<CudaRowRecipe>(RowOp::kLayerNorm); }
std::unique_ptr<Recipe> NewCudaRowReduceRecipe() { return std::make_unique<CudaRowRecipe>(RowOp::kReduce); }
std::unique_ptr<Recipe> NewCudaRowScaleRecipe() { return std::make_unique<CudaRowRecipe>(RowOp::kScale); }

}  // namespace kevo::proposer
