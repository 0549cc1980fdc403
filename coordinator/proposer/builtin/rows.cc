// Row-wise recipes for float32 matrices x[rows, cols] (row-major):
//   row_reduce          y[r] = sum | max | mean of x[r, :]
//       hints {pattern: row_reduce, op: sum|max|mean, in, out, rows, cols}
//   row_argmax          index[r] = first c maximising x[r, c] (int64 index)
//       hints {pattern: row_reduce, op: argmax, in, out, rows, cols}
//   softmax_three_pass  y[r, :] = softmax(x[r, :]) as max, exp+sum, scale
//   softmax_online      the same with a running (max, sum) per lane
//       hints {pattern: row_softmax, in, out, rows, cols}
//   log_softmax_two_pass   y[r, :] = x[r, :] - (max + log(sum(exp(x - max)))) as
//                          max, exp+sum (nothing stored), subtract
//   log_softmax_online     the same with a running (max, sum) per lane
//       hints {pattern: row_log_softmax, in, out, rows, cols}
//   row_norm            y[r, :] = (x[r, :] - mean) / sqrt(var + eps) * gamma + beta
//                       (layer_norm), or x[r, :] / sqrt(mean(x^2) + eps) * gamma
//                       (rms_norm): the row's statistics, then one writing pass;
//                       with a residual, x[r, :] is in + residual, stored as
//                       sum_out (the residual stream) by the statistics pass
//       hints {pattern: layer_norm | rms_norm, in, out, rows, cols, gamma,
//              beta (layer_norm), eps, residual and sum_out (both or neither)}
//   row_cross_entropy   out[0] = mean over rows of log-sum-exp(x[r, :]) - x[r, target[r]]
//       hints {pattern: row_cross_entropy, in (logits), target, out (loss),
//              rows, cols (classes)}
//   gemv_rows           y[r] = dot(a[r, :], x): matrix-vector product, a few
//                       rows at a time sharing each load of x
//       hints {pattern: gemv, a, x, y, m (rows), k (cols)}
// Rows are split across OpenMP threads; each row is processed with 16-lane
// GCC vector types (one AVX-512 register) and several independent
// accumulators. exp is a vectorised range reduction + polynomial (degree 5, or
// Cephes' degree 7), or glibc's vector expf (needs -ffast-math).
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include "coordinator/proposer/builtin/bound_recipe.h"
#include "coordinator/proposer/builtin/codegen.h"
#include "coordinator/proposer/builtin/gpu_codegen.h"
#include "coordinator/proposer/builtin/recipe.h"

namespace kevo::proposer {

// Binds the hints (defaults: the single input and output, "rows", "cols") and
// checks them against the task: f32 tensors, x of shape [rows, cols], y of
// shape [rows] (reductions, [rows, 1] accepted) or [rows, cols] (softmax).
bool BindRows(const v1::Task& task, bool reduction, RowBinding* b, v1::DType out_dtype) {
  b->in = Hint(task, "in", task.inputs_size() == 1 ? task.inputs(0).name() : "");
  b->out = Hint(task, "out", task.outputs_size() == 1 ? task.outputs(0).name() : "");
  b->rows = Hint(task, "rows", "rows");
  b->cols = Hint(task, "cols", "cols");
  const v1::TensorSpec* x = FindInput(task, b->in);
  const v1::TensorSpec* y = FindOutput(task, b->out);
  if (x == nullptr || y == nullptr || x->dtype() != v1::F32 || y->dtype() != out_dtype) return false;
  if (!IsSignatureParam(task, b->in) || !IsSignatureParam(task, b->out) || !IsSymbolParam(task, b->rows) ||
      !IsSymbolParam(task, b->cols)) {
    return false;
  }
  if (x->shape_size() != 2 || x->shape(0) != b->rows || x->shape(1) != b->cols) return false;
  if (reduction) {
    bool ok = (y->shape_size() == 1 && y->shape(0) == b->rows) ||
              (y->shape_size() == 2 && y->shape(0) == b->rows && y->shape(1) == "1");
    if (!ok) return false;
  } else if (y->shape_size() != 2 || y->shape(0) != b->rows || y->shape(1) != b->cols) {
    return false;
  }
  return DefinitionLine(task).ok();
}

bool IsRowVector(const v1::Task& task, const std::string& name, const std::string& cols) {
  const v1::TensorSpec* t = FindInput(task, name);
  return t != nullptr && t->dtype() == v1::F32 && t->shape_size() == 1 && t->shape(0) == cols &&
         IsSignatureParam(task, name);
}

namespace {

// Float vectors of KEVO_LANES lanes and helpers: 16 (a zmm register on
// AVX-512, a pair of generic halves elsewhere), 8 on AVX2 without AVX-512,
// where GCC keeps a 64-byte vector it cannot hold in one register on the
// stack (every operation read and wrote memory: softmax ran at 0.13x of
// PyTorch on a Zen 3 host).
constexpr char kVectorHelpers[] = R"(
#if defined(__AVX2__) && !defined(__AVX512F__)
#define KEVO_LANES 8
#else
#define KEVO_LANES 16
#endif
typedef float kevo_vf __attribute__((vector_size(KEVO_LANES * 4)));
typedef int32_t kevo_vi __attribute__((vector_size(KEVO_LANES * 4)));
static inline kevo_vf kevo_splat(float v) { return kevo_vf{} + v; }
static inline kevo_vf kevo_load(const float* p) {
  kevo_vf v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
// Loads n < KEVO_LANES floats; the other lanes are `pad`.
static inline kevo_vf kevo_load_part(const float* p, int64_t n, float pad) {
  kevo_vf v = kevo_splat(pad);
  __builtin_memcpy(&v, p, n * sizeof(float));
  return v;
}
static inline void kevo_store(float* p, kevo_vf v) { __builtin_memcpy(p, &v, sizeof v); }
static inline kevo_vf kevo_vmax(kevo_vf a, kevo_vf b) { return a > b ? a : b; }
static inline kevo_vf kevo_add(kevo_vf a, kevo_vf b) { return a + b; }
static inline float kevo_hsum(kevo_vf v) {
  float s = 0;
  for (int l = 0; l < KEVO_LANES; ++l) s += v[l];
  return s;
}
static inline float kevo_hmax(kevo_vf v) {
  float m = v[0];
  for (int l = 1; l < KEVO_LANES; ++l) m = v[l] > m ? v[l] : m;
  return m;
}
)";

// exp(x) for 16 lanes: n = round(x / ln 2), r = x - n ln 2 (two-constant
// Cody-Waite), exp(r) by a polynomial, times 2^n built in the exponent bits.
// Lanes below -87 (including -inf) give 0.
std::string VectorExp(const std::string& kind) {
  std::string poly;
  if (kind == "poly5") {
    // Taylor to degree 5: relative error < 2.5e-6 on |r| <= ln2/2.
    poly =
        "  kevo_vf p = 1.0f + r * (1.0f + r * (0.5f + r * (1.6666667e-1f + r * (4.1666668e-2f + r * "
        "8.3333333e-3f))));\n";
  } else {
    // Cephes expf: relative error ~1e-7.
    poly =
        "  kevo_vf p = ((((1.9875691500E-4f * r + 1.3981999507E-3f) * r + 8.3334519073E-3f) * r +\n"
        "               4.1665795894E-2f) * r + 1.6666665459E-1f) * r + 5.0000001201E-1f;\n"
        "  p = p * (r * r) + r + 1.0f;\n";
  }
  return absl::StrCat(R"(static inline kevo_vf kevo_vexp(kevo_vf x) {
  const kevo_vf zero = {};
  const kevo_vi under = x < kevo_splat(-87.0f);
  x = under ? kevo_splat(-87.0f) : x;
  x = x > kevo_splat(88.0f) ? kevo_splat(88.0f) : x;
  const kevo_vf t = x * 1.44269504088896341f;
  const kevo_vi n = __builtin_convertvector(t + (t < zero ? kevo_splat(-0.5f) : kevo_splat(0.5f)), kevo_vi);
  const kevo_vf nf = __builtin_convertvector(n, kevo_vf);
  kevo_vf r = x - nf * 0.693359375f;
  r = r - nf * -2.12194440e-4f;
)",
                      poly, R"(  const kevo_vi bits = (n + 127) << 23;
  kevo_vf scale;
  __builtin_memcpy(&scale, &bits, sizeof scale);
  return under ? zero : p * scale;
}
)");
}

std::string ParallelFor(const Genome& genome, const std::string& rows) {
  if (StrParam(genome, "threads") == "1") return "";
  return absl::StrCat("#pragma omp parallel for schedule(",
                      StrParam(genome, "schedule") == "static" ? "static" : "dynamic, 4", ")\n");
}

