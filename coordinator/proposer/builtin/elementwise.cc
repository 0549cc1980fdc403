// Recipe "elementwise": out[i] = expr(inputs[i]) over every element, for
// tasks with hints {pattern: elementwise, expr: <C expression over input
// names>, out: <output name>}. Vectorised with GCC vector extensions (or an
// `omp simd` loop when the expression calls functions or, for float, has
// double literals), threaded with OpenMP,
// optionally with nontemporal (streaming) stores. The libm functions an
// expression calls are vectorised through glibc's libmvec (vector_math):
// `#pragma omp declare simd` on their declarations and -fno-math-errno let
// GCC call e.g. _ZGVeN16v_expm1f in the simd loop, without -ffast-math (whose
// crtfastmath turns on flush-to-zero for the whole process). vector_math
// `inline` takes kevo's own branch-free approximation where it has one
// (erff), which the simd loop inlines, and libmvec for the other calls.
#include <algorithm>
#include <cctype>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include "common/tensor.h"
#include "coordinator/proposer/builtin/codegen.h"
#include "coordinator/proposer/builtin/recipe.h"

namespace kevo::proposer {

ExprInfo AnalyzeExpr(const v1::Task& task, const std::string& expr) {
  ExprInfo info;
  std::set<std::string> used;
  size_t i = 0;
  while (i < expr.size()) {
    unsigned char c = expr[i];
    if (std::isdigit(c) || (c == '.' && i + 1 < expr.size() && std::isdigit(expr[i + 1]))) {
      const size_t start = i;
      while (i < expr.size() && (std::isalnum(static_cast<unsigned char>(expr[i])) || expr[i] == '.' ||
                                 ((expr[i] == '+' || expr[i] == '-') && (expr[i - 1] == 'e' || expr[i - 1] == 'E')))) {
        ++i;
      }
      const std::string literal = expr.substr(start, i - start);
      const bool hex = literal.size() > 1 && (literal[1] == 'x' || literal[1] == 'X');
      const bool floating = !hex && literal.find_first_of(".eE") != std::string::npos;
      if (floating && literal.back() != 'f' && literal.back() != 'F') info.double_literals = true;
      continue;
    }
    if (std::isalpha(c) || c == '_') {
      size_t start = i;
      while (i < expr.size() && (std::isalnum(static_cast<unsigned char>(expr[i])) || expr[i] == '_')) ++i;
      std::string id = expr.substr(start, i - start);
      size_t j = i;
      while (j < expr.size() && std::isspace(static_cast<unsigned char>(expr[j]))) ++j;
      if (j < expr.size() && expr[j] == '(') {
        info.calls_functions = true;
      } else if (FindInput(task, id) != nullptr) {
        used.insert(id);
      } else {
        return info;  // an unknown name
      }
      continue;
    }
    if (std::string_view("+-*/()<>=!?:&|^%~, \t").find(static_cast<char>(c)) == std::string_view::npos) {
      return info;  // e.g. ';', '{', '[': not a plain expression
    }
    ++i;
  }
  for (const auto& t : task.inputs()) {
    if (used.count(t.name())) info.inputs.push_back(t.name());
  }
  info.ok = !info.inputs.empty();
  return info;
}

namespace {

// Calls `f(start, end, call)` for each identifier of `expr` in order: its
// bytes [start, end), and whether a '(' follows it (past spaces).
template <typename F>
void ForEachIdentifier(const std::string& expr, F f) {
  size_t i = 0;
  while (i < expr.size()) {
    if (!std::isalpha(static_cast<unsigned char>(expr[i])) && expr[i] != '_') {
      ++i;
      continue;
    }
    const size_t start = i;
    while (i < expr.size() && (std::isalnum(static_cast<unsigned char>(expr[i])) || expr[i] == '_')) ++i;
    size_t j = i;
    while (j < expr.size() && std::isspace(static_cast<unsigned char>(expr[j]))) ++j;
    f(start, i, j < expr.size() && expr[j] == '(');
  }
}

}  // namespace

std::string SelectMinMax(std::string* expr) {
  struct MinMax {
    const char* name;
    const char* type;
    const char* compare;
  };
  static constexpr MinMax kMinMax[] = {
      {"fmaxf", "float", ">="}, {"fminf", "float", "<="}, {"fmax", "double", ">="}, {"fmin", "double", "<="}};
  std::set<std::string> used;
  std::string out;
  size_t copied = 0;  // expr's bytes before this are in out
  ForEachIdentifier(*expr, [&](size_t start, size_t end, bool call) {
    const std::string id = expr->substr(start, end - start);
    if (!call || std::none_of(std::begin(kMinMax), std::end(kMinMax), [&](const MinMax& m) { return id == m.name; })) {
      return;
    }
    used.insert(id);
    out.append(*expr, copied, start - copied);
    out += "kevo_";
    copied = start;
  });
  out.append(*expr, copied);
  *expr = std::move(out);
  std::string definitions;
  for (const MinMax& m : kMinMax) {
    if (!used.count(m.name)) continue;
    // (a >= b || b != b) ? a : b is glibc's own definition of fmax.
    absl::StrAppend(&definitions, "static inline ", m.type, " kevo_", m.name, "(", m.type, " a, ", m.type,
                    " b) { return (a ", m.compare, " b || b != b) ? a : b; }\n");
  }
  return definitions;
}

namespace {

// The index of the bracket that closes the one at `open`, or npos.
size_t Closing(const std::string& e, size_t open) {
  int depth = 0;
  for (size_t i = open; i < e.size(); ++i) {
    if (e[i] == '(') ++depth;
    if (e[i] == ')' && --depth == 0) return i;
  }
  return std::string::npos;
}

// Positions in `e` of any of `chars` outside brackets.
std::vector<size_t> TopLevel(const std::string& e, std::string_view chars) {
  std::vector<size_t> at;
  for (size_t i = 0; i < e.size(); ++i) {
    if (e[i] == '(') {
      i = Closing(e, i);
      if (i == std::string::npos) return at;
    } else if (chars.find(e[i]) != std::string_view::npos) {
      at.push_back(i);
    }
  }
  return at;
}

std::string RewriteSelects(const std::string& e);

// `e` with the contents of its brackets rewritten.
std::string RewriteBrackets(const std::string& e) {
  std::string out;
  for (size_t i = 0; i < e.size(); ++i) {
    const size_t close = e[i] == '(' ? Closing(e, i) : std::string::npos;
    if (close == std::string::npos) {
      out += e[i];
      continue;
    }
    absl::StrAppend(&out, "(", RewriteSelects(e.substr(i + 1, close - i - 1)), ")");
    i = close;
  }
  return out;
}

// One comma-free operand: `c ? a : b` (?: binds loosest, so a '?' outside
// brackets splits the whole operand), or an expression without one.
std::string RewriteOperand(const std::string& e) {
  const std::vector<size_t> marks = TopLevel(e, "?:");
  if (marks.empty() || e[marks[0]] != '?') return RewriteBrackets(e);
  const size_t q = marks[0];
  // The ':' that pairs with it: nested `?:` in the middle arm pair first.
  int open = 0;
  for (size_t k = 1; k < marks.size(); ++k) {
    const size_t i = marks[k];
    if (e[i] == '?') {
      ++open;
    } else if (open-- == 0) {
      return absl::StrCat("kevo_select(", RewriteBrackets(e.substr(0, q)), ",",
                          RewriteOperand(e.substr(q + 1, i - q - 1)), ",", RewriteOperand(e.substr(i + 1)), ")");
    }
  }
  return e;  // unpaired: the compiler says so
}

std::string RewriteSelects(const std::string& e) {
  std::string out;
  size_t from = 0;
  for (size_t comma : TopLevel(e, ",")) {
    absl::StrAppend(&out, RewriteOperand(e.substr(from, comma - from)), ",");
    from = comma + 1;
  }
  return out + RewriteOperand(e.substr(from));
}

}  // namespace

std::string SelectBothArms(std::string* expr) {
  if (expr->find('?') == std::string::npos) return "";
  *expr = RewriteSelects(*expr);
  // The arms in the type ?: gives them; float and double pick bits (both
  // arms were computed to be passed), other types keep ?: on two values.
  std::string definitions =
      "template <typename T>\nstatic inline T kevo_select_bits(bool c, T a, T b) { return c ? a : b; }\n";
  for (const auto& [type, bits] : {std::pair{"float", "uint32_t"}, std::pair{"double", "uint64_t"}}) {
    absl::StrAppend(
        &definitions, "static inline ", type, " kevo_select_bits(bool c, ", type, " a, ", type, " b) {\n  ", bits,
        " ia, ib;\n  __builtin_memcpy(&ia, &a, sizeof a);\n  __builtin_memcpy(&ib, &b, sizeof b);\n  const ", bits,
        " m = -(", bits, ")c;\n  ia = (ia & m) | (ib & ~m);\n  __builtin_memcpy(&a, &ia, sizeof a);\n  return a;\n}\n");
  }
  absl::StrAppend(&definitions, R"(template <typename A, typename B>
static inline auto kevo_select(bool c, A a, B b) {
  auto x = true ? a : b;
  decltype(x) y = false ? a : b;
  return kevo_select_bits(c, x, y);
}
)");
  return definitions;
}

std::string ElementwiseOutputName(const v1::Task& task) {
  std::string out = Hint(task, "out");
  if (out.empty() && task.outputs_size() == 1) out = task.outputs(0).name();
  return out;
}

bool SameShape(const v1::TensorSpec& a, const v1::TensorSpec& b) {
  if (a.shape_size() != b.shape_size()) return false;
  for (int i = 0; i < a.shape_size(); ++i) {
    if (a.shape(i) != b.shape(i)) return false;
  }
  return true;
}

const v1::TensorSpec* BindElementwiseF32(const v1::Task& task, ExprInfo* info) {
  if (Hint(task, "pattern") != "elementwise") return nullptr;
  const v1::TensorSpec* out = FindOutput(task, ElementwiseOutputName(task));
  if (out == nullptr || out->dtype() != v1::F32 || !IsSignatureParam(task, out->name())) return nullptr;
  *info = AnalyzeExpr(task, Hint(task, "expr"));
  if (!info->ok) return nullptr;
  for (const std::string& name : info->inputs) {
    const v1::TensorSpec* in = FindInput(task, name);
    if (!IsSignatureParam(task, name) || in->dtype() != v1::F32 || !SameShape(*in, *out)) return nullptr;
  }
  return DefinitionLine(task).ok() ? out : nullptr;
}

std::string LibmvecDeclarations(const std::string& expr) {
  // glibc's libmvec (2.35 and later) has vector variants of these, float and
  // double; pow takes two arguments.
  static const std::set<std::string> kVector = {"acos",  "acosh", "asin", "asinh", "atan",  "atanh", "cbrt",  "cos",
                                                "cosh",  "erf",   "erfc", "exp",   "exp10", "exp2",  "expm1", "log",
                                                "log10", "log1p", "log2", "pow",   "sin",   "sinh",  "tan",   "tanh"};
  std::vector<std::string> seen;
  std::string out;
  ForEachIdentifier(expr, [&](size_t start, size_t end, bool call) {
    if (!call) return;
    const std::string id = expr.substr(start, end - start);
    const bool f32 = !id.empty() && id.back() == 'f' && kVector.count(id.substr(0, id.size() - 1));
    const std::string base = f32 ? id.substr(0, id.size() - 1) : id;
    if (!kVector.count(base) || std::find(seen.begin(), seen.end(), id) != seen.end()) return;
    seen.push_back(id);
    // Redeclared for GCC: glibc's vector variant of each lane count exists.
    const char* t = f32 ? "float" : "double";
    absl::StrAppend(&out, "#pragma omp declare simd notinbranch\nextern \"C\" ", t, " ", id, "(", t,
                    base == "pow" ? absl::StrCat(", ", t) : "", ");\n");
  });
  return out;
}

namespace {

// erff(x) as x P(x^2) / Q(x^2), degrees 5 and 5, on x clamped to [-4, 4]
// (erf(4) is 1 to float precision): a weighted least-squares rational fit
// of erf made for kevo (relative error weighting, then refitted with 1/Q
// weights), whose largest error evaluated in float is 4.5e-7 over all x. No
// branch and no call: the simd loop inlines it, and it is several times
// cheaper than libmvec's erff, which the gelu_erf kernel's time went to.
// NaN stays NaN (the clamp's comparisons are false for it).
constexpr char kInlineErff[] = R"(static inline __attribute__((always_inline)) float kevo_erff(float x) {
  const float c = x > 4.0f ? 4.0f : x < -4.0f ? -4.0f : x;
  const float t = c * c;
  const float p = ((((2.04465856e-06f * t + 2.83742961e-04f) * t + 3.7413493e-03f) * t + 5.26662611e-02f) * t +
                   1.89912449e-01f) * t + 1.12837915f;
  const float q = ((((3.79795568e-05f * t + 1.15568504e-03f) * t + 1.49190537e-02f) * t + 1.13889714e-01f) * t +
                   5.01638361e-01f) * t + 1.0f;
  return c * p / q;
}
)";

