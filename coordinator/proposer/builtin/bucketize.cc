// Bucketize recipes: out[i] = number of boundaries b[j] <= values[i] (side
// "right", std::upper_bound) or < values[i] (side "left", std::lower_bound),
// for float32 values, ascending float32 boundaries and an int32 output; NaN
// values get 0. Hints {pattern: bucketize, values, boundaries, out, n, nb,
// side}.
//   bucketize_search  branch-free binary search with a fixed step sequence
//                     (every value takes the same steps), over the sorted
//                     boundaries or an Eytzinger (BFS) copy of them;
//   bucketize_lut     a lookup table over [b[0], b[nb-1]] in 2^bits cells that
//                     gives each value's window of candidate boundaries, then
//                     a branch-free search of that (short) window.
// Both run 16 values per AVX-512 gather step (interleaving several groups to
// hide gather latency) with a scalar path when AVX-512 is missing or not
// chosen, and split the values across OpenMP threads.
#include <string>

#include "absl/strings/str_cat.h"

#include "coordinator/proposer/builtin/bound_recipe.h"
#include "coordinator/proposer/builtin/codegen.h"
#include "coordinator/proposer/builtin/recipe.h"

namespace kevo::proposer {
namespace {

struct BucketizeBinding {
  std::string values, boundaries, out, n, nb;
  bool right = true;
};

bool BindBucketize(const v1::Task& task, BucketizeBinding* g) {
  g->values = Hint(task, "values", "values");
  g->boundaries = Hint(task, "boundaries", "boundaries");
  g->out = Hint(task, "out", task.outputs_size() == 1 ? task.outputs(0).name() : "");
  g->n = Hint(task, "n", "n");
  g->nb = Hint(task, "nb", "nb");
  const std::string side = Hint(task, "side", "right");
  if (side != "right" && side != "left") return false;
  g->right = side == "right";
  const v1::TensorSpec* v = FindInput(task, g->values);
  const v1::TensorSpec* b = FindInput(task, g->boundaries);
  const v1::TensorSpec* o = FindOutput(task, g->out);
  if (v == nullptr || b == nullptr || o == nullptr) return false;
  if (v->dtype() != v1::F32 || b->dtype() != v1::F32 || o->dtype() != v1::I32) return false;
  if (!IsSignatureParam(task, g->values) || !IsSignatureParam(task, g->boundaries) || !IsSignatureParam(task, g->out) ||
      !IsSymbolParam(task, g->n) || !IsSymbolParam(task, g->nb)) {
    return false;
  }
  auto is_vector = [](const v1::TensorSpec* t, const std::string& len) {
    return t->shape_size() == 1 && t->shape(0) == len;
  };
  return is_vector(v, g->n) && is_vector(o, g->n) && is_vector(b, g->nb) && DefinitionLine(task).ok();
}

// Common code: the comparison and the threaded driver over blocks of values.
// kevo_block(v, out, count, ctx) must handle any count <= kBlock.
std::string Driver(const BucketizeBinding& g, const std::string& definition, bool threaded, const std::string& setup,
                   const std::string& teardown) {
  return absl::StrCat(definition, " {\n  const int64_t kevo_n = ", g.n, ", kevo_nb = ", g.nb,
                      ";\n  if (kevo_n <= 0) return;\n  if (kevo_nb <= 0) {\n",
                      "    for (int64_t i = 0; i < kevo_n; ++i) ", g.out, "[i] = 0;\n    return;\n  }\n",
                      "  kevo_ctx ctx;\n", setup, "  const int64_t blocks = (kevo_n + kBlock - 1) / kBlock;\n",
                      threaded ? "#pragma omp parallel for schedule(static)\n" : "",
                      "  for (int64_t blk = 0; blk < blocks; ++blk) {\n", "    const int64_t i = blk * kBlock;\n",
                      "    kevo_block(", g.values, " + i, ", g.out, " + i, kevo_min(kBlock, kevo_n - i), ctx);\n  }\n",
                      teardown, "}\n");
}

// AVX-512 group code: for each of `groups` 16-lane groups, `x#` holds the
// values and `i#` the indices; `body` uses kevo_cmp(probe, x) -> mask.
std::string Avx512Block(int64_t groups, const std::string& init, const std::string& steps, const std::string& finish) {
  return absl::StrCat(
      "static void kevo_block(const float* __restrict v, int32_t* __restrict out, int64_t count,\n"
      "                       const kevo_ctx& ctx) {\n"
      "  for (int64_t s = 0; s < count; s += ",
      16 * groups, ") {\n",
      Repeat(groups,
             "    const int64_t left# = count - s - 16 * #;\n"
             "    const __mmask16 live# = left# >= 16 ? (__mmask16)0xFFFF\n"
             "        : left# <= 0 ? (__mmask16)0 : (__mmask16)((1u << left#) - 1);\n"
             "    const __m512 x# = _mm512_maskz_loadu_ps(live#, v + s + 16 * #);\n"),
      Repeat(groups, init), steps, Repeat(groups, finish),
      Repeat(groups, "    _mm512_mask_storeu_epi32(out + s + 16 * #, live#, i#);\n"), "  }\n}\n");
}

// kevo_block one value at a time, by the recipe's kevo_search.
constexpr char kScalarBlock[] =
    R"(static void kevo_block(const float* __restrict v, int32_t* __restrict out, int64_t count,
                       const kevo_ctx& ctx) {
  for (int64_t i = 0; i < count; ++i) out[i] = kevo_search(v[i], ctx);
}
)";