// acc0 = op(acc0, acc1), ... folded pairwise into acc0.
std::string Fold(int64_t count, const std::string& var, const std::string& op) {
  std::string out;
  for (int64_t stride = 1; stride < count; stride *= 2) {
    for (int64_t a = 0; a + stride < count; a += 2 * stride) {
      absl::StrAppend(&out, "    ", var, a, " = ", op, "(", var, a, ", ", var, a + stride, ");\n");
    }
  }
  return out;
}

// The one-pass row recipes' reduction of row kevo_x[0, cols) into float
// kevo_s: `acc` vector accumulators from `init`, each vector kevo_v taken in
// as `combine`(a, `vterm`), folded, then `hfold` across lanes and each tail
// element kevo_e taken by the statement `tail`. kevo_c ends at cols.
std::string RowFold(int64_t acc, const std::string& cols, const std::string& init, const std::string& combine,
                    const std::string& vterm, const std::string& hfold, const std::string& tail) {
  std::string s = "    int64_t kevo_c = 0;\n";
  absl::StrAppend(&s, Repeat(acc, absl::StrCat("    kevo_vf kevo_a# = ", init, ";\n")));
  absl::StrAppend(&s, "    for (; kevo_c + KEVO_LANES * ", acc, " <= ", cols, "; kevo_c += KEVO_LANES * ", acc, ") {\n",
                  Repeat(acc, absl::StrCat("      {\n        const kevo_vf kevo_v = kevo_load(kevo_x + kevo_c + "
                                           "KEVO_LANES * #);\n        kevo_a# = ",
                                           combine, "(kevo_a#, ", vterm, ");\n      }\n")),
                  "    }\n");
  absl::StrAppend(
      &s, "    for (; kevo_c + KEVO_LANES <= ", cols,
      "; kevo_c += KEVO_LANES) {\n      const kevo_vf kevo_v = kevo_load(kevo_x + kevo_c);\n      kevo_a0 = ", combine,
      "(kevo_a0, ", vterm, ");\n    }\n", Fold(acc, "kevo_a", combine), "    float kevo_s = ", hfold,
      "(kevo_a0);\n    for (; kevo_c < ", cols, "; ++kevo_c) {\n      const float kevo_e = kevo_x[kevo_c];\n      ",
      tail, "\n    }\n");
  return s;
}

// ---------------------------------------------------------------- row_reduce

// The space of the one-pass row recipes (row_reduce, row_scale): vector
// accumulators over a row, rows over threads.
SearchSpace RowAccumulatorSpace() {
  return SearchSpace({
      {"accumulators", {"1", "2", "4", "8"}, "4", "independent 16-lane accumulators"},
      {"threads", {"1", "all"}, "all", "OpenMP threads over rows"},
      {"schedule", {"static", "dynamic"}, "static", "OpenMP schedule over rows"},
  });
}

class RowReduceRecipe final : public BoundRecipe<RowBinding> {
 public:
  RowReduceRecipe()
      : BoundRecipe({"row_reduce", "row_reduce", "cpu",
                     "per-row sum/max/mean with several vector accumulators, rows over threads"},
                    RowAccumulatorSpace()) {}

 protected:
  bool Bind(const v1::Task& task, RowBinding* b) const override { return BindRowReduce(task, b); }

  absl::StatusOr<v1::Candidate> Write(const v1::Task& task, const Genome& genome, const RowBinding& b) const override {
    KEVO_ASSIGN_OR_RETURN(std::string definition, DefinitionLine(task));
    const std::string op = Hint(task, "op");
    const bool is_max = op == "max";
    const int64_t acc = IntParam(genome, "accumulators");

    std::string s = kPrelude;
    absl::StrAppend(&s, "// Generated by kevo builtin recipe ", genome.ToString(), "\n", kVectorHelpers, "\n");
    absl::StrAppend(&s, definition, " {\n", ParallelFor(genome, b.rows), "  for (int64_t kevo_r = 0; kevo_r < ", b.rows,
                    "; ++kevo_r) {\n    const float* kevo_x = ", b.in, " + kevo_r * ", b.cols, ";\n");
    absl::StrAppend(&s,
                    is_max ? RowFold(acc, b.cols, "kevo_splat(-3.402823466e38f)", "kevo_vmax", "kevo_v", "kevo_hmax",
                                     "kevo_s = kevo_e > kevo_s ? kevo_e : kevo_s;")
                           : RowFold(acc, b.cols, "kevo_vf{}", "kevo_add", "kevo_v", "kevo_hsum", "kevo_s += kevo_e;"));
    if (op == "mean") absl::StrAppend(&s, "    kevo_s = kevo_s / (float)", b.cols, ";\n");
    absl::StrAppend(&s, "    ", b.out, "[kevo_r] = kevo_s;\n  }\n}\n");
    return CppCandidate(std::move(s));
  }
};

// ---------------------------------------------------------------- row_scale

// y[r, :] = x[r, :] / d_r, d_r the row's L2 norm (norm: l2) or the mean of its
// absolute values (norm: l1_mean): KernelBench's L2Norm and L1Norm, which the
// bridge lowers from `x / torch.norm(x, p=2, dim=-1, keepdim=True)` and
// `x / torch.mean(torch.abs(x), dim=-1, keepdim=True)` (PyTorch: two or three
// passes over x; here one to reduce, one to write, the row from cache).
class RowScaleRecipe final : public BoundRecipe<RowBinding> {
 public:
  RowScaleRecipe()
      : BoundRecipe({"row_scale", "row_scale", "cpu",
                     "per-row norm and divide in one kernel: vector accumulators, then the row divided; rows over "
                     "threads"},
                    RowAccumulatorSpace()) {}

 protected:
  bool Bind(const v1::Task& task, RowBinding* b) const override {
    const std::string norm = Hint(task, "norm");
    return Hint(task, "pattern") == "row_scale" && (norm == "l2" || norm == "l1_mean") &&
           BindRows(task, /*reduction=*/false, b);
  }

  absl::StatusOr<v1::Candidate> Write(const v1::Task& task, const Genome& genome, const RowBinding& b) const override {
    KEVO_ASSIGN_OR_RETURN(std::string definition, DefinitionLine(task));
    const bool l2 = Hint(task, "norm") == "l2";
    const int64_t acc = IntParam(genome, "accumulators");
    // What a vector (v) or a scalar (e) adds to the sum.
    const std::string vterm = l2 ? "kevo_v * kevo_v" : "(kevo_v < kevo_splat(0.0f) ? -kevo_v : kevo_v)";
    const std::string sterm = l2 ? "kevo_e * kevo_e" : "fabsf(kevo_e)";
    std::string s = kPrelude;
    absl::StrAppend(&s, "// Generated by kevo builtin recipe ", genome.ToString(), "\n", kVectorHelpers, "\n");
    absl::StrAppend(
        &s, definition, " {\n", ParallelFor(genome, b.rows), "  for (int64_t kevo_r = 0; kevo_r < ", b.rows,
        "; ++kevo_r) {\n    const float* kevo_x = ", b.in, " + kevo_r * ", b.cols, ";\n    float* kevo_y = ", b.out,
        " + kevo_r * ", b.cols, ";\n",
        RowFold(acc, b.cols, "kevo_vf{}", "kevo_add", vterm, "kevo_hsum", absl::StrCat("kevo_s += ", sterm, ";")));
    absl::StrAppend(&s, "    const float kevo_d = ", l2 ? "sqrtf(kevo_s)" : absl::StrCat("kevo_s / (float)", b.cols),
                    ";\n    const kevo_vf kevo_dv = kevo_splat(kevo_d);\n    kevo_c = 0;\n",
                    "    for (; kevo_c + KEVO_LANES <= ", b.cols,
                    "; kevo_c += KEVO_LANES) kevo_store(kevo_y + kevo_c, kevo_load(kevo_x + kevo_c) / kevo_dv);\n",
                    "    for (; kevo_c < ", b.cols, "; ++kevo_c) kevo_y[kevo_c] = kevo_x[kevo_c] / kevo_d;\n  }\n}\n");
    return CppCandidate(std::move(s));
  }
};

// ---------------------------------------------------------------- gemv_rows

struct GemvBinding {
  std::string a, x, y, m, k;
};

// f32 a [m, k], x [k], y [m]; m and k signature symbols.
bool BindGemv(const v1::Task& task, GemvBinding* b) {
  if (Hint(task, "pattern") != "gemv") return false;
  b->a = Hint(task, "a", "A");
  b->x = Hint(task, "x", "x");
  b->y = Hint(task, "y", "y");
  b->m = Hint(task, "m", "M");
  b->k = Hint(task, "k", "K");
  return IsF32Tensor(task, b->a, {b->m, b->k}, false) && IsF32Tensor(task, b->x, {b->k}, false) &&
         IsF32Tensor(task, b->y, {b->m}, true) && DefinitionLine(task).ok();
}

