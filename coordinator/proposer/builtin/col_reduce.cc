// Reductions along a dim that is not the last, for float32 x[outer, len,
// inner] (the dims before, at and after the reduced one):
//   col_reduce       (cpu)     y[o, j] = sum | mean | max | min of x[o, :, j],
//                              or the index of its max | min (int64 y), or
//                              (op rms_norm) y[o, r, j] = x[o, r, j] /
//                              sqrt(mean of x[o, :, j]^2 + eps)
//   cuda_col_reduce  (nvidia)  the same
//       hints {pattern: col_reduce, op: sum|mean|max|min|argmax|argmin|rms_norm,
//              in, out, outer, len, inner, eps (rms_norm: a float literal)}
// y is [outer, inner] (or [outer, 1, inner]; rms_norm: x's shape). No native task has this shape:
// the KernelBench bridge lowers torch.sum / mean / amax / amin over a middle
// dim (and torch.max / torch.min(x, dim)[0], whose indices it never computes)
// to it, and x / torch.sqrt(torch.mean(x ** 2, dim, keepdim=True) + eps)
// (KernelBench 36's RMS norm over the channels) in one kernel
// (kernelbench_bridge.cc). max and min propagate NaN, as PyTorch's do;
// argmax and argmin give the first index of the extreme (of the first NaN).
//
// The cpu recipe walks a tile of `tile` consecutive j of one o down the len
// rows (each row a contiguous run the prefetcher follows), into `split`
// independent accumulator tiles (more loads in flight, and sums that round
// less), tiles over OpenMP threads. The CUDA one gives each thread a column
// (consecutive threads consecutive j: coalesced rows) and `unroll` loads in
// flight down it. rms_norm sums the squares so, then divides the same
// tile (cpu: still in cache) or column (CUDA: its own rows again) by the root.
#include <cmath>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include "coordinator/proposer/builtin/bound_recipe.h"
#include "coordinator/proposer/builtin/codegen.h"
#include "coordinator/proposer/builtin/gpu_codegen.h"
#include "coordinator/proposer/builtin/recipe.h"