// The AVX-512 `vector_block`, or kScalarBlock where AVX-512 is not compiled in.
std::string WithScalarFallback(const std::string& vector_block) {
  return absl::StrCat("#if defined(__AVX512F__)\n", vector_block, "#else\n", kScalarBlock, "#endif\n");
}

std::string Header(const Genome& genome, bool right) {
  return absl::StrCat(kPrelude, "#include <omp.h>\n\n// Generated by kevo builtin recipe ", genome.ToString(), "\n",
                      "static const int64_t kBlock = 4096;\n",
                      // b <= x (right) or b < x (left); false when x is NaN.
                      "static inline bool kevo_le(float b, float x) { return b ", right ? "<=" : "<",
                      " x; }\n#define KEVO_CMP ", right ? "_CMP_LE_OQ" : "_CMP_LT_OQ", "\n");
}

// What the bucketize recipes share: the family, the platform and the binding.
class BucketizeRecipe : public BoundRecipe<BucketizeBinding> {
 public:
  BucketizeRecipe(std::string name, std::string description, SearchSpace space)
      : BoundRecipe({std::move(name), "bucketize", "cpu", std::move(description)}, std::move(space)) {}

 protected:
  bool Bind(const v1::Task& task, BucketizeBinding* g) const final {
    return Hint(task, "pattern") == "bucketize" && BindBucketize(task, g);
  }
};

// The space of the recipes that search with AVX-512 gathers: `first`, then
// the vector path, its interleave and the threads.
SearchSpace GatherSpace(ParamSpec first) {
  return SearchSpace({
      std::move(first),
      {"simd", {"scalar", "avx512"}, "avx512", "16 values per gather, or one at a time"},
      {"interleave", {"1", "2", "4"}, "2", "independent 16-value groups in flight"},
      {"threads", {"1", "all"}, "all", "OpenMP threads over blocks of values"},
  });
}

// ------------------------------------------------------- bucketize_search

class BucketizeSearchRecipe final : public BucketizeRecipe {
 public:
  BucketizeSearchRecipe()
      : BucketizeRecipe("bucketize_search",
                        "branch-free binary search (sorted or Eytzinger layout), AVX-512 gathers, threads",
                        GatherSpace({"layout",
                                     {"sorted", "eytzinger"},
                                     "eytzinger",
                                     "search the sorted boundaries, or a BFS-ordered copy (2^L - 1 slots)"})) {}