// Memory-bound: each element of a is read once. Every row is a dot product
// with several 16-lane accumulators (a float sum in one chain runs at the
// adder's latency, not the memory's rate); `rows` rows are done together so
// that each vector of x, loaded once, feeds all of them. The sums are
// reassociated, as any vectorised BLAS's are.
class GemvRowsRecipe final : public BoundRecipe<GemvBinding> {
 public:
  GemvRowsRecipe()
      : BoundRecipe({"gemv_rows", "gemv", "cpu",
                     "y = A x: rows over threads, a few rows sharing each vector of x, several accumulators"},
                    SearchSpace({
                        {"rows", {"1", "2", "4"}, "2", "rows computed together (each load of x feeds them all)"},
                        {"accumulators", {"1", "2", "4"}, "2", "independent 16-lane accumulators per row"},
                        {"threads", {"1", "all"}, "all", "OpenMP threads over rows"},
                        {"schedule", {"static", "dynamic"}, "static", "OpenMP schedule over row blocks"},
                    })) {}

 protected:
  bool Bind(const v1::Task& task, GemvBinding* b) const override { return BindGemv(task, b); }

  absl::StatusOr<v1::Candidate> Write(const v1::Task& task, const Genome& genome, const GemvBinding& b) const override {
    KEVO_ASSIGN_OR_RETURN(std::string definition, DefinitionLine(task));
    const int64_t rows = IntParam(genome, "rows");
    std::string s = kPrelude;
    absl::StrAppend(&s, "// Generated by kevo builtin recipe ", genome.ToString(), "\n", kVectorHelpers, "\n");
    absl::StrAppend(&s, "constexpr int kevo_acc = ", IntParam(genome, "accumulators"), ";\n");
    absl::StrAppend(&s, R"(
// y[0..R) = a[0..R) rows . x, each row k long.
template <int R>
static inline void kevo_rows(const float* a, const float* x, float* y, int64_t k) {
  kevo_vf acc[R][kevo_acc];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int u = 0; u < kevo_acc; ++u) acc[r][u] = kevo_vf{};
  int64_t c = 0;
  for (; c + KEVO_LANES * kevo_acc <= k; c += KEVO_LANES * kevo_acc) {
#pragma GCC unroll 16
    for (int u = 0; u < kevo_acc; ++u) {
      const kevo_vf xv = kevo_load(x + c + KEVO_LANES * u);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) acc[r][u] += kevo_load(a + r * k + c + KEVO_LANES * u) * xv;
    }
  }
  for (; c + KEVO_LANES <= k; c += KEVO_LANES) {
    const kevo_vf xv = kevo_load(x + c);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) acc[r][0] += kevo_load(a + r * k + c) * xv;
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int u = 1; u < kevo_acc; ++u) acc[r][0] += acc[r][u];
    float sum = kevo_hsum(acc[r][0]);
    for (int64_t t = c; t < k; ++t) sum += a[r * k + t] * x[t];
    y[r] = sum;
  }
}
)");
    absl::StrAppend(&s, definition, " {\n  const int64_t kevo_blocks = (", b.m, " + ", rows, " - 1) / ", rows, ";\n",
                    ParallelFor(genome, b.m), "  for (int64_t kevo_i = 0; kevo_i < kevo_blocks; ++kevo_i) {\n",
                    "    const int64_t kevo_r = kevo_i * ", rows, ";\n    const float* kevo_a = ", b.a, " + kevo_r * ",
                    b.k, ";\n    if (kevo_r + ", rows, " <= ", b.m, ") {\n      kevo_rows<", rows, ">(kevo_a, ", b.x,
                    ", ", b.y, " + kevo_r, ", b.k, ");\n    } else {\n      for (int64_t kevo_t = kevo_r; kevo_t < ",
                    b.m, "; ++kevo_t) kevo_rows<1>(", b.a, " + kevo_t * ", b.k, ", ", b.x, ", ", b.y, " + kevo_t, ",
                    b.k, ");\n    }\n  }\n}\n");
    return CppCandidate(std::move(s));
  }
};

// ---------------------------------------------------------------- row_argmax

// The reference's semantics, `if (x[c] > x[best]) best = c` from best = 0:
// the first index of the maximum over the row's non-NaN values, or 0 when
// x[r, 0] is NaN (nothing compares greater than it). Two passes over the row,
// the second from L1: the maximum with vector accumulators that never take a
// NaN lane, then the first index holding it.
class RowArgmaxRecipe final : public BoundRecipe<RowBinding> {
 public:
  RowArgmaxRecipe()
      : BoundRecipe({"row_argmax", "row_reduce", "cpu",
                     "per-row argmax: a vector max pass, then the first index holding it; rows over "
                     "threads"},
                    SearchSpace({
                        {"accumulators", {"1", "2", "4", "8"}, "4", "independent 16-lane maxima"},
                        {"scan",
                         {"vector", "scalar"},
                         "vector",
                         "second pass: 16-lane compares then the lane, or one element at a time"},
                        {"threads", {"1", "all"}, "all", "OpenMP threads over rows"},
                        {"schedule", {"static", "dynamic"}, "static", "OpenMP schedule over rows"},
                    })) {}

 protected:
  bool Bind(const v1::Task& task, RowBinding* b) const override {
    return Hint(task, "pattern") == "row_reduce" && Hint(task, "op") == "argmax" &&
           BindRows(task, /*reduction=*/true, b, v1::I64);
  }

  absl::StatusOr<v1::Candidate> Write(const v1::Task& task, const Genome& genome, const RowBinding& b) const override {
    KEVO_ASSIGN_OR_RETURN(std::string definition, DefinitionLine(task));
    const int64_t acc = IntParam(genome, "accumulators");

    std::string s = kPrelude;
    absl::StrAppend(&s, "// Generated by kevo builtin recipe ", genome.ToString(), "\n", kVectorHelpers,
                    R"(// The larger of a and x lane by lane; a NaN in x keeps a.
static inline kevo_vf kevo_keep_max(kevo_vf a, kevo_vf x) { return x > a ? x : a; }
)",
                    "\n");
    absl::StrAppend(&s, definition, " {\n", ParallelFor(genome, b.rows), "  for (int64_t kevo_r = 0; kevo_r < ", b.rows,
                    "; ++kevo_r) {\n    const float* kevo_x = ", b.in, " + kevo_r * ", b.cols,
                    ";\n    const int64_t kevo_n = ", b.cols, ";\n");
    // Nothing compares greater than a NaN at column 0: the answer is 0, as
    // it is for an empty row.
    absl::StrAppend(&s, "    if (kevo_n <= 1 || kevo_x[0] != kevo_x[0]) {\n      ", b.out,
                    "[kevo_r] = 0;\n      continue;\n    }\n    int64_t kevo_c = 0;\n");
    absl::StrAppend(&s, Repeat(acc, "    kevo_vf kevo_a# = kevo_splat(kevo_x[0]);\n"));
    absl::StrAppend(
        &s, "    for (; kevo_c + ", "KEVO_LANES * ", acc, " <= kevo_n; kevo_c += ", "KEVO_LANES * ", acc, ") {\n",
        Repeat(acc, "      kevo_a# = kevo_keep_max(kevo_a#, kevo_load(kevo_x + kevo_c + KEVO_LANES * #));\n"),
        "    }\n");
    absl::StrAppend(&s,
                    "    for (; kevo_c + KEVO_LANES <= kevo_n; kevo_c += KEVO_LANES) kevo_a0 = kevo_keep_max(kevo_a0, "
                    "kevo_load(kevo_x + kevo_c));\n",
                    Fold(acc, "kevo_a", "kevo_keep_max"),
                    "    float kevo_m = kevo_hmax(kevo_a0);\n    for (; kevo_c < kevo_n; ++kevo_c) kevo_m = "
                    "kevo_x[kevo_c] > kevo_m ? kevo_x[kevo_c] : kevo_m;\n");
    // kevo_m is one of the row's values, so the scan ends inside the row.
    absl::StrAppend(&s, "    int64_t kevo_k = 0;\n");
    if (StrParam(genome, "scan") == "vector") {
      absl::StrAppend(&s, R"(    const kevo_vf kevo_mv = kevo_splat(kevo_m);
    for (; kevo_k + KEVO_LANES <= kevo_n; kevo_k += KEVO_LANES) {
      const kevo_vi kevo_eq = kevo_load(kevo_x + kevo_k) == kevo_mv;
      uint64_t kevo_w[KEVO_LANES / 2], kevo_any = 0;
      __builtin_memcpy(kevo_w, &kevo_eq, sizeof kevo_w);
      for (int kevo_l = 0; kevo_l < KEVO_LANES / 2; ++kevo_l) kevo_any |= kevo_w[kevo_l];
      if (kevo_any != 0) break;
    }
)");
    }
    absl::StrAppend(&s, "    while (kevo_x[kevo_k] != kevo_m) ++kevo_k;\n    ", b.out, "[kevo_r] = kevo_k;\n  }\n}\n");
    return CppCandidate(std::move(s));
  }
};

// ---------------------------------------------------------------- softmax

// The row statistics of softmax, log-softmax and cross-entropy, as code over
// `const float* x` and `int64_t cols`, with kevo_vexp defined.