namespace kevo::proposer {
namespace {

struct ColBinding {
  std::string in, out, outer, len, inner, op, eps;
};

bool IsScaleOp(const std::string& op) { return op == "rms_norm"; }

bool IsIndexOp(const std::string& op) { return op == "argmax" || op == "argmin"; }

bool BindCols(const v1::Task& task, ColBinding* b) {
  if (Hint(task, "pattern") != "col_reduce") return false;
  b->op = Hint(task, "op");
  if (b->op != "sum" && b->op != "mean" && b->op != "max" && b->op != "min" && b->op != "argmax" && b->op != "argmin" &&
      b->op != "rms_norm") {
    return false;
  }
  double eps = 0;
  if (!absl::SimpleAtod(Hint(task, "eps", "0"), &eps) || !(eps >= 0) || !std::isfinite(eps)) return false;
  b->eps = absl::StrFormat("static_cast<float>(%.17g)", eps);  // as PyTorch adds a Python float
  b->in = Hint(task, "in", "x");
  b->out = Hint(task, "out", "y");
  b->outer = Hint(task, "outer", "outer");
  b->len = Hint(task, "len", "len");
  b->inner = Hint(task, "inner", "inner");
  const v1::TensorSpec* x = FindInput(task, b->in);
  const v1::TensorSpec* y = FindOutput(task, b->out);
  const v1::DType y_dtype = IsIndexOp(b->op) ? v1::I64 : v1::F32;
  if (x == nullptr || y == nullptr || x->dtype() != v1::F32 || y->dtype() != y_dtype) return false;
  for (const std::string* p : {&b->in, &b->out}) {
    if (!IsSignatureParam(task, *p)) return false;
  }
  for (const std::string* p : {&b->outer, &b->len, &b->inner}) {
    if (!IsSymbolParam(task, *p)) return false;
  }
  if (x->shape_size() != 3 || x->shape(0) != b->outer || x->shape(1) != b->len || x->shape(2) != b->inner) {
    return false;
  }
  const bool y_ok =
      IsScaleOp(b->op)
          ? y->shape_size() == 3 && y->shape(0) == b->outer && y->shape(1) == b->len && y->shape(2) == b->inner
          : (y->shape_size() == 2 && y->shape(0) == b->outer && y->shape(1) == b->inner) ||
                (y->shape_size() == 3 && y->shape(0) == b->outer && y->shape(1) == "1" && y->shape(2) == b->inner);
  return y_ok && DefinitionLine(task).ok();
}

// The accumulator's start, a step `acc = OP(acc, v)` and a combine of two
// accumulators, for float lanes or scalars alike; for max and min (and their
// indices) `take`, whether v replaces acc.
struct ColOp {
  std::string init, step, combine, take;
};

ColOp OpFor(const std::string& op) {
  if (IsIndexOp(op)) return OpFor(op.substr(3));  // the values' step; the index follows it
  if (op == "max" || op == "min") {
    // NaN wins: once the accumulator holds one it stays (it compares false).
    const std::string take = absl::StrCat("(B ", op == "max" ? ">" : "<", " A || B != B) && A == A");
    const std::string pick = absl::StrCat(take, " ? B : A");
    return {op == "max" ? "-INFINITY" : "INFINITY", pick, pick, take};
  }
  if (op == "rms_norm") return {"0.0f", "A + B * B", "A + B", ""};  // the sum of squares
  return {"0.0f", "A + B", "A + B", ""};
}

// `pattern` with A and B replaced by `a` and `b`.
std::string Apply(const std::string& pattern, const std::string& a, const std::string& b) {
  std::string out;
  for (char c : pattern) {
    if (c == 'A') {
      absl::StrAppend(&out, "(", a, ")");
    } else if (c == 'B') {
      absl::StrAppend(&out, "(", b, ")");
    } else {
      out.push_back(c);
    }
  }
  return out;
}

// Whether (b, ib) replaces (a, ia) when two index accumulators meet: the
// extreme, else the first index of equal values (NaNs alike).
std::string IndexCombineTake(const ColOp& op, const std::string& a, const std::string& ia, const std::string& b,
                             const std::string& ib) {
  return absl::StrCat("(", Apply(op.take, a, b), ") || ((", b, " == ", a, " || (", b, " != ", b, " && ", a, " != ", a,
                      ")) && ", ib, " < ", ia, ")");
}

class ColReduceRecipe final : public BoundRecipe<ColBinding> {
 public:
  ColReduceRecipe()
      : BoundRecipe({"col_reduce", "col_reduce", "cpu",
                     "reduction along a middle dim: tiles of the inner dim down the reduced rows, tiles over threads"},
                    SearchSpace({
                        {"tile", {"64", "256", "1024"}, "256", "inner-dim floats a task accumulates at once"},
                        {"split", {"1", "2", "4"}, "2", "independent accumulator tiles (rows taken in turn)"},
                        {"threads", {"1", "all"}, "all", "OpenMP threads over tiles"},
                    })) {}

 protected:
  bool Bind(const v1::Task& task, ColBinding* b) const override { return BindCols(task, b); }

