// Helpers the built-in recipes share to read a task's hints and to write
// candidate source: tensor and symbol lookup, the exported function's
// definition line, and genome checks. Internal to kevo_builtin_proposer.
// All functions are pure and thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "common/status.h"
#include "coordinator/proposer/builtin/recipe.h"
#include "kevo/v1/task.pb.h"

namespace kevo::proposer {

// The hint `key`, or `fallback` when the task does not set it.
std::string Hint(const v1::Task& task, std::string_view key, std::string_view fallback = "");

const v1::TensorSpec* FindInput(const v1::Task& task, std::string_view name);
const v1::TensorSpec* FindOutput(const v1::Task& task, std::string_view name);
// True when `name` is a parameter of the task's signature that is a shape
// symbol (neither an input nor an output tensor).
bool IsSymbolParam(const v1::Task& task, std::string_view name);
// True when `name` is a parameter of the task's signature.
bool IsSignatureParam(const v1::Task& task, std::string_view name);

// The definition line of the exported function, without the body, e.g.
//   extern "C" void f(const float* __restrict x, float* __restrict y, int64_t n)
// (every pointer parameter __restrict when `restrict_pointers`). Returns
// InvalidArgument like RenderSignature for a bad signature.
absl::StatusOr<std::string> DefinitionLine(const v1::Task& task, bool restrict_pointers = true);

// A C expression of type int64_t computing the product of `spec`'s shape
// (symbols are the function's int64_t parameters). Uses kevo_min/kevo_max/
// kevo_ceil_div, which kPrelude defines.
std::string ElementCountExpr(const v1::TensorSpec& spec);

// Includes and helpers every generated source starts with.
extern const char kPrelude[];
// struct kevo_scratch: a float buffer a thread keeps between calls (grown,
// never shrunk, 64-byte aligned): `static thread_local kevo_scratch s;
// float* p = s.get(n);`, null if memory runs out.
extern const char kScratch[];
// Opens the part of generated code for AVX2 hosts without AVX-512, where GCC
// has no register for a 64-byte vector and keeps it on the stack (rows.cc
// and embedding_bag.cc spell it inside their raw-string helpers, which
// docs/kb quotes line for line).
inline constexpr char kIfAvx2WithoutAvx512[] = "#if defined(__AVX2__) && !defined(__AVX512F__)\n";

// A candidate of `language` with `source` and no extra flags.
v1::Candidate SourceCandidate(std::string_view language, std::string source);
// The C++ one (language "c++").
inline v1::Candidate CppCandidate(std::string source) { return SourceCandidate("c++", std::move(source)); }

// OK when `genome` names `recipe` and lies in its space; InvalidArgument
// otherwise. FailedPrecondition when the recipe does not apply to `task` on
// the CPU.
absl::Status CheckGenerate(const Recipe& recipe, const v1::Task& task, const Genome& genome,
                           std::string_view platform = "cpu");

// The integer value of `key` in `genome` (callers have checked the genome).
int64_t IntParam(const Genome& genome, const std::string& key);
const std::string& StrParam(const Genome& genome, const std::string& key);

// What an elementwise hint expression (hints {expr}) reads and calls.
struct ExprInfo {
  std::vector<std::string> inputs;  // inputs the expression reads, in task order
  bool calls_functions = false;
  // A floating literal without an f suffix (a double): GCC refuses to mix it
  // with float vectors, so such expressions use the omp simd path too.
  bool double_literals = false;
  bool ok = false;  // only inputs, function calls, literals and operators
};
// Finds the identifiers of `expr`: each is an input name or a function name
// (followed by '('); anything else makes the expression unusable (ok false).
ExprInfo AnalyzeExpr(const v1::Task& task, const std::string& expr);
// Rewrites the calls of fmaxf, fminf, fmax and fmin in `expr` to kevo_fmaxf
// (...) and returns those functions' definitions, to put before the code that
// uses `expr`. Without -ffast-math GCC keeps those libm calls scalar, and a
// loop that calls them is not vectorised at all (softplus' `fmaxf(x, 0.0f)`
// kept its libmvec expf and log1pf scalar: 21 ms against 1 ms). The
// definitions are selects GCC vectorises, with libm's results: a NaN argument
// gives the other one, and of +0 and -0 the first argument.
std::string SelectMinMax(std::string* expr);
// `#pragma omp declare simd` declarations of the libm functions `expr` calls
// that glibc's libmvec has vector variants of (exp, log, pow, erf, tanh, ...),
// each once; with -fno-math-errno an `omp simd` loop then calls those
// variants. Empty when it calls none.
std::string LibmvecDeclarations(const std::string& expr);
// Rewrites each `c ? a : b` in `expr` to kevo_select(c, a, b) and returns
// that function's definition (empty when `expr` has no '?'). A select
// computes both arms and picks bits, with no branch for GCC to keep: where an
// arm calls a function, GCC sinks the call (and what uses it) into a branch
// of its own and cannot vectorise the loop on AVX2, so selu's
// `x > 0 ? x : a * expm1f(x)` ran one scalar expm1f an element (29 ms
// against 3.3 ms on a Zen 3 host).
std::string SelectBothArms(std::string* expr);
// The output an elementwise recipe writes: hints {out}, else the only output.
std::string ElementwiseOutputName(const v1::Task& task);
// Same shape symbols, in the same order.
bool SameShape(const v1::TensorSpec& a, const v1::TensorSpec& b);
// The float32 elementwise binding the GPU recipes share: hints {pattern:
// elementwise, expr}, the output (ElementwiseOutputName) a float32 signature
// parameter, every input the expression reads a float32 signature parameter
// of the output's shape, and a well-formed definition line. Fills `info` and
// returns the output, or null when the task does not fit.
const v1::TensorSpec* BindElementwiseF32(const v1::Task& task, ExprInfo* info);

// A GEMM's names (hints {a, b, c, m, n, k}, defaults A, B, C, M, N, K).
struct GemmShapes {
  std::string a, b, c, m, n, k;
  v1::DType a_dtype = v1::DTYPE_UNSPECIFIED, c_dtype = v1::DTYPE_UNSPECIFIED;
};
// Binds the hints and checks the shapes: row-major a [m, k], b [k, n],
// c [m, n], a and b of one dtype (set in a_dtype, c's in c_dtype), all
// signature parameters (gemm.cc). Callers check the dtypes they support.
bool BindGemmShapes(const v1::Task& task, GemmShapes* g);

// The packed GEMM recipes' parameters (gemm_packed, gemm_bf16_dot, and
// conv2d_im2col, which runs the same GEMM over an im2col matrix).
SearchSpace PackedGemmSpace();
// The C++ source of the packed GEMM for `genome` (those parameters; pairs of
// bf16 when genome.recipe is gemm_bf16_dot), up to and including
// `static void kevo_gemm(const kevo_in_t* a, const kevo_in_t* b, float* c,
// int64_t m, int64_t n, int64_t k)`: row-major, lda = k, ldb = ldc = n,
// kevo_in_t float (operands F32) or uint16_t (BF16). With `a_km` (F32 only)
// A is stored transposed, k x m (lda = m): the packing reads it down its
// columns, so the micro-kernel is the same. No exported function; the
// `kevo_scratch` helper (memory kept per thread between calls) is there for
// the caller's use too.
std::string PackedGemmFunctions(const Genome& genome, v1::DType operands, bool a_km = false);

// An embedding bag's names: hints {pattern: embedding_bag, mode: sum|mean,
// table, indices, lengths, out, d, bags} (defaults table, indices, lengths,
// out, D, B).
struct EmbeddingBagShapes {
  std::string table, indices, lengths, out, d, bags;
  bool mean = false;
};
// Binds the hints and checks them: float32 table [?, d], int64 indices [?]
// (the bags packed in order), int64 lengths [bags], float32 out [bags, d],
// d and bags signature symbols. False when the task does not fit (codegen.cc).
bool BindEmbeddingBag(const v1::Task& task, EmbeddingBagShapes* b);

// The names a row recipe binds to.
// Whether `name` is a float32 signature tensor (an output when `output`) of
// shape `shape`, every dimension a signature symbol (codegen.cc).
bool IsF32Tensor(const v1::Task& task, const std::string& name, const std::vector<std::string>& shape, bool output);

struct RowBinding {
  std::string in, out, rows, cols;
};
// Binds the hints of a row pattern (defaults: the single input and output,
// "rows", "cols") and checks them: f32 x [rows, cols]; y [rows] or [rows, 1]
// when `reduction`, else [rows, cols], of `out_dtype`; rows, cols signature
// symbols (rows.cc).
bool BindRows(const v1::Task& task, bool reduction, RowBinding* b, v1::DType out_dtype = v1::F32);
// True when `name` is a float32 input of shape [cols] and a signature
// parameter (a per-column scale or shift of a row recipe).
bool IsRowVector(const v1::Task& task, const std::string& name, const std::string& cols);
// True for the row_reduce ops (hints {op}) the float reductions compute: sum,
// max and mean.
bool IsSumMaxOrMean(std::string_view op);
// The float row reduction's binding: hints {pattern: row_reduce, op:
// sum|max|mean}, then BindRows of a reduction.
bool BindRowReduce(const v1::Task& task, RowBinding* b);

// C++ source of `static inline void kevo_stream(TYPE* p, VECTOR v)`: v
// stored at p (64-byte aligned) with nontemporal stores (AVX-512, else AVX),
// else through `kevo_store(TYPE*, VECTOR)`, which the caller defines.
std::string StreamingStore(const std::string& type, const std::string& vector_type);

// `count` copies of `text`, each with every "#" replaced by its number,
// 0..count-1: unrolled statements of generated code.
std::string Repeat(int64_t count, const std::string& text);

// Replaces every whole-word occurrence of `word` in `text` with `with`.
std::string ReplaceWord(const std::string& text, const std::string& word, const std::string& with);

}  // namespace kevo::proposer