// Pass 1 (max): leaves `int64_t c`, `float m` and `kevo_vf mv`.
std::string MaxPass(int64_t acc) {
  return absl::StrCat("  int64_t c = 0;\n", Repeat(acc, "  kevo_vf m# = kevo_splat(-3.402823466e38f);\n"),
                      "  for (; c + ", "KEVO_LANES * ", acc, " <= cols; c += ", "KEVO_LANES * ", acc, ") {\n",
                      Repeat(acc, "    m# = kevo_vmax(m#, kevo_load(x + c + KEVO_LANES * #));\n"), "  }\n",
                      "  for (; c + KEVO_LANES <= cols; c += KEVO_LANES) m0 = kevo_vmax(m0, kevo_load(x + c));\n",
                      "  if (c < cols) m0 = kevo_vmax(m0, kevo_load_part(x + c, cols - c, -__builtin_inff()));\n",
                      Fold(acc, "m", "kevo_vmax"),
                      "  const float m = kevo_hmax(m0);\n  const kevo_vf mv = kevo_splat(m);\n");
}

// The max, then the sum of exp(x - max) with nothing stored: leaves
// `int64_t c`, `float m`, `kevo_vf mv` and `float total`.
std::string TwoPassLseStats(int64_t acc) {
  return absl::StrCat(MaxPass(acc), Repeat(acc, "  kevo_vf s# = {};\n"), "  for (c = 0; c + ", "KEVO_LANES * ", acc,
                      " <= cols; c += ", "KEVO_LANES * ", acc, ") {\n",
                      Repeat(acc, "    s# += kevo_vexp(kevo_load(x + c + KEVO_LANES * #) - mv);\n"), "  }\n",
                      "  for (; c + KEVO_LANES <= cols; c += KEVO_LANES) s0 += kevo_vexp(kevo_load(x + c) - mv);\n"
                      "  if (c < cols) s0 += kevo_vexp(kevo_load_part(x + c, cols - c, -__builtin_inff()) - mv);\n",
                      Fold(acc, "s", "kevo_add"), "  const float total = kevo_hsum(s0);\n");
}

// One pass with a running max m and sum s of exp(x - m) per lane; each
// iteration takes `acc` vectors, rescales s once and adds their exps. Leaves
// `int64_t c`, `float mmax`, `kevo_vf mv` and `float total`.
std::string OnlineLseStats(int64_t acc) {
  return absl::StrCat("  int64_t c = 0;\n  kevo_vf m = kevo_splat(-3.402823466e38f), s = {};\n", "  for (; c + ",
                      "KEVO_LANES * ", acc, " <= cols; c += ", "KEVO_LANES * ", acc, ") {\n",
                      Repeat(acc, "    const kevo_vf v# = kevo_load(x + c + KEVO_LANES * #);\n"),
                      "    kevo_vf mn = m;\n", Repeat(acc, "    mn = kevo_vmax(mn, v#);\n"),
                      "    s = s * kevo_vexp(m - mn)", Repeat(acc, " + kevo_vexp(v# - mn)"), ";\n    m = mn;\n  }\n",
                      "  for (; c < cols; c += KEVO_LANES) {\n"
                      "    const kevo_vf v = c + KEVO_LANES <= cols ? kevo_load(x + c)\n"
                      "                                     : kevo_load_part(x + c, cols - c, -__builtin_inff());\n"
                      "    const kevo_vf mn = kevo_vmax(m, v);\n"
                      "    s = s * kevo_vexp(m - mn) + kevo_vexp(v - mn);\n    m = mn;\n  }\n",
                      "  const float mmax = kevo_hmax(m);\n  const kevo_vf mv = kevo_splat(mmax);\n",
                      "  const float total = kevo_hsum(s * kevo_vexp(m - mv));\n");
}

std::vector<ParamSpec> SoftmaxParams(bool three_pass, bool log) {
  std::vector<ParamSpec> p = {
      {"exp",
       {"poly5", "cephes", "libm"},
       "poly5",
       "exp: degree-5 polynomial, Cephes degree-7 polynomial, or glibc vector expf "
       "(-ffast-math)"},
      {"accumulators", {"1", "2", "4", "8"}, "4", "16-lane vectors per loop iteration"},
      {"threads", {"1", "all"}, "all", "OpenMP threads over rows"},
      {"schedule", {"static", "dynamic"}, "static", "OpenMP schedule over rows"},
  };
  if (three_pass && !log) {
    p.push_back(
        {"pass3", {"rescale", "recompute"}, "rescale", "last pass: scale the stored exps, or recompute exp from x"});
  }
  return p;
}

// The name and description of each of the four softmax variants.
RecipeInfo SoftmaxInfo(bool three_pass, bool log) {
  if (log) {
    return three_pass ? RecipeInfo{"log_softmax_two_pass", "softmax", "cpu",
                                   "row max, then the sum of exp (nothing stored), then "
                                   "x - log-sum-exp; vectorised exp"}
                      : RecipeInfo{"log_softmax_online", "softmax", "cpu",
                                   "one pass with a running max and rescaled sum per lane, then "
                                   "x - log-sum-exp"};
  }
  return three_pass ? RecipeInfo{"softmax_three_pass", "softmax", "cpu",
                                 "row max, then exp + sum (stored), then scale; vectorised exp"}
                    : RecipeInfo{"softmax_online", "softmax", "cpu",
                                 "one pass with a running max and rescaled sum per lane, then exp "
                                 "and scale"};
}

// Softmax, or log-softmax (`log`): the same row statistics (max and the sum
// of exp(x - max)); softmax then writes exp(x - max) / sum, log-softmax
// x - (max + log(sum)), which needs no stored exps (two passes over x, not three).
class SoftmaxRecipe final : public BoundRecipe<RowBinding> {
 public:
  SoftmaxRecipe(bool three_pass, bool log)
      : BoundRecipe(SoftmaxInfo(three_pass, log), SearchSpace(SoftmaxParams(three_pass, log))),
        three_pass_(three_pass),
        log_(log) {}

 protected:
  bool Bind(const v1::Task& task, RowBinding* b) const override {
    return Hint(task, "pattern") == (log_ ? "row_log_softmax" : "row_softmax") &&
           BindRows(task, /*reduction=*/false, b);
  }

  absl::StatusOr<v1::Candidate> Write(const v1::Task& task, const Genome& genome, const RowBinding& b) const override {
    KEVO_ASSIGN_OR_RETURN(std::string definition, DefinitionLine(task));
    const std::string& exp = StrParam(genome, "exp");
    const bool libm = exp == "libm";
    const int64_t acc = IntParam(genome, "accumulators");

    std::string s = kPrelude;
    absl::StrAppend(&s, "// Generated by kevo builtin recipe ", genome.ToString(), "\n", kVectorHelpers);
    if (!libm) absl::StrAppend(&s, VectorExp(exp));
    absl::StrAppend(&s,
                    "\nstatic void kevo_row(const float* __restrict x, float* __restrict y, "
                    "int64_t cols) {\n");
    if (log_ && libm) {
      absl::StrAppend(&s, three_pass_ ? RowTwoPassLogLibm() : RowOnlineLibm(/*log=*/true));
    } else if (log_) {
      absl::StrAppend(&s, three_pass_ ? RowTwoPassLog(acc) : RowOnline(acc, /*log=*/true));
    } else if (libm) {
      absl::StrAppend(
          &s, three_pass_ ? RowThreePassLibm(StrParam(genome, "pass3") == "rescale") : RowOnlineLibm(/*log=*/false));
    } else {
      absl::StrAppend(
          &s, three_pass_ ? RowThreePass(acc, StrParam(genome, "pass3") == "rescale") : RowOnline(acc, /*log=*/false));
    }
    absl::StrAppend(&s, "}\n\n", definition, " {\n", ParallelFor(genome, b.rows),
                    "  for (int64_t kevo_r = 0; kevo_r < ", b.rows, "; ++kevo_r) kevo_row(", b.in, " + kevo_r * ",
                    b.cols, ", ", b.out, " + kevo_r * ", b.cols, ", ", b.cols, ");\n}\n");
    v1::Candidate c = CppCandidate(std::move(s));
    if (libm) {
      // glibc declares its vector expf variants only under __FAST_MATH__.
      c.add_extra_flags("-ffast-math");
      c.add_extra_flags("-mprefer-vector-width=512");
    }
    return c;
  }

 private:
  // The final pass writing y = exp(x - m) * inv from x.
  static std::string RecomputePass(int64_t acc) {
    return absl::StrCat(
        "  for (c = 0; c + ", "KEVO_LANES * ", acc, " <= cols; c += ", "KEVO_LANES * ", acc, ") {\n",
        Repeat(acc,
               "    kevo_store(y + c + KEVO_LANES * #, kevo_vexp(kevo_load(x + c + KEVO_LANES * #) - mv) * inv);\n"),
        "  }\n",
        "  for (; c + KEVO_LANES <= cols; c += KEVO_LANES) kevo_store(y + c, kevo_vexp(kevo_load(x + c) - mv) * "
        "inv);\n",
        "  if (c < cols) {\n"
        "    const kevo_vf e = kevo_vexp(kevo_load_part(x + c, cols - c, -__builtin_inff()) - mv) * inv;\n"
        "    __builtin_memcpy(y + c, &e, (cols - c) * sizeof(float));\n  }\n");
  }