  absl::StatusOr<v1::Candidate> Write(const v1::Task& task, const Genome& genome, const ColBinding& b) const override {
    KEVO_ASSIGN_OR_RETURN(std::string definition, DefinitionLine(task));
    const int64_t tile = IntParam(genome, "tile");
    const int64_t split = IntParam(genome, "split");
    const ColOp op = OpFor(b.op);
    const bool index = IsIndexOp(b.op);
    // Accumulator tile k takes row r's value b at j (and its index).
    auto step = [&](const std::string& k, const std::string& r) {
      const std::string a = absl::StrCat("kevo_acc[", k, "][kevo_j]");
      if (!index) return absl::StrCat(a, " = ", Apply(op.step, a, "kevo_row[kevo_j]"), ";");
      return absl::StrCat("{\n          const float kevo_b = kevo_row[kevo_j];\n          const bool kevo_take = ",
                          Apply(op.take, a, "kevo_b"), ";\n          ", a, " = kevo_take ? kevo_b : ", a,
                          ";\n          kevo_idx[", k, "][kevo_j] = kevo_take ? ", r, " : kevo_idx[", k,
                          "][kevo_j];\n        }");
    };
    std::string s = kPrelude;
    absl::StrAppend(&s, "// Generated by kevo builtin recipe ", genome.ToString(), "\n", definition, " {\n");
    absl::StrAppend(&s, "  const int64_t kevo_tiles = kevo_ceil_div(", b.inner, ", ", tile, ");\n");
    if (StrParam(genome, "threads") != "1") absl::StrAppend(&s, "#pragma omp parallel for schedule(static)\n");
    absl::StrAppend(&s, "  for (int64_t kevo_t = 0; kevo_t < ", b.outer, " * kevo_tiles; ++kevo_t) {\n",
                    "    const int64_t kevo_o = kevo_t / kevo_tiles, kevo_j0 = (kevo_t % kevo_tiles) * ", tile, ";\n",
                    "    const int64_t kevo_n = kevo_min(", tile, ", ", b.inner, " - kevo_j0);\n",
                    "    const float* kevo_x = ", b.in, " + kevo_o * ", b.len, " * ", b.inner, " + kevo_j0;\n",
                    "    float kevo_acc[", split, "][", tile, "];\n");
    if (index) absl::StrAppend(&s, "    int64_t kevo_idx[", split, "][", tile, "];\n");
    absl::StrAppend(&s, "    for (int kevo_s = 0; kevo_s < ", split, "; ++kevo_s) {\n",
                    "      for (int64_t kevo_j = 0; kevo_j < kevo_n; ++kevo_j) kevo_acc[kevo_s][kevo_j] = ", op.init,
                    ";\n");
    // An index accumulator starts at the first row it takes, so that a column
    // nothing beats (all -inf for argmax) gives that row.
    if (index) {
      absl::StrAppend(&s,
                      "      for (int64_t kevo_j = 0; kevo_j < kevo_n; ++kevo_j) kevo_idx[kevo_s][kevo_j] = kevo_s;\n");
    }
    absl::StrAppend(&s, "    }\n    int64_t kevo_r = 0;\n", "    for (; kevo_r + ", split, " <= ", b.len,
                    "; kevo_r += ", split, ") {\n");
    for (int64_t k = 0; k < split; ++k) {
      absl::StrAppend(&s, "      {\n        const float* kevo_row = kevo_x + (kevo_r + ", k, ") * ", b.inner, ";\n",
                      "#pragma GCC ivdep\n        for (int64_t kevo_j = 0; kevo_j < kevo_n; ++kevo_j) ",
                      step(absl::StrCat(k), absl::StrCat("(kevo_r + ", k, ")")), "\n      }\n");
    }
    absl::StrAppend(&s, "    }\n    for (; kevo_r < ", b.len, "; ++kevo_r) {\n",
                    "      const float* kevo_row = kevo_x + kevo_r * ", b.inner, ";\n",
                    "      for (int64_t kevo_j = 0; kevo_j < kevo_n; ++kevo_j) ", step("0", "kevo_r"), "\n    }\n");
    const bool scale = IsScaleOp(b.op);
    absl::StrAppend(&s, "    ", index ? "int64_t" : "float", "* kevo_y = ", b.out, " + kevo_o * ",
                    scale ? absl::StrCat(b.len, " * ") : "", b.inner, " + kevo_j0;\n",
                    "    for (int64_t kevo_j = 0; kevo_j < kevo_n; ++kevo_j) {\n",
                    "      float kevo_v = kevo_acc[0][kevo_j];\n");
    if (index) absl::StrAppend(&s, "      int64_t kevo_i = kevo_idx[0][kevo_j];\n");
    for (int64_t k = 1; k < split; ++k) {
      const std::string v = absl::StrCat("kevo_acc[", k, "][kevo_j]");
      if (index) {
        const std::string i = absl::StrCat("kevo_idx[", k, "][kevo_j]");
        absl::StrAppend(&s, "      if (", IndexCombineTake(op, "kevo_v", "kevo_i", v, i), ") {\n        kevo_v = ", v,
                        ";\n        kevo_i = ", i, ";\n      }\n");
      } else {
        absl::StrAppend(&s, "      kevo_v = ", Apply(op.combine, "kevo_v", v), ";\n");
      }
    }
    if (scale) {
      // The root of each column's mean square (kept in accumulator tile 0),
      // then the tile's rows again, divided by it.
      absl::StrAppend(&s, "      kevo_acc[0][kevo_j] = sqrtf(kevo_v / (float)", b.len, " + ", b.eps, ");\n    }\n",
                      "    for (int64_t kevo_r2 = 0; kevo_r2 < ", b.len, "; ++kevo_r2) {\n",
                      "      const float* kevo_row = kevo_x + kevo_r2 * ", b.inner, ";\n",
                      "      float* kevo_out = kevo_y + kevo_r2 * ", b.inner, ";\n",
                      "#pragma GCC ivdep\n      for (int64_t kevo_j = 0; kevo_j < kevo_n; ++kevo_j) ",
                      "kevo_out[kevo_j] = kevo_row[kevo_j] / kevo_acc[0][kevo_j];\n    }\n  }\n}\n");
      return CppCandidate(std::move(s));
    }
    const std::string result = index            ? std::string("kevo_i")
                               : b.op == "mean" ? absl::StrCat("kevo_v / (float)", b.len)
                                                : std::string("kevo_v");
    absl::StrAppend(&s, "      kevo_y[kevo_j] = ", result, ";\n    }\n  }\n}\n");
    return CppCandidate(std::move(s));
  }
};

// The CUDA kernels' walk over the outputs: a thread per (outer, inner)
// column, grid-strided; p its column's first value, strided by inner.
constexpr char kColumnLoop[] = R"(  const int64_t total = outer * inner;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * kThreads) {
    const int64_t o = i / inner, j = i - o * inner;
    const float* p = x + o * len * inner + j;
)";

class CudaColReduceRecipe final : public BoundRecipe<ColBinding> {
 public:
  CudaColReduceRecipe()
      : BoundRecipe(
            {"cuda_col_reduce", "cuda_col_reduce", kCudaPlatform,
             "CUDA reduction along a middle dim: a thread per output, coalesced rows, several loads in flight"},
            SearchSpace({
                {"threads", {"128", "256", "512"}, "256", "threads per block"},
                {"unroll", {"1", "4", "8"}, "4", "independent loads (and accumulators) a thread keeps in flight"},
            })) {}