 protected:
  absl::StatusOr<v1::Candidate> Write(const v1::Task& task, const Genome& genome,
                                      const BucketizeBinding& g) const override {
    KEVO_ASSIGN_OR_RETURN(std::string definition, DefinitionLine(task));
    const bool eytzinger = StrParam(genome, "layout") == "eytzinger";
    const bool avx512 = StrParam(genome, "simd") == "avx512";
    const int64_t groups = IntParam(genome, "interleave");
    std::string s = Header(genome, g.right);
    std::string setup, teardown;
    if (eytzinger) {
      absl::StrAppend(&s, R"(struct kevo_ctx {
  const float* e;   // e[1 .. size-1]: the boundaries in BFS order, padded with +inf
  int64_t levels;   // size = 2^levels
  int64_t nb;
};
static void kevo_fill(float* e, int64_t size, int64_t k, const float* b, int64_t nb, int64_t* next) {
  if (k >= size) return;
  kevo_fill(e, size, 2 * k, b, nb, next);
  e[k] = *next < nb ? b[*next] : __builtin_inff();
  ++*next;
  kevo_fill(e, size, 2 * k + 1, b, nb, next);
}
static inline int32_t kevo_search(float x, const kevo_ctx& ctx) {
  int64_t k = 1;
  for (int64_t l = 0; l < ctx.levels; ++l) k = 2 * k + (kevo_le(ctx.e[k], x) ? 1 : 0);
  const int64_t r = k - ((int64_t)1 << ctx.levels);
  return (int32_t)(r < ctx.nb ? r : ctx.nb);
}
)");
      setup =
          absl::StrCat("  ctx.levels = 0;\n  while ((((int64_t)1 << ctx.levels) - 1) < kevo_nb) ++ctx.levels;\n",
                       "  const int64_t size = (int64_t)1 << ctx.levels;\n",
                       "  float* e = (float*)aligned_alloc(64, (size * sizeof(float) + 63) / 64 * 64);\n",
                       "  if (e == nullptr) return;\n  int64_t next = 0;\n  e[0] = 0;\n", "  kevo_fill(e, size, 1, ",
                       g.boundaries, ", kevo_nb, &next);\n", "  ctx.e = e;\n  ctx.nb = kevo_nb;\n");
      teardown = "  free(e);\n";
    } else {
      absl::StrAppend(&s, R"(struct kevo_ctx {
  const float* b;
  int64_t nb;
  int32_t halves[64];  // the probe offsets of the search, the same for every value
  int64_t steps;
  bool last;  // a final single-element comparison
};
static inline int32_t kevo_search(float x, const kevo_ctx& ctx) {
  int64_t base = 0;
  for (int64_t t = 0; t < ctx.steps; ++t) {
    const int64_t h = ctx.halves[t];
    base = kevo_le(ctx.b[base + h - 1], x) ? base + h : base;
  }
  if (ctx.last) base += kevo_le(ctx.b[base], x) ? 1 : 0;
  return (int32_t)base;
}
)");
      setup = absl::StrCat("  ctx.b = ", g.boundaries, ";\n  ctx.nb = kevo_nb;\n  ctx.steps = 0;\n",
                           "  int64_t len = kevo_nb;\n",
                           "  while (len > 1) {\n    ctx.halves[ctx.steps++] = (int32_t)(len / 2);\n",
                           "    len -= len / 2;\n  }\n  ctx.last = len == 1;\n");
    }
    if (!avx512) {
      absl::StrAppend(&s, kScalarBlock);
    } else {
      std::string vector_block;
      if (eytzinger) {
        vector_block = Avx512Block(groups, "    __m512i i# = _mm512_set1_epi32(1);\n",
                                   absl::StrCat("    for (int64_t l = 0; l < ctx.levels; ++l) {\n",
                                                Repeat(groups,
                                                       "      const __mmask16 m# = _mm512_cmp_ps_mask("
                                                       "_mm512_i32gather_ps(i#, ctx.e, 4), x#, KEVO_CMP);\n"
                                                       "      i# = _mm512_mask_add_epi32(_mm512_add_epi32(i#, i#), m#, "
                                                       "_mm512_add_epi32(i#, i#), _mm512_set1_epi32(1));\n"),
                                                "    }\n"),
                                   "    i# = _mm512_min_epi32(_mm512_sub_epi32(i#, _mm512_set1_epi32((int32_t)(1 << "
                                   "ctx.levels))), _mm512_set1_epi32((int32_t)ctx.nb));\n");
      } else {
        vector_block = Avx512Block(groups, "    __m512i i# = _mm512_setzero_si512();\n",
                                   absl::StrCat("    for (int64_t t = 0; t < ctx.steps; ++t) {\n",
                                                "      const __m512i h = _mm512_set1_epi32(ctx.halves[t]);\n",
                                                "      const __m512i h1 = _mm512_set1_epi32(ctx.halves[t] - 1);\n",
                                                Repeat(groups,
                                                       "      const __mmask16 m# = _mm512_cmp_ps_mask("
                                                       "_mm512_i32gather_ps(_mm512_add_epi32(i#, h1), ctx.b, 4), x#, "
                                                       "KEVO_CMP);\n"
                                                       "      i# = _mm512_mask_add_epi32(i#, m#, i#, h);\n"),
                                                "    }\n"),
                                   "    if (ctx.last) i# = _mm512_mask_add_epi32(i#, _mm512_cmp_ps_mask("
                                   "_mm512_i32gather_ps(i#, ctx.b, 4), x#, KEVO_CMP), i#, _mm512_set1_epi32(1));\n");
      }
      absl::StrAppend(&s, WithScalarFallback(vector_block));
    }
    absl::StrAppend(&s, "\n", Driver(g, definition, StrParam(genome, "threads") == "all", setup, teardown));
    return CppCandidate(std::move(s));
  }
};