  static std::string RowThreePass(int64_t acc, bool rescale) {
    std::string s = MaxPass(acc);
    absl::StrAppend(&s, Repeat(acc, "  kevo_vf s# = {};\n"), "  for (c = 0; c + ", "KEVO_LANES * ", acc,
                    " <= cols; c += ", "KEVO_LANES * ", acc, ") {\n",
                    Repeat(acc,
                           "    const kevo_vf e# = kevo_vexp(kevo_load(x + c + KEVO_LANES * #) - mv);\n"
                           "    kevo_store(y + c + KEVO_LANES * #, e#);\n    s# += e#;\n"),
                    "  }\n",
                    "  for (; c + KEVO_LANES <= cols; c += KEVO_LANES) {\n"
                    "    const kevo_vf e = kevo_vexp(kevo_load(x + c) - mv);\n"
                    "    kevo_store(y + c, e);\n    s0 += e;\n  }\n"
                    "  if (c < cols) {\n"
                    "    const kevo_vf e = kevo_vexp(kevo_load_part(x + c, cols - c, -__builtin_inff()) - mv);\n"
                    "    __builtin_memcpy(y + c, &e, (cols - c) * sizeof(float));\n    s0 += e;\n  }\n",
                    Fold(acc, "s", "kevo_add"), "  const kevo_vf inv = kevo_splat(1.0f / kevo_hsum(s0));\n");
    if (rescale) {
      absl::StrAppend(&s, "  for (c = 0; c + ", "KEVO_LANES * ", acc, " <= cols; c += ", "KEVO_LANES * ", acc, ") {\n",
                      Repeat(acc, "    kevo_store(y + c + KEVO_LANES * #, kevo_load(y + c + KEVO_LANES * #) * inv);\n"),
                      "  }\n  for (; c < cols; ++c) y[c] *= inv[0];\n");
    } else {
      absl::StrAppend(&s, RecomputePass(acc));
    }
    return s;
  }

  // The last pass of log-softmax: y = x - lse, with `kevo_vf lse` in scope.
  static std::string SubtractPass(int64_t acc) {
    return absl::StrCat(
        "  for (c = 0; c + ", "KEVO_LANES * ", acc, " <= cols; c += ", "KEVO_LANES * ", acc, ") {\n",
        Repeat(acc, "    kevo_store(y + c + KEVO_LANES * #, kevo_load(x + c + KEVO_LANES * #) - lse);\n"), "  }\n",
        "  for (; c + KEVO_LANES <= cols; c += KEVO_LANES) kevo_store(y + c, kevo_load(x + c) - lse);\n",
        "  for (; c < cols; ++c) y[c] = x[c] - lse[0];\n");
  }

  // Log-softmax in two passes: the max, then the sum of exp(x - max) with
  // nothing stored, then the subtraction.
  static std::string RowTwoPassLog(int64_t acc) {
    return absl::StrCat(TwoPassLseStats(acc), "  const kevo_vf lse = kevo_splat(m + logf(total));\n",
                        SubtractPass(acc));
  }

  static std::string RowTwoPassLogLibm() {
    return R"(  float m = -3.402823466e38f;
#pragma omp simd reduction(max : m)
  for (int64_t c = 0; c < cols; ++c) m = x[c] > m ? x[c] : m;
  float sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t c = 0; c < cols; ++c) sum += expf(x[c] - m);
  const float lse = m + logf(sum);
#pragma omp simd
  for (int64_t c = 0; c < cols; ++c) y[c] = x[c] - lse;
)";
  }

  static std::string RowOnline(int64_t acc, bool log) {
    std::string s = OnlineLseStats(acc);
    if (log) {
      absl::StrAppend(&s, "  const kevo_vf lse = kevo_splat(mmax + logf(total));\n", SubtractPass(acc));
    } else {
      absl::StrAppend(&s, "  const kevo_vf inv = kevo_splat(1.0f / total);\n", RecomputePass(acc));
    }
    return s;
  }

  static std::string RowThreePassLibm(bool rescale) {
    std::string s = R"(  float m = -3.402823466e38f;
#pragma omp simd reduction(max : m)
  for (int64_t c = 0; c < cols; ++c) m = x[c] > m ? x[c] : m;
  float sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t c = 0; c < cols; ++c) {
    const float e = expf(x[c] - m);
    y[c] = e;
    sum += e;
  }
  const float inv = 1.0f / sum;
)";
    if (rescale) {
      absl::StrAppend(&s, "#pragma omp simd\n  for (int64_t c = 0; c < cols; ++c) y[c] *= inv;\n");
    } else {
      absl::StrAppend(&s, "#pragma omp simd\n  for (int64_t c = 0; c < cols; ++c) y[c] = expf(x[c] - m) * inv;\n");
    }
    return s;
  }

  static std::string RowOnlineLibm(bool log) {
    std::string s = R"(  float ml[16], sl[16];
  for (int l = 0; l < 16; ++l) ml[l] = -3.402823466e38f, sl[l] = 0;
  int64_t c = 0;
  for (; c + 16 <= cols; c += 16) {
#pragma omp simd
    for (int l = 0; l < 16; ++l) {
      const float v = x[c + l];
      const float mn = v > ml[l] ? v : ml[l];
      sl[l] = sl[l] * expf(ml[l] - mn) + expf(v - mn);
      ml[l] = mn;
    }
  }
  for (int l = 0; c + l < cols; ++l) {
    const float v = x[c + l];
    const float mn = v > ml[l] ? v : ml[l];
    sl[l] = sl[l] * expf(ml[l] - mn) + expf(v - mn);
    ml[l] = mn;
  }
  float m = ml[0];
  for (int l = 1; l < 16; ++l) m = ml[l] > m ? ml[l] : m;
  float sum = 0;
  for (int l = 0; l < 16; ++l) sum += sl[l] * expf(ml[l] - m);
)";
    // The last pass: x - log-sum-exp, or the scaled exps.
    const char* last = log ? R"(
  const float lse = m + logf(sum);
#pragma omp simd
  for (int64_t k = 0; k < cols; ++k) y[k] = x[k] - lse;
)"
                           : R"(
  const float inv = 1.0f / sum;
#pragma omp simd
  for (int64_t k = 0; k < cols; ++k) y[k] = expf(x[k] - m) * inv;
)";
    absl::StrAppend(&s, last);
    return s;
  }

  bool three_pass_;
  bool log_;
};

// ---------------------------------------------------------------- cross-entropy

struct CrossEntropyBinding {
  std::string logits, target, out, rows, cols;
};

bool BindCrossEntropy(const v1::Task& task, CrossEntropyBinding* b) {
  if (Hint(task, "pattern") != "row_cross_entropy") return false;
  b->logits = Hint(task, "in", "logits");
  b->target = Hint(task, "target", "target");
  b->out = Hint(task, "out", "loss");
  b->rows = Hint(task, "rows", "rows");
  b->cols = Hint(task, "cols", "classes");
  const v1::TensorSpec* x = FindInput(task, b->logits);
  const v1::TensorSpec* t = FindInput(task, b->target);
  const v1::TensorSpec* y = FindOutput(task, b->out);
  if (x == nullptr || t == nullptr || y == nullptr || x->dtype() != v1::F32 || t->dtype() != v1::I64 ||
      y->dtype() != v1::F32) {
    return false;
  }
  if (x->shape_size() != 2 || x->shape(0) != b->rows || x->shape(1) != b->cols || t->shape_size() != 1 ||
      t->shape(0) != b->rows || y->shape_size() != 1 || y->shape(0) != "1") {
    return false;
  }
  for (const std::string& name : {b->logits, b->target, b->out}) {
    if (!IsSignatureParam(task, name)) return false;
  }
  return IsSymbolParam(task, b->rows) && IsSymbolParam(task, b->cols) && DefinitionLine(task).ok();
}

// Softmax cross-entropy with int64 class targets and the mean over rows:
// per row the log-sum-exp (two passes or one online pass, vector exp) minus
// the target's logit, rows over threads summed in double.
class CrossEntropyRecipe final : public BoundRecipe<CrossEntropyBinding> {
 public:
  CrossEntropyRecipe()
      : BoundRecipe({"row_cross_entropy", "loss", "cpu",
                     "mean softmax cross-entropy: per-row log-sum-exp (max then sum, or online) minus "
                     "the target logit; rows over threads"},
                    SearchSpace({
                        {"stats", {"two_pass", "online"}, "two_pass", "max then sum of exp, or one online pass"},
                        {"exp", {"poly5", "cephes"}, "poly5", "exp: degree-5 or Cephes degree-7 polynomial"},
                        {"accumulators", {"1", "2", "4", "8"}, "4", "16-lane vectors per loop iteration"},
                        {"threads", {"1", "all"}, "all", "OpenMP threads over rows"},
                        {"schedule", {"static", "dynamic"}, "static", "OpenMP schedule over rows"},
                    })) {}