class ElementwiseRecipe final : public Recipe {
 public:
  ElementwiseRecipe()
      : space_({
            {"style",
             {"vector_ext", "omp_simd"},
             "vector_ext",
             "explicit GCC vector types, or an omp simd loop the compiler vectorises"},
            {"width", {"8", "16", "32"}, "16", "elements per vector"},
            {"unroll", {"1", "2", "4", "8"}, "4", "vectors per loop iteration"},
            {"threads", {"1", "all"}, "all", "OpenMP threads"},
            {"split",
             {"block", "chunk_16k", "dynamic_64k"},
             "block",
             "work split: one aligned block per thread, static 16k chunks, dynamic 64k chunks"},
            {"store",
             {"normal", "nontemporal"},
             "nontemporal",
             "nontemporal stores bypass the cache (no read-for-ownership)"},
            {"fast_math",
             {"off", "on"},
             "off",
             "-ffast-math: lets libm calls in the expression use glibc's vector variants"},
            {"vector_math",
             {"libmvec", "inline", "off"},
             "inline",
             "the expression's libm calls through glibc's vector variants (declare simd, "
             "-fno-math-errno), kevo's inline approximations where it has one (erff), or one scalar "
             "call per element"},
        }) {}

  std::string name() const override { return "elementwise"; }
  std::string family() const override { return "elementwise"; }
  std::string description() const override {
    return "out[i] = expr(inputs[i]): vectorised, unrolled, OpenMP-threaded, optional "
           "streaming stores";
  }
  const SearchSpace& space() const override { return space_; }