// ---------------------------------------------------------- bucketize_lut

class BucketizeLutRecipe final : public BucketizeRecipe {
 public:
  BucketizeLutRecipe()
      : BucketizeRecipe("bucketize_lut",
                        "lookup table of 2^bits cells narrowing each search to a short window, AVX-512 "
                        "gathers, threads",
                        GatherSpace({"bits", {"6", "8", "10", "12", "14"}, "12", "log2 of the lookup table's cells"})) {
  }

 protected:
  absl::StatusOr<v1::Candidate> Write(const v1::Task& task, const Genome& genome,
                                      const BucketizeBinding& g) const override {
    KEVO_ASSIGN_OR_RETURN(std::string definition, DefinitionLine(task));
    const bool avx512 = StrParam(genome, "simd") == "avx512";
    const int64_t groups = IntParam(genome, "interleave");
    const int64_t bits = IntParam(genome, "bits");
    std::string s = Header(genome, g.right);
    // cell(x) is monotonic in x, so a boundary in a lower cell than x is < x
    // and one in a higher cell is > x: the answer is start[cell(x)] plus the
    // count within cell(x)'s window, searched over `span` (the widest cell)
    // padded boundaries. Correct for any boundaries, fast when spread out.
    absl::StrAppend(&s, "enum : int64_t { kCells = (int64_t)1 << ", bits, " };\n", R"(struct kevo_ctx {
  const float* pb;     // the boundaries, then `span` copies of +inf
  const int32_t* start;  // start[c] = #{j : cell(b[j]) < c}, c = 0..kCells
  float lo, scale;
  int32_t halves[64];  // the search of a window of `span` boundaries
  int64_t steps;
  bool last;
  int64_t nb;
};
static inline int32_t kevo_cell(float x, const kevo_ctx& ctx) {
  float t = (x - ctx.lo) * ctx.scale;
  t = t > 0.0f ? t : 0.0f;  // NaN -> 0
  t = t < (float)(kCells - 1) ? t : (float)(kCells - 1);
  return (int32_t)t;
}
static inline int32_t kevo_search(float x, const kevo_ctx& ctx) {
  int64_t base = ctx.start[kevo_cell(x, ctx)];
  for (int64_t t = 0; t < ctx.steps; ++t) {
    const int64_t h = ctx.halves[t];
    base = kevo_le(ctx.pb[base + h - 1], x) ? base + h : base;
  }
  if (ctx.last) base += kevo_le(ctx.pb[base], x) ? 1 : 0;
  return (int32_t)(base < ctx.nb ? base : ctx.nb);
}
)");
    if (!avx512) {
      absl::StrAppend(&s, kScalarBlock);
    } else {
      std::string vector_block =
          Avx512Block(groups,
                      "    __m512 t# = _mm512_mul_ps(_mm512_sub_ps(x#, _mm512_set1_ps(ctx.lo)), "
                      "_mm512_set1_ps(ctx.scale));\n"
                      "    t# = _mm512_max_ps(t#, _mm512_setzero_ps());  // NaN -> 0\n"
                      "    t# = _mm512_min_ps(t#, _mm512_set1_ps((float)(kCells - 1)));\n"
                      "    __m512i i# = _mm512_i32gather_epi32(_mm512_cvttps_epi32(t#), ctx.start, 4);\n",
                      absl::StrCat("    for (int64_t t = 0; t < ctx.steps; ++t) {\n",
                                   "      const __m512i h = _mm512_set1_epi32(ctx.halves[t]);\n",
                                   "      const __m512i h1 = _mm512_set1_epi32(ctx.halves[t] - 1);\n",
                                   Repeat(groups,
                                          "      const __mmask16 m# = _mm512_cmp_ps_mask("
                                          "_mm512_i32gather_ps(_mm512_add_epi32(i#, h1), ctx.pb, 4), x#, "
                                          "KEVO_CMP);\n"
                                          "      i# = _mm512_mask_add_epi32(i#, m#, i#, h);\n"),
                                   "    }\n"),
                      "    if (ctx.last) i# = _mm512_mask_add_epi32(i#, _mm512_cmp_ps_mask("
                      "_mm512_i32gather_ps(i#, ctx.pb, 4), x#, KEVO_CMP), i#, _mm512_set1_epi32(1));\n"
                      "    i# = _mm512_min_epi32(i#, _mm512_set1_epi32((int32_t)ctx.nb));\n");
      absl::StrAppend(&s, WithScalarFallback(vector_block));
    }
    const std::string setup = absl::StrCat("  const float* b = ", g.boundaries, R"(;
  ctx.nb = kevo_nb;
  ctx.lo = b[0];
  const float range = b[kevo_nb - 1] - b[0];
  // A degenerate range (one boundary, all equal, inf or NaN) gets one cell.
  ctx.scale = range > 0.0f && range < 3.0e38f ? (float)kCells / range : 0.0f;
  int32_t* start = (int32_t*)calloc(kCells + 1, sizeof(int32_t));
  if (start == nullptr) return;
  for (int64_t j = 0; j < kevo_nb; ++j) ++start[kevo_cell(b[j], ctx) + 1];
  int64_t span = 0;
  for (int64_t c = 0; c < kCells; ++c) {
    span = start[c + 1] > span ? start[c + 1] : span;
    start[c + 1] += start[c];
  }
  float* pb = (float*)malloc((kevo_nb + span + 1) * sizeof(float));
  if (pb == nullptr) {
    free(start);
    return;
  }
  __builtin_memcpy(pb, b, kevo_nb * sizeof(float));
  for (int64_t j = kevo_nb; j < kevo_nb + span + 1; ++j) pb[j] = __builtin_inff();
  ctx.pb = pb;
  ctx.start = start;
  ctx.steps = 0;
  int64_t len = span;
  while (len > 1) {
    ctx.halves[ctx.steps++] = (int32_t)(len / 2);
    len -= len / 2;
  }
  ctx.last = len == 1;
)");
    absl::StrAppend(
        &s, "\n", Driver(g, definition, StrParam(genome, "threads") == "all", setup, "  free(pb);\n  free(start);\n"));
    return CppCandidate(std::move(s));
  }
};