 protected:
  bool Bind(const v1::Task& task, CrossEntropyBinding* b) const override { return BindCrossEntropy(task, b); }

  absl::StatusOr<v1::Candidate> Write(const v1::Task& task, const Genome& genome,
                                      const CrossEntropyBinding& b) const override {
    KEVO_ASSIGN_OR_RETURN(std::string definition, DefinitionLine(task));
    const int64_t acc = IntParam(genome, "accumulators");
    const bool online = StrParam(genome, "stats") == "online";
    std::string s = kPrelude;
    absl::StrAppend(&s, "// Generated by kevo builtin recipe ", genome.ToString(), "\n", kVectorHelpers,
                    VectorExp(StrParam(genome, "exp")));
    // The row's loss in double: log-sum-exp minus the target's logit.
    absl::StrAppend(&s, "\nstatic double kevo_row(const float* __restrict x, int64_t cols, int64_t t) {\n",
                    online ? OnlineLseStats(acc) : TwoPassLseStats(acc), "  return (double)", online ? "mmax" : "m",
                    " + log((double)total) - (double)x[t];\n}\n\n");
    const std::string threads =
        StrParam(genome, "threads") == "1"
            ? ""
            : absl::StrCat("#pragma omp parallel for reduction(+ : kevo_total) schedule(",
                           StrParam(genome, "schedule") == "static" ? "static" : "dynamic, 16", ")\n");
    absl::StrAppend(&s, definition, " {\n  double kevo_total = 0;\n", threads, "  for (int64_t kevo_r = 0; kevo_r < ",
                    b.rows, "; ++kevo_r) kevo_total += kevo_row(", b.logits, " + kevo_r * ", b.cols, ", ", b.cols, ", ",
                    b.target, "[kevo_r]);\n  ", b.out, "[0] = (float)(kevo_total / (double)", b.rows, ");\n}\n");
    return CppCandidate(std::move(s));
  }
};

// The same on nvidia: a warp a row (`mapping` warp: warps take rows in turn,
// merged with shuffles alone) or a block a row (merged through shared
// memory), each thread an online (max, sum of exp) over its share of the row
// (float4s where the row allows, four (two at 1024 threads) loaded before
// they are merged as one chunk); the row's first thread adds its loss in
// double, each block's total (its warps' in warp order) goes to a
// device-global partial, and the last block to finish adds the partials in
// block order (deterministic, no atomics on the sum), then divides by the rows.
class CudaCrossEntropyRecipe final : public BoundRecipe<CrossEntropyBinding> {
 public:
  CudaCrossEntropyRecipe()
      : BoundRecipe({"cuda_row_cross_entropy", "cuda_loss", kCudaPlatform,
                     "CUDA mean softmax cross-entropy: a warp or a block a row, online max and sum of exp, "
                     "the rows' losses added in double in a fixed order"},
                    SearchSpace({
                        {"threads", {"128", "256", "512", "1024"}, "256", "threads per block"},
                        {"vec", {"1", "4"}, "4", "floats per load: 4 reads float4s where the rows are aligned"},
                        {"mapping",
                         {"block", "warp"},
                         "warp",
                         "a block a row (merged through shared memory), or a warp a row (shuffles only: rows of a "
                         "few thousand classes)"},
                    })) {}
  std::vector<std::map<std::string, std::string>> SeedOverrides() const override { return {{{"mapping", "block"}}}; }

 protected:
  bool Bind(const v1::Task& task, CrossEntropyBinding* b) const override { return BindCrossEntropy(task, b); }

  absl::StatusOr<v1::Candidate> Write(const v1::Task& task, const Genome& genome,
                                      const CrossEntropyBinding& b) const override {
    KEVO_ASSIGN_OR_RETURN(std::string definition, DefinitionLine(task));
    const bool vec = IntParam(genome, "vec") == 4;
    std::string s = absl::StrCat(
        "// Generated by kevo builtin recipe ", genome.ToString(), "\n", CudaPrelude(),
        "#include <math.h>\n\nnamespace {\n\nconstexpr int kThreads = ", IntParam(genome, "threads"),
        ";\nconstexpr bool kWarpRows = ", StrParam(genome, "mapping") == "warp" ? "true" : "false", R"(;
// Threads that share a row: a warp, or the block.
constexpr int kT = kWarpRows ? 32 : kThreads;
)",
        CudaGridSum(), R"(// (m, s): a max and the sum of exp(v - m) over what it has seen; (m2, s2)
// merged into it. -inf parts add nothing; a NaN spreads, as in PyTorch.
__device__ __forceinline__ void Merge(float& m, float& s, float m2, float s2) {
  if (m2 > m) {
    s = s * expf(m - m2) + s2;
    m = m2;
  } else if (m2 != -INFINITY) {
    s += s2 * expf(m2 - m);
  }
}

__device__ __forceinline__ void WarpMerge(float& m, float& s) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
    Merge(m, s, m2, s2);
  }
}

__global__ void __launch_bounds__(kThreads)
kevo_cross_entropy(const float* __restrict__ x, const int64_t* __restrict__ target, float* __restrict__ y,
                   int64_t rows, int64_t cols) {
  __shared__ float wm[32], ws[32];
  __shared__ double wt[32];
  double total = 0.0;  // the row group's first thread's: its rows, in order
  const int t = kWarpRows ? threadIdx.x % 32 : threadIdx.x;  // this thread's place in its row group
  const int64_t group = kWarpRows ? static_cast<int64_t>(blockIdx.x) * (kThreads / 32) + threadIdx.x / 32 : blockIdx.x;
  const int64_t groups = kWarpRows ? static_cast<int64_t>(gridDim.x) * (kThreads / 32) : gridDim.x;
)",
        vec ? R"(  const bool by4 = cols % 4 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0;
)"
            : "",
        R"(  for (int64_t r = group; r < rows; r += groups) {
    const float* row = x + r * cols;
    float m = -INFINITY, s = 0.0f;
)",
        vec ? R"(    if (by4) {
      // kLoads float4s in flight, then one merge of their max and sum (two
      // at 1024 threads, whose 64 registers a thread hold no more).
      constexpr int kLoads = kThreads >= 1024 ? 2 : 4;
      const float4* row4 = reinterpret_cast<const float4*>(row);
      const int64_t n4 = cols / 4;
      for (int64_t c0 = t; c0 < n4; c0 += kLoads * kT) {
        float4 v[kLoads];
#pragma unroll
        for (int k = 0; k < kLoads; ++k) {
          const int64_t c = c0 + k * kT;
          v[k] = c < n4 ? __ldg(row4 + c) : make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY);
        }
        float mk = -INFINITY;
#pragma unroll
        for (int k = 0; k < kLoads; ++k) mk = fmaxf(fmaxf(fmaxf(mk, v[k].x), fmaxf(v[k].y, v[k].z)), v[k].w);
        // exp(v - mk), 1 where v is the max itself (an infinite max too).
        auto e = [mk](float x) { return x == mk ? 1.0f : expf(x - mk); };
        float sk = 0.0f;
        if (mk != -INFINITY) {
#pragma unroll
          for (int k = 0; k < kLoads; ++k) sk += e(v[k].x) + e(v[k].y) + e(v[k].z) + e(v[k].w);
        }
        // fmaxf drops NaN: a NaN among the values is merged as itself.