  bool Applies(const v1::Task& task, std::string_view platform) const override {
    if (platform != "cpu" || Hint(task, "pattern") != "elementwise") return false;
    const v1::TensorSpec* out = FindOutput(task, ElementwiseOutputName(task));
    if (out == nullptr || !IsSignatureParam(task, out->name())) return false;
    if (out->dtype() != v1::F32 && out->dtype() != v1::F64 && out->dtype() != v1::I32 && out->dtype() != v1::I64) {
      return false;
    }
    ExprInfo info = AnalyzeExpr(task, Hint(task, "expr"));
    if (!info.ok) return false;
    for (const std::string& name : info.inputs) {
      const v1::TensorSpec* in = FindInput(task, name);
      if (!IsSignatureParam(task, name) || in->dtype() != out->dtype() || !SameShape(*in, *out)) {
        return false;
      }
    }
    return DefinitionLine(task).ok();
  }

  absl::StatusOr<v1::Candidate> Generate(const v1::Task& task, const Genome& genome) const override {
    KEVO_RETURN_IF_ERROR(CheckGenerate(*this, task, genome));
    const std::string out = ElementwiseOutputName(task);
    const v1::TensorSpec* out_spec = FindOutput(task, out);
    const std::string type(CTypeName(out_spec->dtype()));
    const size_t elem = DTypeSize(out_spec->dtype());
    std::string expr = Hint(task, "expr");
    ExprInfo info = AnalyzeExpr(task, expr);
    const std::string& vector_math = StrParam(genome, "vector_math");
    const std::string with_inline_erff = ReplaceWord(expr, "erff", "kevo_erff");
    const bool inline_erff = vector_math == "inline" && with_inline_erff != expr;
    if (inline_erff) expr = with_inline_erff;
    const std::string min_max = SelectMinMax(&expr);
    const bool vector_ext = StrParam(genome, "style") == "vector_ext" && !info.calls_functions &&
                            !(info.double_literals && out_spec->dtype() == v1::F32);
    // The omp simd path's loop vectorises only without branches.
    const std::string selects = vector_ext ? "" : SelectBothArms(&expr);
    const int64_t width = IntParam(genome, "width");
    const int64_t unroll = IntParam(genome, "unroll");
    const int64_t step = width * unroll;
    const bool threaded = StrParam(genome, "threads") == "all";
    const std::string& split = StrParam(genome, "split");
    const bool nontemporal = StrParam(genome, "store") == "nontemporal";
    KEVO_ASSIGN_OR_RETURN(std::string definition, DefinitionLine(task));

    std::vector<std::string> scalar_args, vector_args, ptr_params, ptr_args, loads_i;
    for (const std::string& in : info.inputs) {
      scalar_args.push_back(absl::StrCat(type, " ", in));
      vector_args.push_back(absl::StrCat("kevo_v ", in));
      ptr_params.push_back(absl::StrCat("const ", type, "* __restrict ", in));
      ptr_args.push_back(in);
    }
    ptr_params.push_back(absl::StrCat(type, "* __restrict ", out));
    ptr_args.push_back(out);

    std::string s = kPrelude;
    absl::StrAppend(&s, "#include <omp.h>\n\n");
    absl::StrAppend(&s, "// Generated by kevo builtin recipe ", genome.ToString(), "\n");
    const std::string vector_calls = vector_math != "off" ? LibmvecDeclarations(expr) : "";
    if (inline_erff) absl::StrAppend(&s, kInlineErff);
    absl::StrAppend(&s, vector_calls);
    // On AVX2 without AVX-512 a vector wider than a ymm register would live
    // on the stack (GCC has no register for it): there the kernel uses 32-byte
    // vectors, more of them a step, and the same elements a step.
    const bool avx2_split = width * elem > 32;
    const auto vector_type = [&](int64_t bytes) {
      return absl::StrCat("typedef ", type, " kevo_v __attribute__((vector_size(", bytes, ")));\n");
    };
    absl::StrAppend(&s, min_max, selects,
                    avx2_split ? absl::StrCat(kIfAvx2WithoutAvx512, vector_type(32), "#else\n",
                                              vector_type(width * elem), "#endif\n")
                               : vector_type(width * elem));
    absl::StrAppend(&s, "static inline ", type, " kevo_op(", absl::StrJoin(scalar_args, ", "), ") { return (", type,
                    ")(", expr, "); }\n");
    if (vector_ext) {
      absl::StrAppend(&s, "static inline kevo_v kevo_vop(", absl::StrJoin(vector_args, ", "), ") { return ", expr,
                      "; }\n");
    }
    absl::StrAppend(&s, R"(static inline kevo_v kevo_load(const )", type, R"(* p) {
  kevo_v v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
static inline void kevo_store()",
                    type, R"(* p, kevo_v v) { __builtin_memcpy(p, &v, sizeof v); }
)");
    if (nontemporal) absl::StrAppend(&s, StreamingStore(type, "kevo_v"));
    const std::string put = nontemporal ? "kevo_stream" : "kevo_store";
    // The range kernel, `w` elements a vector and `vectors` vectors a step.
    const auto range_kernel = [&](int64_t w, int64_t vectors) {
      const int64_t per_step = w * vectors;
      std::string k;
      absl::StrAppend(&k, "\nstatic void kevo_range(", absl::StrJoin(ptr_params, ", "),
                      ", int64_t kevo_begin, int64_t kevo_end) {\n  int64_t kevo_i = kevo_begin;\n");
      std::vector<std::string> at_i;
      for (const std::string& in : info.inputs) at_i.push_back(absl::StrCat(in, "[kevo_i]"));
      const std::string scalar_stmt = absl::StrCat(out, "[kevo_i] = kevo_op(", absl::StrJoin(at_i, ", "), ");");
      if (nontemporal) {
        absl::StrAppend(&k, "  for (; kevo_i < kevo_end && ((uintptr_t)(", out, " + kevo_i) & 63) != 0; ++kevo_i) ",
                        scalar_stmt, "\n");
      }
      absl::StrAppend(&k, "  for (; kevo_i + ", per_step, " <= kevo_end; kevo_i += ", per_step, ") {\n");
      if (vector_ext) {
        for (int64_t u = 0; u < vectors; ++u) {
          std::vector<std::string> loads;
          for (const std::string& in : info.inputs) {
            loads.push_back(absl::StrCat("kevo_load(", in, " + kevo_i + ", u * w, ")"));
          }
          absl::StrAppend(&k, "    kevo_v r", u, " = kevo_vop(", absl::StrJoin(loads, ", "), ");\n");
        }
      } else {
        std::vector<std::string> at_ij;
        for (const std::string& in : info.inputs) at_ij.push_back(absl::StrCat(in, "[kevo_i + kevo_j]"));
        absl::StrAppend(&k, "    ", type, " kevo_t[", per_step, "] __attribute__((aligned(64)));\n",
                        "#pragma omp simd\n    for (int64_t kevo_j = 0; kevo_j < ", per_step,
                        "; ++kevo_j) kevo_t[kevo_j] = kevo_op(", absl::StrJoin(at_ij, ", "), ");\n");
        for (int64_t u = 0; u < vectors; ++u) {
          absl::StrAppend(&k, "    kevo_v r", u, " = kevo_load(kevo_t + ", u * w, ");\n");
        }
      }
      for (int64_t u = 0; u < vectors; ++u) {
        absl::StrAppend(&k, "    ", put, "(", out, " + kevo_i + ", u * w, ", r", u, ");\n");
      }
      absl::StrAppend(&k, "  }\n  for (; kevo_i < kevo_end; ++kevo_i) ", scalar_stmt, "\n");
      if (nontemporal) absl::StrAppend(&k, "#if defined(__SSE2__)\n  _mm_sfence();\n#endif\n");
      absl::StrAppend(&k, "}\n\n");
      return k;
    };
    if (avx2_split) {
      absl::StrAppend(&s, kIfAvx2WithoutAvx512, range_kernel(32 / elem, step * elem / 32), "#else\n",
                      range_kernel(width, unroll), "#endif\n");
    } else {
      absl::StrAppend(&s, range_kernel(width, unroll));
    }

    // The exported function.
    const std::string args = absl::StrJoin(ptr_args, ", ");
    absl::StrAppend(&s, definition, " {\n  const int64_t kevo_n = ", ElementCountExpr(*out_spec), ";\n");
    if (!threaded) {
      absl::StrAppend(&s, "  kevo_range(", args, ", 0, kevo_n);\n}\n");
    } else if (split == "block") {
      absl::StrAppend(&s, R"(#pragma omp parallel
  {
    const int64_t kevo_nt = omp_get_num_threads(), kevo_t = omp_get_thread_num();
    // Blocks of whole 256-byte lines so that streaming stores stay aligned.
    const int64_t kevo_align = 256 / (int64_t)sizeof(*)",
                      out, R"();
    const int64_t kevo_per =
        ((kevo_n + kevo_nt - 1) / kevo_nt + kevo_align - 1) / kevo_align * kevo_align;
    const int64_t kevo_b = kevo_min(kevo_t * kevo_per, kevo_n);
    const int64_t kevo_e = kevo_min(kevo_b + kevo_per, kevo_n);
    kevo_range()",
                      args, R"(, kevo_b, kevo_e);
  }
}
)");
    } else {
      const int64_t chunk = split == "chunk_16k" ? 16384 : 65536;
      const char* schedule = split == "chunk_16k" ? "static" : "dynamic";
      absl::StrAppend(&s, "  const int64_t kevo_chunks = (kevo_n + ", chunk - 1, ") / ", chunk,
                      ";\n#pragma omp parallel for schedule(", schedule,
                      ")\n  for (int64_t kevo_c = 0; kevo_c < kevo_chunks; ++kevo_c) {\n", "    kevo_range(", args,
                      ", kevo_c * ", chunk, ", kevo_min((kevo_c + 1) * ", chunk, ", kevo_n));\n  }\n}\n");
    }
    v1::Candidate candidate;
    candidate.set_language("c++");
    candidate.set_source(std::move(s));
    if (StrParam(genome, "fast_math") == "on") {
      candidate.add_extra_flags("-ffast-math");
      candidate.add_extra_flags("-mprefer-vector-width=512");
    } else if (!vector_calls.empty() || inline_erff) {
      // libm's functions are then pure, so the simd loop may call them for
      // every lane (a select after, as in `x > 0 ? x : expm1f(x)`).
      candidate.add_extra_flags("-fno-math-errno");
      candidate.add_extra_flags("-mprefer-vector-width=512");
    }
    return candidate;
  }

 private:
  SearchSpace space_;
};

}  // namespace

std::unique_ptr<Recipe> NewElementwiseRecipe() { return std::make_unique<ElementwiseRecipe>(); }

}  // namespace kevo::proposer