 protected:
  bool Bind(const v1::Task& task, ColBinding* b) const override { return BindCols(task, b); }

  absl::StatusOr<v1::Candidate> Write(const v1::Task& task, const Genome& genome, const ColBinding& b) const override {
    KEVO_ASSIGN_OR_RETURN(std::string definition, DefinitionLine(task));
    const ColOp op = OpFor(b.op);
    const bool index = IsIndexOp(b.op);
    // Accumulator `a` (index `ia`) takes value `v` of row `r`.
    auto step = [&](const std::string& a, const std::string& ia, const std::string& v, const std::string& r) {
      if (!index) return absl::StrCat(a, " = ", Apply(op.step, a, v), ";");
      return absl::StrCat("if (", Apply(op.take, a, v), ") {\n        ", a, " = ", v, ";\n        ", ia, " = ", r,
                          ";\n      }");
    };
    std::string s =
        absl::StrCat("// Generated by kevo builtin recipe ", genome.ToString(), "\n", CudaPrelude(),
                     "#include <math.h>\n\nnamespace {\n\nconstexpr int kThreads = ", IntParam(genome, "threads"),
                     ";\nconstexpr int kUnroll = ", IntParam(genome, "unroll"), ";\n\n");
    absl::StrAppend(&s, "__global__ void __launch_bounds__(kThreads)\nkevo_col_reduce(const float* __restrict__ x, ",
                    index ? "int64_t" : "float", "* __restrict__ y, int64_t outer, int64_t len, int64_t inner) {\n",
                    kColumnLoop, R"(    float a[kUnroll];
    int64_t ia[kUnroll];  // an index accumulator starts at the first row it takes
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      a[u] = )",
                    op.init, R"(;
      ia[u] = u;
    }
    int64_t r = 0;
    for (; r + kUnroll <= len; r += kUnroll) {
      float v[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) v[u] = __ldg(p + (r + u) * inner);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
      )",
                    step("a[u]", "ia[u]", "v[u]", "r + u"), R"(
      }
    }
    for (; r < len; ++r) {
      const float v0 = __ldg(p + r * inner);
      )",
                    step("a[0]", "ia[0]", "v0", "r"), R"(
    }