#pragma unroll
        for (int k = 0; k < kLoads; ++k) {
          if (v[k].x != v[k].x || v[k].y != v[k].y || v[k].z != v[k].z || v[k].w != v[k].w) mk = sk = NAN;
        }
        Merge(m, s, mk, sk);
      }
    } else {
      for (int64_t c = t; c < cols; c += kT) Merge(m, s, __ldg(row + c), 1.0f);
    }
)"
            : R"(    for (int64_t c = t; c < cols; c += kT) Merge(m, s, __ldg(row + c), 1.0f);
)",
        R"(    WarpMerge(m, s);
    if (kWarpRows) {
      if (t == 0) total += static_cast<double>(m) + log(static_cast<double>(s)) - row[target[r]];
      continue;
    }
    if (threadIdx.x % 32 == 0) {
      wm[threadIdx.x / 32] = m;
      ws[threadIdx.x / 32] = s;
    }
    __syncthreads();
    if (threadIdx.x < 32) {
      m = threadIdx.x < kThreads / 32 ? wm[threadIdx.x] : -INFINITY;
      s = threadIdx.x < kThreads / 32 ? ws[threadIdx.x] : 0.0f;
      WarpMerge(m, s);
      if (threadIdx.x == 0) total += static_cast<double>(m) + log(static_cast<double>(s)) - row[target[r]];
    }
    __syncthreads();  // wm and ws are read before the next row writes them
  }
  if (kWarpRows) {  // the warps' totals, added in warp order
    if (threadIdx.x % 32 == 0) wt[threadIdx.x / 32] = total;
    __syncthreads();
    if (threadIdx.x == 0) {
      total = 0.0;
      for (int w = 0; w < kThreads / 32; ++w) total += wt[w];
    }
  }
  double sum;
  if (GridSum(threadIdx.x == 0 ? total : 0.0, &sum)) y[0] = static_cast<float>(sum / static_cast<double>(rows));
}

}  // namespace

)",
        definition, " {\n  if (", b.rows, " <= 0) return;\n", "  const int64_t kevo_blocks = kevo_min(kevo_min(",
        b.rows, ", kevo_grid_blocks(2048 / kThreads)), kMaxBlocks);\n",
        "  kevo_cross_entropy<<<static_cast<unsigned>(kevo_blocks), kThreads>>>(", b.logits, ", ", b.target, ", ",
        b.out, ", ", b.rows, ", ", b.cols, ");\n}\n");
    return CudaCandidate(std::move(s));
  }
};

// ---------------------------------------------------------------- row_norm

struct NormBinding {
  RowBinding rows;
  std::string gamma, beta;  // beta empty for rms_norm
  std::string eps;          // a float literal
  bool rms = false;
  // group_norm: gamma and beta per channel (groups * cols / hw of them),
  // each channel `hw` consecutive values of a row; row r is group r % groups.
  std::string groups, hw;
  // Optional residual add: x = in + residual, stored as sum_out (both empty
  // without one).
  std::string residual, sum_out;
};

// Layer norm over each row (mean, biased variance, scale and shift), or RMS
// norm (no mean, no shift): the statistics in one or two passes over the row
// (which stays in L1/L2 between them), then a pass that writes y, optionally
// with streaming stores (no read-for-ownership of y's lines). Group norm is
// layer norm whose rows are (sample, group) and whose scale and shift are
// per channel: the writing pass goes a channel at a time. With a residual
// (layer or RMS norm), the statistics pass reads in + residual and stores it
// as sum_out with plain stores (the row stays in cache), and the later passes
// read that.
class RowNormRecipe final : public BoundRecipe<NormBinding> {
 public:
  RowNormRecipe()
      : BoundRecipe(
            {"row_norm", "norm", "cpu",
             "layer/RMS norm per row: statistics in one or two vector passes, then one "
             "writing pass; rows over threads"},
            SearchSpace({
                {"stats",
                 {"two_pass", "one_pass"},
                 "two_pass",
                 "layer norm's variance from centred squares after the mean (two passes), or "
                 "from the sum and sum of squares of values shifted by the row's first, in one"},
                {"accumulators", {"1", "2", "4", "8"}, "4", "independent 16-lane accumulators"},
                {"store", {"normal", "nontemporal"}, "nontemporal", "streaming stores for y (no read-for-ownership)"},
                {"threads", {"1", "all"}, "all", "OpenMP threads over rows"},
                {"schedule", {"static", "dynamic"}, "static", "OpenMP schedule over rows"},
            })) {}

 protected:
  bool Bind(const v1::Task& task, NormBinding* b) const override {
    const std::string pattern = Hint(task, "pattern");
    if (pattern != "layer_norm" && pattern != "rms_norm" && pattern != "group_norm") return false;
    b->rms = pattern == "rms_norm";
    if (!BindRows(task, /*reduction=*/false, &b->rows)) return false;
    std::string per = b->rows.cols;  // gamma and beta's length
    if (pattern == "group_norm") {
      b->groups = Hint(task, "groups", "groups");
      b->hw = Hint(task, "hw", "hw");
      if (!IsSymbolParam(task, b->groups) || !IsSymbolParam(task, b->hw)) return false;
      per = absl::StrCat(b->groups, " * ", b->rows.cols, " / ", b->hw);
    }
    b->gamma = Hint(task, "gamma", "gamma");
    if (!IsRowVector(task, b->gamma, per)) return false;
    if (!b->rms) {
      b->beta = Hint(task, "beta", "beta");
      if (!IsRowVector(task, b->beta, per)) return false;
    }
    double eps = 0;
    if (!absl::SimpleAtod(Hint(task, "eps", b->rms ? "1e-6" : "1e-5"), &eps) || !(eps >= 0)) return false;
    b->eps = absl::StrFormat("%.9gf", eps);
    // The residual add: both hints or neither; f32 [rows, cols] tensors, the
    // residual an input and its sum an output other than y.
    b->residual = Hint(task, "residual");
    b->sum_out = Hint(task, "sum_out");
    if (b->residual.empty() != b->sum_out.empty()) return false;
    if (!b->residual.empty()) {
      if (pattern == "group_norm" || b->sum_out == b->rows.out) return false;
      const v1::TensorSpec* r = FindInput(task, b->residual);
      const v1::TensorSpec* h = FindOutput(task, b->sum_out);
      for (const v1::TensorSpec* t : {r, h}) {
        if (t == nullptr || t->dtype() != v1::F32 || t->shape_size() != 2 || t->shape(0) != b->rows.rows ||
            t->shape(1) != b->rows.cols) {
          return false;
        }
      }
      if (!IsSignatureParam(task, b->residual) || !IsSignatureParam(task, b->sum_out)) return false;
    }
    return true;
  }

