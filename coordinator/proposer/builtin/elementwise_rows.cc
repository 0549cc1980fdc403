// Recipe "elementwise_rows" for the CPU: out[r][c] = expr(inputs) where some
// inputs are vectors along the last dimension, broadcast over the rows (a
// per-feature lambda, scale or bias), the others the output's shape; hints
// {pattern: elementwise, expr, out} as for "elementwise", which takes the
// tasks whose inputs all have the output's shape.
//
// Rows go over OpenMP threads; each row is one `omp simd` loop over the
// columns that reads the broadcast inputs at the column. The libm functions
// the expression calls get libmvec's vector variants (declare simd,
// -fno-math-errno), and `pow=exp_log` computes powf(a, b) as
// expf(b * logf(a)): libmvec's powf handles every corner of pow and costs
// about three times its exp and log, and where the expression also takes
// logf(a) (Box-Cox) that log is shared. exp(b log a) is within a few float
// ulps of pow(a, b) for a > 0 and moderate |b log a|; for a <= 0 it gives NaN
// or 0 where pow gives a real value (a negative a and an integer b): so the
// rewrite is a search choice, checked by validation like any other.
#include <cctype>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include "common/tensor.h"
#include "coordinator/proposer/builtin/bound_recipe.h"
#include "coordinator/proposer/builtin/codegen.h"
#include "coordinator/proposer/builtin/recipe.h"

namespace kevo::proposer {
namespace {

struct BroadcastBinding {
  std::string out, cols;            // cols: the output's last dimension
  std::vector<std::string> inputs;  // those the expression reads, in task order
  std::vector<bool> broadcast;      // per input: a [cols] vector
};

bool BindBroadcastRows(const v1::Task& task, BroadcastBinding* b) {
  if (Hint(task, "pattern") != "elementwise") return false;
  b->out = ElementwiseOutputName(task);
  const v1::TensorSpec* out = FindOutput(task, b->out);
  if (out == nullptr || out->dtype() != v1::F32 || out->shape_size() < 2 || !IsSignatureParam(task, b->out)) {
    return false;
  }
  b->cols = out->shape(out->shape_size() - 1);
  const ExprInfo info = AnalyzeExpr(task, Hint(task, "expr"));
  if (!info.ok) return false;
  bool any = false;
  for (const std::string& name : info.inputs) {
    const v1::TensorSpec* in = FindInput(task, name);
    if (in == nullptr || in->dtype() != v1::F32 || !IsSignatureParam(task, name)) return false;
    const bool row_vector = in->shape_size() == 1 && in->shape(0) == b->cols;
    if (!row_vector && !SameShape(*in, *out)) return false;
    b->inputs.push_back(name);
    b->broadcast.push_back(row_vector);
    any = any || row_vector;
  }
  return any && DefinitionLine(task).ok();
}

// The end of the parenthesised argument list that starts at expr[open] ('('),
// and the top-level commas in it; npos when unbalanced.
size_t CloseParen(const std::string& expr, size_t open, std::vector<size_t>* commas) {
  int depth = 0;
  for (size_t i = open; i < expr.size(); ++i) {
    if (expr[i] == '(') ++depth;
    if (expr[i] == ')' && --depth == 0) return i;
    if (expr[i] == ',' && depth == 1) commas->push_back(i);
  }
  return std::string::npos;
}

// `expr` with each powf(a, b) written expf((b) * logf(a)); unchanged where a
// call does not parse as two arguments.
std::string PowAsExpLog(std::string expr) {
  size_t from = 0;
  for (size_t at; (at = expr.find("powf(", from)) != std::string::npos;) {
    from = at + 1;
    if (at > 0 && (std::isalnum(static_cast<unsigned char>(expr[at - 1])) || expr[at - 1] == '_')) continue;
    std::vector<size_t> commas;
    const size_t open = at + 4, close = CloseParen(expr, open, &commas);
    if (close == std::string::npos || commas.size() != 1) continue;
    const std::string a = expr.substr(open + 1, commas[0] - open - 1);
    const std::string b = expr.substr(commas[0] + 1, close - commas[0] - 1);
    const std::string rewritten = absl::StrCat("expf((", b, ") * logf(", a, "))");
    expr.replace(at, close + 1 - at, rewritten);
    from = at + rewritten.size();
  }
  return expr;
}

class ElementwiseRowsRecipe final : public BoundRecipe<BroadcastBinding> {
 public:
  ElementwiseRowsRecipe()
      : BoundRecipe({"elementwise_rows", "elementwise", "cpu",
                     "out[r][c] = expr(inputs) with per-column vectors broadcast over rows: rows over "
                     "threads, an omp simd loop a row, libm calls through libmvec"},
                    SearchSpace({
                        {"pow", {"libm", "exp_log"}, "exp_log", "powf(a, b) as called, or as expf(b * logf(a))"},
                        {"vector_math",
                         {"libmvec", "off"},
                         "libmvec",
                         "libm calls through glibc's vector variants, or one scalar call per element"},
                        {"threads", {"1", "all"}, "all", "OpenMP threads over rows"},
                    })) {}