#pragma unroll
    for (int u = 1; u < kUnroll; ++u) {
      )",
                    index ? absl::StrCat("if (", IndexCombineTake(op, "a[0]", "ia[0]", "a[u]", "ia[u]"),
                                         ") {\n        a[0] = a[u];\n        ia[0] = ia[u];\n      }")
                          : absl::StrCat("a[0] = ", Apply(op.combine, "a[0]", "a[u]"), ";"),
                    R"(
    }
    )",
                    IsScaleOp(b.op) ? absl::StrCat(R"(// The column again, divided by the root of its mean square.
    const float root = sqrtf(a[0] / static_cast<float>(len) + )",
                                                   b.eps, R"();
    float* q = y + o * len * inner + j;
    for (int64_t r2 = 0; r2 < len; ++r2) q[r2 * inner] = __ldg(p + r2 * inner) / root;)")
                                    : absl::StrCat("y[i] = ",
                                                   index            ? "ia[0]"
                                                   : b.op == "mean" ? "a[0] / static_cast<float>(len)"
                                                                    : "a[0]",
                                                   ";"),
                    R"(
  }
}
)");
    const bool scale = IsScaleOp(b.op);
    if (scale) {
      // A column of up to kLen values (KernelBench 36's 64 channels) held in
      // registers: x read once, where the kernel above reads it twice.
      absl::StrAppend(&s, R"(
template <int kLen>
__global__ void __launch_bounds__(kThreads)
kevo_col_rms_cached(const float* __restrict__ x, float* __restrict__ y, int64_t outer, int64_t len, int64_t inner) {
)",
                      kColumnLoop, R"(    float v[kLen];
#pragma unroll
    for (int r = 0; r < kLen; ++r) v[r] = r < len ? __ldg(p + r * inner) : 0.0f;
    float a = 0.0f;
#pragma unroll
    for (int r = 0; r < kLen; ++r) a += v[r] * v[r];
    const float root = sqrtf(a / static_cast<float>(len) + )",
                      b.eps, R"();
    float* q = y + o * len * inner + j;
#pragma unroll
    for (int r = 0; r < kLen; ++r) {
      if (r < len) q[r * inner] = v[r] / root;
    }
  }
}
)");
    }
    const std::string args = absl::StrCat(b.in, ", ", b.out, ", ", b.outer, ", ", b.len, ", ", b.inner);
    absl::StrAppend(&s, "\n}  // namespace\n\n", definition, " {\n  if (", b.outer, " <= 0 || ", b.inner,
                    " <= 0) return;\n", "  const int64_t kevo_blocks = kevo_min(kevo_ceil_div(", b.outer, " * ",
                    b.inner, ", kThreads), kevo_grid_blocks(2048 / kThreads * 4));\n",
                    "  const dim3 kevo_grid(static_cast<unsigned>(kevo_blocks));\n");
    if (scale) {
      absl::StrAppend(&s, "  if (", b.len, " <= 16) {\n    kevo_col_rms_cached<16><<<kevo_grid, kThreads>>>(", args,
                      ");\n  } else if (", b.len, " <= 32) {\n    kevo_col_rms_cached<32><<<kevo_grid, kThreads>>>(",
                      args, ");\n  } else if (", b.len,
                      " <= 64) {\n    kevo_col_rms_cached<64><<<kevo_grid, kThreads>>>(", args, ");\n  } else {\n  ");
    }
    absl::StrAppend(&s, "  kevo_col_reduce<<<kevo_grid, kThreads>>>(", args, ");\n", scale ? "  }\n" : "", "}\n");
    return CudaCandidate(std::move(s));
  }
};

}  // namespace

std::unique_ptr<Recipe> NewColReduceRecipe() { return std::make_unique<ColReduceRecipe>(); }
std::unique_ptr<Recipe> NewCudaColReduceRecipe() { return std::make_unique<CudaColReduceRecipe>(); }

}  // namespace kevo::proposer