  absl::StatusOr<v1::Candidate> Write(const v1::Task& task, const Genome& genome, const NormBinding& b) const override {
    KEVO_ASSIGN_OR_RETURN(std::string definition, DefinitionLine(task));
    const int64_t acc = IntParam(genome, "accumulators");
    const bool one_pass = StrParam(genome, "stats") == "one_pass";
    const bool nontemporal = StrParam(genome, "store") == "nontemporal";
    const std::string step = absl::StrCat("KEVO_LANES * ", acc);

    std::string s = kPrelude;
    absl::StrAppend(&s, "// Generated by kevo builtin recipe ", genome.ToString(), "\n", kVectorHelpers);
    if (nontemporal) absl::StrAppend(&s, StreamingStore("float", "kevo_vf"));
    const bool group = !b.groups.empty();
    // With a residual the row is xin + rs, stored into x (sum_out) by the
    // statistics pass; the later passes read x.
    const bool residual = !b.residual.empty();
    absl::StrAppend(&s, "\nstatic void kevo_row(",
                    residual ? "const float* __restrict xin, const float* __restrict rs, float* __restrict x"
                             : "const float* __restrict x",
                    ", const float* __restrict g, ", b.rms ? "" : "const float* __restrict bt, ",
                    "float* __restrict y, int64_t cols", group ? ", int64_t hw" : "", ") {\n",
                    "  const float n = (float)cols;\n  int64_t c = 0;\n");
    // The statistics: mean (layer norm) and 1 / sqrt(var + eps).
    const bool sum_squares = b.rms || one_pass;
    // Layer norm's one pass sums values shifted by the row's first (padding
    // lanes are that value, adding nothing): without the shift, a row whose
    // mean is large against its spread loses its variance to cancellation.
    const bool shifted = one_pass && !b.rms;
    if (shifted) {
      absl::StrAppend(&s, "  const float k = cols > 0 ? ", residual ? "xin[0] + rs[0]" : "x[0]",
                      " : 0.0f;\n  const kevo_vf kv = kevo_splat(k);\n");
    }
    if (!b.rms) absl::StrAppend(&s, Repeat(acc, "  kevo_vf s# = {};\n"));
    if (sum_squares) absl::StrAppend(&s, Repeat(acc, "  kevo_vf q# = {};\n"));
    const std::string body = shifted
                                 ? "    const kevo_vf d# = v# - kv;\n    s# += d#;\n    q# += d# * d#;\n"
                                 : absl::StrCat(b.rms ? "" : "    s# += v#;\n", b.rms ? "    q# += v# * v#;\n" : "");
    // The row's vectors: x's, or xin + rs stored into x (the tail's padding
    // lanes are the pad plus 0, and only its cols - c values are stored).
    const std::string pad = shifted ? "k" : "0.0f";
    const std::string load =
        residual ? "    const kevo_vf v# = kevo_load(xin + c + KEVO_LANES * #) + kevo_load(rs + c + KEVO_LANES * #);\n"
                   "    kevo_store(x + c + KEVO_LANES * #, v#);\n"
                 : "    const kevo_vf v# = kevo_load(x + c + KEVO_LANES * #);\n";
    const std::string load_tail =
        residual ? absl::StrCat("    const kevo_vf v0 = kevo_load_part(xin + c, cols - c, ", pad,
                                ") + kevo_load_part(rs + c, cols - c, 0.0f);\n",
                                "    __builtin_memcpy(x + c, &v0, (cols - c) * sizeof(float));\n")
                 : absl::StrCat("    const kevo_vf v0 = kevo_load_part(x + c, cols - c, ", pad, ");\n");
    absl::StrAppend(&s, "  for (; c + ", step, " <= cols; c += ", step, ") {\n", Repeat(acc, load), Repeat(acc, body),
                    "  }\n", "  for (; c + KEVO_LANES <= cols; c += KEVO_LANES) {\n", Repeat(1, load), Repeat(1, body),
                    "  }\n", "  if (c < cols) {\n", load_tail, Repeat(1, body), "  }\n");
    if (shifted) {
      absl::StrAppend(&s, Fold(acc, "s", "kevo_add"), "  const float shift = kevo_hsum(s0) / n;\n",
                      "  const float mean = k + shift;\n");
    } else if (!b.rms) {
      absl::StrAppend(&s, Fold(acc, "s", "kevo_add"), "  const float mean = kevo_hsum(s0) / n;\n");
    }
    if (sum_squares) absl::StrAppend(&s, Fold(acc, "q", "kevo_add"));
    if (b.rms) {
      absl::StrAppend(&s, "  const float var = kevo_hsum(q0) / n;\n");
    } else if (one_pass) {
      absl::StrAppend(&s, "  float var = kevo_hsum(q0) / n - shift * shift;\n  var = var > 0.0f ? var : 0.0f;\n");
    } else {
      // Centred squares from the row just read (in cache); the tail's
      // padding lanes are set to the mean so they add nothing.
      absl::StrAppend(
          &s, "  const kevo_vf mv = kevo_splat(mean);\n", Repeat(acc, "  kevo_vf q# = {};\n"), "  for (c = 0; c + ",
          step, " <= cols; c += ", step, ") {\n",
          Repeat(acc, "    const kevo_vf d# = kevo_load(x + c + KEVO_LANES * #) - mv;\n    q# += d# * d#;\n"), "  }\n",
          "  for (; c + KEVO_LANES <= cols; c += KEVO_LANES) {\n    const kevo_vf d = kevo_load(x + c) - mv;\n",
          "    q0 += d * d;\n  }\n",
          "  if (c < cols) {\n    const kevo_vf d = kevo_load_part(x + c, cols - c, mean) - mv;\n",
          "    q0 += d * d;\n  }\n", Fold(acc, "q", "kevo_add"), "  const float var = kevo_hsum(q0) / n;\n");
    }
    absl::StrAppend(&s, "  const float inv = 1.0f / sqrtf(var + ", b.eps,
                    ");\n  const kevo_vf iv = kevo_splat(inv);\n");
    if (!b.rms && one_pass) absl::StrAppend(&s, "  const kevo_vf mv = kevo_splat(mean);\n");
    // The writing pass.
    const std::string scalar = b.rms ? "y[c] = x[c] * inv * g[c];" : "y[c] = (x[c] - mean) * inv * g[c] + bt[c];";
    const std::string vec = b.rms
                                ? "kevo_load(x + c + KEVO_LANES * #) * iv * kevo_load(g + c + KEVO_LANES * #)"
                                : "(kevo_load(x + c + KEVO_LANES * #) - mv) * iv * kevo_load(g + c + KEVO_LANES * #) + "
                                  "kevo_load(bt + c + KEVO_LANES * #)";
    const std::string put = nontemporal ? "kevo_stream" : "kevo_store";
    if (group) {
      // A channel at a time: its scale and shift splatted over its hw values.
      absl::StrAppend(&s, "  for (int64_t ch = 0; ch * hw < cols; ++ch) {\n",
                      "    const float gs = g[ch], bs = bt[ch];\n",
                      "    const kevo_vf gv = kevo_splat(gs), bv = kevo_splat(bs);\n",
                      "    const int64_t end = (ch + 1) * hw;\n    c = ch * hw;\n");
      const std::string one = "y[c] = (x[c] - mean) * inv * gs + bs;";
      if (nontemporal) absl::StrAppend(&s, "    for (; c < end && ((uintptr_t)(y + c) & 63) != 0; ++c) ", one, "\n");
      absl::StrAppend(&s, "    for (; c + KEVO_LANES <= end; c += KEVO_LANES) ", put,
                      "(y + c, (kevo_load(x + c) - mv) * iv * gv + bv);\n", "    for (; c < end; ++c) ", one,
                      "\n  }\n}\n\n");
    } else {
      absl::StrAppend(&s, "  c = 0;\n");
      if (nontemporal) absl::StrAppend(&s, "  for (; c < cols && ((uintptr_t)(y + c) & 63) != 0; ++c) ", scalar, "\n");
      absl::StrAppend(&s, "  for (; c + ", step, " <= cols; c += ", step, ") {\n",
                      Repeat(acc, absl::StrCat("    ", put, "(y + c + KEVO_LANES * #, ", vec, ");\n")), "  }\n",
                      "  for (; c + KEVO_LANES <= cols; c += KEVO_LANES) ",
                      Repeat(1, absl::StrCat(put, "(y + c + KEVO_LANES * #, ", vec, ");\n")),
                      "  for (; c < cols; ++c) ", scalar, "\n}\n\n");
    }
    // Group norm's row r is group r % groups: its channels' scale and shift.
    const std::string affine_at = group ? absl::StrCat(" + kevo_r % ", b.groups, " * kevo_cpg") : std::string();
    const std::string prologue =
        group ? absl::StrCat("  if (", b.hw, " <= 0 || ", b.rows.cols, " % ", b.hw, " != 0) return;\n",
                             "  const int64_t kevo_cpg = ", b.rows.cols, " / ", b.hw, ";  // channels a group\n",
                             "  if (", b.groups, " <= 0) return;\n")
              : "";
    const std::string at_row = absl::StrCat(" + kevo_r * ", b.rows.cols);
    const std::string row_in = residual
                                   ? absl::StrCat(b.rows.in, at_row, ", ", b.residual, at_row, ", ", b.sum_out, at_row)
                                   : absl::StrCat(b.rows.in, at_row);
    const std::string loop =
        absl::StrCat("  for (int64_t kevo_r = 0; kevo_r < ", b.rows.rows, "; ++kevo_r) kevo_row(", row_in, ", ",
                     b.gamma, affine_at, ", ", b.rms ? "" : absl::StrCat(b.beta, affine_at, ", "), b.rows.out,
                     " + kevo_r * ", b.rows.cols, ", ", b.rows.cols, group ? absl::StrCat(", ", b.hw) : "", ");\n");
    constexpr char kFence[] = "#if defined(__SSE2__)\n  _mm_sfence();\n#endif\n";
    absl::StrAppend(&s, definition, " {\n", prologue);
    if (!nontemporal) {
      absl::StrAppend(&s, ParallelFor(genome, b.rows.rows), loop);
    } else if (StrParam(genome, "threads") == "1") {
      absl::StrAppend(&s, loop, kFence);
    } else {
      // Each thread fences its own streaming stores before the region ends.
      absl::StrAppend(&s, "#pragma omp parallel\n  {\n", ReplaceWord(ParallelFor(genome, b.rows.rows), "parallel", ""),
                      loop, kFence, "  }\n");
    }
    absl::StrAppend(&s, "}\n");
    return CppCandidate(std::move(s));
  }
};

}  // namespace

std::unique_ptr<Recipe> NewRowNormRecipe() { return std::make_unique<RowNormRecipe>(); }
std::unique_ptr<Recipe> NewCrossEntropyRecipe() { return std::make_unique<CrossEntropyRecipe>(); }
std::unique_ptr<Recipe> NewCudaCrossEntropyRecipe() { return std::make_unique<CudaCrossEntropyRecipe>(); }
std::unique_ptr<Recipe> NewRowReduceRecipe() { return std::make_unique<RowReduceRecipe>(); }
std::unique_ptr<Recipe> NewRowScaleRecipe() { return std::make_unique<RowScaleRecipe>(); }
std::unique_ptr<Recipe> NewRowArgmaxRecipe() { return std::make_unique<RowArgmaxRecipe>(); }
std::unique_ptr<Recipe> NewGemvRowsRecipe() { return std::make_unique<GemvRowsRecipe>(); }
std::unique_ptr<Recipe> NewSoftmaxThreePassRecipe() {
  return std::make_unique<SoftmaxRecipe>(/*three_pass=*/true, /*log=*/false);
}
std::unique_ptr<Recipe> NewSoftmaxOnlineRecipe() {
  return std::make_unique<SoftmaxRecipe>(/*three_pass=*/false, /*log=*/false);
}
std::unique_ptr<Recipe> NewLogSoftmaxTwoPassRecipe() {
  return std::make_unique<SoftmaxRecipe>(/*three_pass=*/true, /*log=*/true);
}
std::unique_ptr<Recipe> NewLogSoftmaxOnlineRecipe() {
  return std::make_unique<SoftmaxRecipe>(/*three_pass=*/false, /*log=*/true);
}

}  // namespace kevo::proposer