 protected:
  bool Bind(const v1::Task& task, BroadcastBinding* b) const override { return BindBroadcastRows(task, b); }

  absl::StatusOr<v1::Candidate> Write(const v1::Task& task, const Genome& genome,
                                      const BroadcastBinding& b) const override {
    KEVO_ASSIGN_OR_RETURN(std::string definition, DefinitionLine(task));
    std::string expr = Hint(task, "expr");
    if (StrParam(genome, "pow") == "exp_log") expr = PowAsExpLog(expr);
    const std::string min_max = SelectMinMax(&expr);
    const std::string selects = SelectBothArms(&expr);
    const std::string vector_calls = StrParam(genome, "vector_math") == "libmvec" ? LibmvecDeclarations(expr) : "";
    std::vector<std::string> params, args;
    for (size_t i = 0; i < b.inputs.size(); ++i) {
      params.push_back(absl::StrCat("float ", b.inputs[i]));
      args.push_back(absl::StrCat(b.inputs[i], b.broadcast[i] ? "[kevo_c]" : "[kevo_r * kevo_cols + kevo_c]"));
    }
    std::string s = absl::StrCat(
        kPrelude, "#include <omp.h>\n\n// Generated by kevo builtin recipe ", genome.ToString(), "\n", vector_calls,
        min_max, selects, "static inline float kevo_op(", absl::StrJoin(params, ", "), ") { return (float)(", expr,
        "); }\n\n", definition, " {\n  const int64_t kevo_n = ", ElementCountExpr(*FindOutput(task, b.out)),
        ", kevo_cols = ", b.cols, ";\n", "  if (kevo_n <= 0 || kevo_cols <= 0) return;\n",
        "  const int64_t kevo_rows = kevo_n / kevo_cols;\n",
        StrParam(genome, "threads") == "all" ? "#pragma omp parallel for schedule(static)\n" : "",
        "  for (int64_t kevo_r = 0; kevo_r < kevo_rows; ++kevo_r) {\n#pragma omp simd\n",
        "    for (int64_t kevo_c = 0; kevo_c < kevo_cols; ++kevo_c)\n      ", b.out,
        "[kevo_r * kevo_cols + kevo_c] = kevo_op(", absl::StrJoin(args, ", "), ");\n  }\n}\n");
    v1::Candidate candidate = CppCandidate(std::move(s));
    if (!vector_calls.empty()) {
      // libm's functions are then pure, so the simd loop may call them for
      // every lane (both arms of a select are computed).
      candidate.add_extra_flags("-fno-math-errno");
      candidate.add_extra_flags("-mprefer-vector-width=512");
    }
    return candidate;
  }
};

}  // namespace

std::unique_ptr<Recipe> NewElementwiseRowsRecipe() { return std::make_unique<ElementwiseRowsRecipe>(); }

}  // namespace kevo::proposer