// --------------------------------------------------------- bucketize_tree

class BucketizeTreeRecipe final : public BucketizeRecipe {
 public:
  BucketizeTreeRecipe()
      : BucketizeRecipe("bucketize_tree",
                        "static B-tree of the boundaries (node = 16/32 keys): per level one vector compare "
                        "and a popcount, no gathers",
                        SearchSpace({
                            {"fanout", {"16", "32"}, "16", "keys per tree node (one or two 64-byte lines)"},
                            {"unroll", {"1", "2", "4", "8"}, "4", "values searched together per iteration"},
                            {"threads", {"1", "all"}, "all", "OpenMP threads over blocks of values"},
                        })) {}

 protected:
  absl::StatusOr<v1::Candidate> Write(const v1::Task& task, const Genome& genome,
                                      const BucketizeBinding& g) const override {
    KEVO_ASSIGN_OR_RETURN(std::string definition, DefinitionLine(task));
    const int64_t fanout = IntParam(genome, "fanout");
    const int64_t unroll = IntParam(genome, "unroll");
    std::string s = Header(genome, g.right);
    // Level 0 is the boundaries padded with +inf to whole nodes; level L+1
    // holds the last key of each node of level L. The count of keys <= x in
    // a node says which child holds the answer.
    absl::StrAppend(
        &s, "enum : int64_t { F = ", fanout, " };\n", R"(struct kevo_ctx {
  const float* level[40];
  int64_t entries[40];  // real (unpadded) keys per level
  int64_t levels;
  int64_t nb;
};
// Keys of node `node` at `level` that are <= x (or < x), 0..F.
static inline int64_t kevo_count(const float* __restrict keys, float x) {
#if defined(__AVX512F__)
  const __m512 xv = _mm512_set1_ps(x);
  int64_t c = __builtin_popcount(_mm512_cmp_ps_mask(_mm512_load_ps(keys), xv, KEVO_CMP));
  if (F == 32) c += __builtin_popcount(_mm512_cmp_ps_mask(_mm512_load_ps(keys + 16), xv, KEVO_CMP));
  return c;
#else
  int64_t c = 0;
  for (int64_t j = 0; j < F; ++j) c += kevo_le(keys[j], x) ? 1 : 0;
  return c;
#endif
}
static void kevo_block(const float* __restrict v, int32_t* __restrict out, int64_t count,
                       const kevo_ctx& ctx) {
  int64_t i = 0;
  for (; i + )",
        unroll, R"( <= count; i += )", unroll, R"() {
)",
        Repeat(unroll, "    const float x# = v[i + #];\n    int64_t p# = 0;\n"),
        R"(    for (int64_t l = ctx.levels - 1; l > 0; --l) {
      const float* keys = ctx.level[l];
      const int64_t last = ctx.entries[l] - 1;
)",
        Repeat(unroll, "      p# = p# * F + kevo_count(keys + p# * F, x#);\n      p# = p# < last ? p# : last;\n"),
        "    }\n",
        Repeat(unroll,
               "    p# = p# * F + kevo_count(ctx.level[0] + p# * F, x#);\n"
               "    out[i + #] = (int32_t)(p# < ctx.nb ? p# : ctx.nb);\n"),
        R"(  }
  for (; i < count; ++i) {
    int64_t p = 0;
    for (int64_t l = ctx.levels - 1; l > 0; --l) {
      p = p * F + kevo_count(ctx.level[l] + p * F, v[i]);
      p = p < ctx.entries[l] - 1 ? p : ctx.entries[l] - 1;
    }
    p = p * F + kevo_count(ctx.level[0] + p * F, v[i]);
    out[i] = (int32_t)(p < ctx.nb ? p : ctx.nb);
  }
}
)");
    const std::string setup = absl::StrCat("  const float* b = ", g.boundaries, R"(;
  ctx.nb = kevo_nb;
  // Sizes first: level l has entries[l] keys in ceil(entries[l] / F) nodes.
  int64_t total = 0;
  ctx.levels = 0;
  for (int64_t e = kevo_nb;; e = (e + F - 1) / F) {
    ctx.entries[ctx.levels++] = e;
    total += (e + F - 1) / F * F;
    if (e <= F || ctx.levels == 40) break;
  }
  float* keys = (float*)aligned_alloc(64, total * sizeof(float));
  if (keys == nullptr) return;
  float* at = keys;
  for (int64_t l = 0; l < ctx.levels; ++l) {
    const int64_t e = ctx.entries[l], padded = (e + F - 1) / F * F;
    for (int64_t j = 0; j < padded; ++j) {
      // Level 0: the boundaries; above: the last key of each node below.
      at[j] = j >= e ? __builtin_inff() : l == 0 ? b[j] : ctx.level[l - 1][j * F + F - 1];
    }
    ctx.level[l] = at;
    at += padded;
  }
)");
    absl::StrAppend(&s, "\n", Driver(g, definition, StrParam(genome, "threads") == "all", setup, "  free(keys);\n"));
    return CppCandidate(std::move(s));
  }
};

}  // namespace

std::unique_ptr<Recipe> NewBucketizeSearchRecipe() { return std::make_unique<BucketizeSearchRecipe>(); }
std::unique_ptr<Recipe> NewBucketizeLutRecipe() { return std::make_unique<BucketizeLutRecipe>(); }
std::unique_ptr<Recipe> NewBucketizeTreeRecipe() { return std::make_unique<BucketizeTreeRecipe>(); }

}  // namespace kevo::proposer
