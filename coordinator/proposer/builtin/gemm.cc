// Recipe "gemm_packed": C = A * B for row-major float32 A[m,k], B[k,n],
// C[m,n], for tasks with hints {pattern: gemm, a, b, c, m, n, k}; also bf16
// A and B (widened to float32 as they are packed, so the micro-kernel is the
// same) with a bf16 C (the float32 result rounded to nearest even at the end,
// from a float32 scratch matrix) or a float32 C.
// Recipe "gemm_bf16_dot": the same scheme for bf16 A and B, packed as pairs of
// consecutive k (two bf16 in 32 bits) so the micro-kernel multiplies them with
// AVX512_BF16's vdpbf16ps (16 lanes x 2 products a step, float32 sums). Where
// the compiler's -march=native has no AVX512_BF16 the same packing is widened
// with shifts and two FMAs, so the kernel is still right, only slower.
// The Goto/BLIS scheme: B is packed into KC x NC blocks of NR-wide column
// panels (shared by all threads), A into MC x KC blocks of MR-high row panels
// (one per thread); a register-blocked MR x NR micro-kernel (16-lane GCC
// vectors: AVX-512 FMA with the B row in registers and A broadcast) computes
// each tile over KC. OpenMP threads take ranges of rows or columns (or share
// the packed B and split the MC blocks). Edges (any m, n, k) are
// zero-padded in the packs and written back through a temporary tile.
#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"

#include "coordinator/proposer/builtin/codegen.h"
#include "coordinator/proposer/builtin/recipe.h"

namespace kevo::proposer {

bool BindGemmShapes(const v1::Task& task, GemmShapes* g) {
  g->a = Hint(task, "a", "A");
  g->b = Hint(task, "b", "B");
  g->c = Hint(task, "c", "C");
  g->m = Hint(task, "m", "M");
  g->n = Hint(task, "n", "N");
  g->k = Hint(task, "k", "K");
  const v1::TensorSpec* a = FindInput(task, g->a);
  const v1::TensorSpec* b = FindInput(task, g->b);
  const v1::TensorSpec* c = FindOutput(task, g->c);
  if (a == nullptr || b == nullptr || c == nullptr) return false;
  g->a_dtype = a->dtype();
  g->c_dtype = c->dtype();
  if (b->dtype() != a->dtype()) return false;
  for (const v1::TensorSpec* t : {a, b, c}) {
    if (t->shape_size() != 2 || !IsSignatureParam(task, t->name())) return false;
  }
  if (!IsSymbolParam(task, g->m) || !IsSymbolParam(task, g->n) || !IsSymbolParam(task, g->k)) {
    return false;
  }
  auto shape_is = [](const v1::TensorSpec* t, const std::string& r, const std::string& c) {
    return t->shape(0) == r && t->shape(1) == c;
  };
  return shape_is(a, g->m, g->k) && shape_is(b, g->k, g->n) && shape_is(c, g->m, g->n) && DefinitionLine(task).ok();
}

namespace {

// The CPU recipe's binding: float32 throughout, or bf16 A and B with a bf16
// or float32 C.
using GemmBinding = GemmShapes;
bool BindGemm(const v1::Task& task, GemmBinding* g) {
  if (!BindGemmShapes(task, g)) return false;
  if (g->a_dtype == v1::F32) return g->c_dtype == v1::F32;
  return g->a_dtype == v1::BF16 && (g->c_dtype == v1::BF16 || g->c_dtype == v1::F32);
}

// What the generated code reads A and B as: `kevo_in_t` elements widened to
// float by kevo_in().
constexpr char kF32Inputs[] = R"(typedef float kevo_in_t;
static inline float kevo_in(float v) { return v; }
)";
// gemm_bf16_dot: packs of k pairs, and their multiply-add.
constexpr char kBf16Pairs[] = R"(typedef int32_t kevo_vi __attribute__((vector_size(64)));
static inline kevo_vi kevo_load_i(const float* p) {
  kevo_vi v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
// c + a.lo * b.lo + a.hi * b.hi per 32-bit lane, a and b holding bf16 pairs.
#if defined(__AVX512BF16__)
static inline kevo_vf kevo_dot(kevo_vf c, kevo_vi a, kevo_vi b) {
  return (kevo_vf)_mm512_dpbf16_ps((__m512)c, (__m512bh)a, (__m512bh)b);
}
#else
static inline kevo_vf kevo_dot(kevo_vf c, kevo_vi a, kevo_vi b) {
  const kevo_vi hi = kevo_vi{} + (int32_t)0xffff0000u;
  return c + (kevo_vf)(a << 16) * (kevo_vf)(b << 16) + (kevo_vf)(a & hi) * (kevo_vf)(b & hi);
}
#endif

// B[0:kc, 0:nc] (row stride ldb) -> panels of NR columns, each ceil(kc/2) x NR
// 32-bit pairs (k even in the low half), zero-padded to NR and to an even kc.
static void kevo_pack_b_panel(const uint16_t* __restrict b, int64_t ldb, int64_t kc, int64_t w,
                              float* __restrict dst_f) {
  uint32_t* __restrict dst = (uint32_t*)dst_f;
  for (int64_t p = 0; p < kc; p += 2) {
    const uint16_t* __restrict r0 = b + p * ldb;
    uint32_t* __restrict row = dst + (p / 2) * NR;
    int64_t q = 0;
    if (p + 1 < kc) {
      const uint16_t* __restrict r1 = r0 + ldb;
      for (; q < w; ++q) row[q] = (uint32_t)r0[q] | (uint32_t)r1[q] << 16;
    } else {
      for (; q < w; ++q) row[q] = r0[q];
    }
    for (; q < NR; ++q) row[q] = 0;
  }
}

// A[0:mc, 0:kc] (row stride lda) -> panels of MR rows, each ceil(kc/2) x MR
// 32-bit pairs (k-major), zero-padded to MR and to an even kc.
static void kevo_pack_a(const uint16_t* __restrict a, int64_t lda, int64_t mc, int64_t kc,
                        float* __restrict dst) {
  for (int64_t i = 0; i < mc; i += MR) {
    const int64_t h = kevo_min(MR, mc - i);
    uint32_t* __restrict panel = (uint32_t*)(dst + i * kc);
    for (int64_t p = 0; p < kc; p += 2) {
      int64_t r = 0;
      for (; r < h; ++r) {
        const uint16_t* src = a + (i + r) * lda + p;
        panel[(p / 2) * MR + r] = (uint32_t)src[0] | (p + 1 < kc ? (uint32_t)src[1] << 16 : 0u);
      }
      for (; r < MR; ++r) panel[(p / 2) * MR + r] = 0;
    }
  }
}

)";

constexpr char kBf16Inputs[] = R"(typedef uint16_t kevo_in_t;
static inline float kevo_in(uint16_t v) {
  const uint32_t bits = (uint32_t)v << 16;
  float f;
  __builtin_memcpy(&f, &bits, sizeof f);
  return f;
}
)";

}  // namespace

SearchSpace PackedGemmSpace() {
  return SearchSpace({
      {"mr", {"4", "6", "8", "12", "14", "16"}, "6", "micro-tile rows (A broadcasts)"},
      {"nr", {"16", "32", "48", "64"}, "64", "micro-tile columns (multiple of 16 lanes)"},
      {"kc", {"64", "128", "192", "256", "384", "512"}, "256", "k block (packed depth)"},
      {"mc",
       {"32", "64", "96", "128", "192", "256", "384"},
       "128",
       "rows of A per packed block (rounded down to a multiple of mr)"},
      {"nc",
       {"256", "512", "1024", "2048", "4096"},
       "2048",
       "columns of B per packed block (rounded down to a multiple of nr)"},
      {"order", {"jr_ir", "ir_jr"}, "jr_ir", "inner loops: B panel outer (kept in L1) or A panel outer"},
      {"unroll_k", {"1", "2", "4", "8"}, "4", "unroll of the micro-kernel's k loop"},
      {"prefetch", {"off", "on"}, "on", "prefetch the C tile and packed A/B ahead"},
      {"threads", {"1", "all"}, "all", "OpenMP threads"},
      {"split",
       {"rows", "cols", "dynamic", "shared_b"},
       "dynamic",
       "threads take row ranges or column ranges (each packing its own panels), or MC-row "
       "blocks as they finish (B packed once up front), or share B packed per block and "
       "split the A blocks (two barriers per block)"},
  });
}

namespace {

// The f32 micro-kernel's body for AVX2 without AVX-512 (16 ymm registers).
// The generic one keeps MR x NR/16 accumulators of 16 lanes: on AVX-512 each
// is a zmm register, but GCC keeps a 64-byte vector it cannot hold in one
// register on the stack, so on AVX2 every multiply-add read and wrote
// memory (a 1024^3 matmul ran at 3% of the roofline). Here the MR x NR tile
// is computed in sub-tiles of at most 6 rows x 16 columns, each 2 x rows
// accumulators of 8 lanes plus two B vectors and the broadcast A value: at
// most 15 registers. A sub-tile re-reads the packed A panel (kc x MR
// floats, in L1) once per 16 columns.
std::string Avx2MicroKernel(const Genome& genome) {
  const int64_t mr = IntParam(genome, "mr");
  const int64_t nr = IntParam(genome, "nr");
  const bool prefetch = StrParam(genome, "prefetch") == "on";
  constexpr int64_t kRows = 6;
  std::string s = R"(  typedef float kevo_vh __attribute__((vector_size(32)));
  const bool kevo_full = h == MR && w == NR;
  float t[MR * NR];
  float* __restrict out = kevo_full ? c : t;
  const int64_t ldo = kevo_full ? ldc : NR;
)";
  if (prefetch) {
    absl::StrAppend(&s, "  for (int64_t r = 0; r < h; ++r) {\n", "    __builtin_prefetch(c + r * ldc, 1);\n",
                    "    __builtin_prefetch(c + r * ldc + NR - 1, 1);\n  }\n");
  }
  for (int64_t r0 = 0; r0 < mr; r0 += kRows) {
    const int64_t rows = std::min(kRows, mr - r0);
    for (int64_t q0 = 0; q0 < nr; q0 += 16) {
      absl::StrAppend(&s, "  {\n");
      for (int64_t r = 0; r < rows; ++r) absl::StrAppend(&s, "    kevo_vh c", r, "_0 = {}, c", r, "_1 = {};\n");
      absl::StrAppend(&s, "#pragma GCC unroll ", IntParam(genome, "unroll_k"),
                      "\n    for (int64_t p = 0; p < kc; ++p) {\n");
      if (prefetch && q0 == 0) absl::StrAppend(&s, "      __builtin_prefetch(b + (p + 8) * NR);\n");
      absl::StrAppend(&s, "      kevo_vh b0, b1;\n", "      __builtin_memcpy(&b0, b + p * NR + ", q0, ", 32);\n",
                      "      __builtin_memcpy(&b1, b + p * NR + ", q0 + 8, ", 32);\n");
      for (int64_t r = 0; r < rows; ++r) {
        absl::StrAppend(&s, "      { const float a_ = a[p * MR + ", r0 + r, "]; c", r, "_0 += a_ * b0; c", r,
                        "_1 += a_ * b1; }\n");
      }
      absl::StrAppend(&s, "    }\n");
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t half = 0; half < 2; ++half) {
          const std::string at = absl::StrCat("out + ", r0 + r, " * ldo + ", q0 + 8 * half);
          absl::StrAppend(&s, "    {\n      kevo_vh o = c", r, "_", half, ";\n",
                          "      if (kevo_full && !first) { kevo_vh old; __builtin_memcpy(&old, ", at,
                          ", 32); o += old; }\n", "      __builtin_memcpy(", at, ", &o, 32);\n    }\n");
        }
      }
      absl::StrAppend(&s, "  }\n");
    }
  }
  absl::StrAppend(&s, R"(  if (!kevo_full) {
    for (int64_t r = 0; r < h; ++r) {
      for (int64_t q = 0; q < w; ++q) c[r * ldc + q] = (first ? 0.0f : c[r * ldc + q]) + t[r * NR + q];
    }
  }
)");
  return s;
}

}  // namespace

std::string PackedGemmFunctions(const Genome& genome, v1::DType operands, bool a_km) {
  const int64_t mr = IntParam(genome, "mr");
  const int64_t nr = IntParam(genome, "nr");
  const int64_t nv = nr / 16;
  const int64_t kc = IntParam(genome, "kc");
  const int64_t mc = std::max(mr, IntParam(genome, "mc") / mr * mr);
  const int64_t nc = std::max(nr, IntParam(genome, "nc") / nr * nr);
  const bool prefetch = StrParam(genome, "prefetch") == "on";
  const bool threaded = StrParam(genome, "threads") == "all";
  const bool bf16_in = operands == v1::BF16;
  const bool pairs = genome.recipe == "gemm_bf16_dot";
  a_km = a_km && !bf16_in && !pairs;  // the bf16 packings read A as m x k only
  std::string s = kPrelude;
  absl::StrAppend(&s, "#include <omp.h>\n\n// Generated by kevo builtin recipe ", genome.ToString(), "\n");
  absl::StrAppend(&s, "enum : int64_t { MR = ", mr, ", NR = ", nr, ", KC = ", kc, ", MC = ", mc, ", NC = ", nc,
                  " };\n");
  // Where A's row i, column p is: A stored m x k, or k x m (transposed).
  absl::StrAppend(&s, "#define KEVO_A(a, lda, i, p) ((a) + ", a_km ? "(p) * (lda) + (i))\n" : "(i) * (lda) + (p))\n");
  absl::StrAppend(&s, R"(typedef float kevo_vf __attribute__((vector_size(64)));
static inline kevo_vf kevo_load(const float* p) {
  kevo_vf v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
static inline void kevo_store(float* p, kevo_vf v) { __builtin_memcpy(p, &v, sizeof v); }
)",
                  kScratch, bf16_in ? kBf16Inputs : kF32Inputs);
  if (pairs) {
    absl::StrAppend(&s, kBf16Pairs);
  } else {
    absl::StrAppend(&s, R"(
// B[0:kc, 0:nc] (row stride ldb) -> panels of NR columns, each kc x NR,
// zero-padded to NR, as float32.
static void kevo_pack_b_panel(const kevo_in_t* __restrict b, int64_t ldb, int64_t kc, int64_t w,
                              float* __restrict dst) {
  if (w == NR) {
    for (int64_t p = 0; p < kc; ++p) {
      for (int64_t q = 0; q < NR; ++q) dst[p * NR + q] = kevo_in(b[p * ldb + q]);
    }
    return;
  }
  for (int64_t p = 0; p < kc; ++p) {
    int64_t q = 0;
    for (; q < w; ++q) dst[p * NR + q] = kevo_in(b[p * ldb + q]);
    for (; q < NR; ++q) dst[p * NR + q] = 0.0f;
  }
}

// A[0:mc, 0:kc] (row stride lda) -> panels of MR rows, each kc x MR
// (k-major), zero-padded to MR, as float32.
static void kevo_pack_a(const kevo_in_t* __restrict a, int64_t lda, int64_t mc, int64_t kc,
                        float* __restrict dst) {
  for (int64_t i = 0; i < mc; i += MR) {
    const int64_t h = kevo_min(MR, mc - i);
    float* __restrict panel = dst + i * kc;
    if (h == MR) {
)",
                    a_km ? R"(      // A stored transposed: each k step's MR values lie side by side.
      for (int64_t p = 0; p < kc; ++p) {
        const kevo_in_t* src = KEVO_A(a, lda, i, p);
        for (int64_t r = 0; r < MR; ++r) panel[p * MR + r] = kevo_in(src[r]);
      }
)"
                         : R"(      for (int64_t p0 = 0; p0 < kc; p0 += 16) {
        const int64_t pn = kevo_min(16, kc - p0);
        for (int64_t r = 0; r < MR; ++r) {
          const kevo_in_t* src = KEVO_A(a, lda, i + r, p0);
          for (int64_t p = 0; p < pn; ++p) panel[(p0 + p) * MR + r] = kevo_in(src[p]);
        }
      }
)",
                    R"(    } else {
      for (int64_t p = 0; p < kc; ++p) {
        int64_t r = 0;
        for (; r < h; ++r) panel[p * MR + r] = kevo_in(*KEVO_A(a, lda, i + r, p));
        for (; r < MR; ++r) panel[p * MR + r] = 0.0f;
      }
    }
  }
}

)");
  }
  // The micro-kernel.
  absl::StrAppend(&s, R"(// c[0:h, 0:w] (row stride ldc) = (first ? 0 : c) + a_panel * b_panel.
static inline void kevo_kernel(int64_t kc, const float* __restrict a, const float* __restrict b,
                               float* __restrict c, int64_t ldc, int64_t h, int64_t w, bool first) {
)");
  if (!pairs) absl::StrAppend(&s, kIfAvx2WithoutAvx512, Avx2MicroKernel(genome), "#else\n");
  for (int64_t r = 0; r < mr; ++r) {
    absl::StrAppend(&s, "  kevo_vf");
    for (int64_t v = 0; v < nv; ++v) absl::StrAppend(&s, v ? ", " : " ", "c", r, "_", v, " = {}");
    absl::StrAppend(&s, ";\n");
  }
  if (prefetch) {
    absl::StrAppend(&s, "  for (int64_t r = 0; r < h; ++r) {\n", "    __builtin_prefetch(c + r * ldc, 1);\n",
                    "    __builtin_prefetch(c + r * ldc + NR - 1, 1);\n  }\n");
  }
  absl::StrAppend(&s, "#pragma GCC unroll ", IntParam(genome, "unroll_k"), "\n  for (int64_t p = 0; p < ",
                  pairs ? "(kc + 1) / 2" : "kc", "; ++p) {\n");
  if (prefetch) {
    absl::StrAppend(&s, "    __builtin_prefetch(a + (p + 8) * MR);\n", "    __builtin_prefetch(b + (p + 8) * NR);\n");
  }
  for (int64_t v = 0; v < nv; ++v) {
    absl::StrAppend(&s, "    const ", pairs ? "kevo_vi" : "kevo_vf", " b", v, " = ",
                    pairs ? "kevo_load_i" : "kevo_load", "(b + p * NR + ", 16 * v, ");\n");
  }
  for (int64_t r = 0; r < mr; ++r) {
    if (pairs) {
      absl::StrAppend(&s, "    { const kevo_vi a_ = kevo_vi{} + ((const int32_t*)a)[p * MR + ", r, "];");
      for (int64_t v = 0; v < nv; ++v) {
        absl::StrAppend(&s, " c", r, "_", v, " = kevo_dot(c", r, "_", v, ", a_, b", v, ");");
      }
    } else {
      absl::StrAppend(&s, "    { const float a_ = a[p * MR + ", r, "];");
      for (int64_t v = 0; v < nv; ++v) absl::StrAppend(&s, " c", r, "_", v, " += a_ * b", v, ";");
    }
    absl::StrAppend(&s, " }\n");
  }
  absl::StrAppend(&s, "  }\n  if (h == MR && w == NR) {\n    if (first) {\n");
  for (int64_t r = 0; r < mr; ++r) {
    for (int64_t v = 0; v < nv; ++v) {
      absl::StrAppend(&s, "      kevo_store(c + ", r, " * ldc + ", 16 * v, ", c", r, "_", v, ");\n");
    }
  }
  absl::StrAppend(&s, "    } else {\n");
  for (int64_t r = 0; r < mr; ++r) {
    for (int64_t v = 0; v < nv; ++v) {
      absl::StrAppend(&s, "      kevo_store(c + ", r, " * ldc + ", 16 * v, ", kevo_load(c + ", r, " * ldc + ", 16 * v,
                      ") + c", r, "_", v, ");\n");
    }
  }
  absl::StrAppend(&s, "    }\n    return;\n  }\n  float t[MR * NR];\n");
  for (int64_t r = 0; r < mr; ++r) {
    for (int64_t v = 0; v < nv; ++v) {
      absl::StrAppend(&s, "  kevo_store(t + ", r * nr + 16 * v, ", c", r, "_", v, ");\n");
    }
  }
  absl::StrAppend(&s, R"(  for (int64_t r = 0; r < h; ++r) {
    for (int64_t q = 0; q < w; ++q) c[r * ldc + q] = (first ? 0.0f : c[r * ldc + q]) + t[r * NR + q];
  }
)",
                  pairs ? "" : "#endif\n", "}\n\n");
  // The driver.
  const bool jr_outer = StrParam(genome, "order") == "jr_ir";
  std::string tiles;
  const std::string kernel_call =
      "kevo_kernel(kc, ap + ir * kc, bp + jr * kc, c + (ic + ir) * ldc + jc + jr, ldc, "
      "kevo_min(MR, mc - ir), kevo_min(NR, nc - jr), pc == 0);\n";
  if (jr_outer) {
    tiles = absl::StrCat("        for (int64_t jr = 0; jr < nc; jr += NR)\n",
                         "          for (int64_t ir = 0; ir < mc; ir += MR)\n            ", kernel_call);
  } else {
    tiles = absl::StrCat("        for (int64_t ir = 0; ir < mc; ir += MR)\n",
                         "          for (int64_t jr = 0; jr < nc; jr += NR)\n            ", kernel_call);
  }
  const std::string& split = StrParam(genome, "split");
  const bool shared_b = threaded && split == "shared_b";
  // One block loop nest; with shared_b the threads pack B together and
  // share out the A blocks (two barriers per (jc, pc) block), otherwise it
  // runs per thread on that thread's rows or columns (no barriers: a
  // sleeping OpenMP thread can take a scheduler tick to wake).
  absl::StrAppend(&s, R"(// `packed`: null, or all of B already packed (block (jc, pc) at
// packed + jc * k + pc * round_up(nc, NR)).
static void kevo_gemm_blocks(const kevo_in_t* __restrict a, int64_t lda,
                             const kevo_in_t* __restrict b, int64_t ldb, float* __restrict c,
                             int64_t ldc, int64_t m, int64_t n, int64_t k,
                             const float* __restrict packed) {
  if (m <= 0 || n <= 0) return;
  static thread_local kevo_scratch kevo_bp_scratch, kevo_ap_scratch;
  const int64_t nc_max = kevo_min(NC, (n + NR - 1) / NR * NR);
  const int64_t kc_max = kevo_min(KC, k);
)",
                  shared_b ? R"(  // A blocks: at most MC rows, a multiple of MR, and a number of blocks
  // that is a multiple of the thread count, so no thread idles. Called
  // inside a parallel region (conv2d_im2col's image per thread), one thread.
  const int64_t threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  int64_t blocks = (m + MC - 1) / MC;
  blocks = (blocks + threads - 1) / threads * threads;
  const int64_t mc_max = kevo_min(MC, ((m + blocks - 1) / blocks + MR - 1) / MR * MR);
)"
                           : R"(  const int64_t mc_max = kevo_min(MC, (m + MR - 1) / MR * MR);
)",
                  R"(  float* bp_own = packed != nullptr ? nullptr
      : kevo_bp_scratch.get(kc_max * nc_max);
  if (packed == nullptr && bp_own == nullptr) return;
)",
                  shared_b ? "#pragma omp parallel if (!omp_in_parallel())\n" : "", R"(  {
    float* ap = kevo_ap_scratch.get(mc_max * kc_max);
    for (int64_t jc = 0; jc < n; jc += NC) {
      const int64_t nc = kevo_min(NC, n - jc);
      for (int64_t pc = 0; pc < k; pc += KC) {
        const int64_t kc = kevo_min(KC, k - pc);
        const float* __restrict bp =
            packed != nullptr ? packed + jc * k + pc * ((nc + NR - 1) / NR * NR) : bp_own;
        if (packed == nullptr) {
)",
                  shared_b ? "#pragma omp for schedule(static)\n" : "",
                  R"(          for (int64_t jp = 0; jp < (nc + NR - 1) / NR; ++jp) {
            kevo_pack_b_panel(b + pc * ldb + jc + jp * NR, ldb, kc, kevo_min(NR, nc - jp * NR),
                              bp_own + jp * NR * kc);
          }
        }
)",
                  shared_b ? "#pragma omp for schedule(static)\n" : "",
                  R"(        for (int64_t ib = 0; ib < (m + mc_max - 1) / mc_max; ++ib) {
          const int64_t ic = ib * mc_max, mc = kevo_min(mc_max, m - ic);
          if (ap == nullptr) continue;
          kevo_pack_a(KEVO_A(a, lda, ic, pc), lda, mc, kc, ap);
)",
                  tiles, R"(        }
      }
    }
  }
}

static void kevo_gemm(const kevo_in_t* __restrict a, const kevo_in_t* __restrict b,
                      float* __restrict c, int64_t m, int64_t n, int64_t k) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    for (int64_t i = 0; i < m * n; ++i) c[i] = 0.0f;
    return;
  }
)",
                  "  const int64_t lda = ", a_km ? "m" : "k", ";\n");
  if (!threaded || shared_b) {
    absl::StrAppend(&s, "  kevo_gemm_blocks(a, lda, b, n, c, n, m, n, k, nullptr);\n}\n\n");
  } else if (split == "dynamic") {
    // B packed once up front; threads then take MC-row blocks as they
    // finish, so a thread on a busy core does less of the work.
    absl::StrAppend(&s, R"(  const int64_t npad = (n + NR - 1) / NR * NR;
  static thread_local kevo_scratch kevo_packed_scratch;
  float* packed = kevo_packed_scratch.get(k * npad);
  if (packed == nullptr) return;
  for (int64_t jc = 0; jc < n; jc += NC) {
    const int64_t nc = kevo_min(NC, n - jc), ncpad = (nc + NR - 1) / NR * NR;
    for (int64_t pc = 0; pc < k; pc += KC) {
      const int64_t kc = kevo_min(KC, k - pc);
      for (int64_t jp = 0; jp < ncpad / NR; ++jp) {
        kevo_pack_b_panel(b + pc * n + jc + jp * NR, n, kc, kevo_min(NR, nc - jp * NR),
                          packed + jc * k + pc * ncpad + jp * NR * kc);
      }
    }
  }
  // At least two blocks a thread where m allows it: with MC-row blocks
  // alone, a GEMM of 64 or 128 rows (a convolution's filters, a small
  // batched product) was one block and ran on one thread.
  const int64_t nt = omp_get_max_threads();
  const int64_t fair = ((m + 2 * nt - 1) / (2 * nt) + MR - 1) / MR * MR;
  const int64_t mc = kevo_max(MR, kevo_min(kevo_min(MC, (m + MR - 1) / MR * MR), fair));
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t ib = 0; ib < (m + mc - 1) / mc; ++ib) {
    const int64_t ic = ib * mc;
    kevo_gemm_blocks(KEVO_A(a, lda, ic, 0), lda, b, n, c + ic * n, n, kevo_min(mc, m - ic), n, k, packed);
  }
}

)");
  } else {
    // Each thread takes a contiguous range of whole micro-tiles.
    const bool rows = split == "rows";
    absl::StrAppend(
        &s, "#pragma omp parallel\n  {\n", "    const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();\n",
        "    const int64_t tiles = (", rows ? "m + MR - 1) / MR" : "n + NR - 1) / NR",
        ";\n    const int64_t lo = kevo_min(", rows ? "m" : "n", ", tiles * t / nt * ", rows ? "MR" : "NR", ");\n",
        "    const int64_t hi = kevo_min(", rows ? "m" : "n", ", tiles * (t + 1) / nt * ", rows ? "MR" : "NR", ");\n");
    if (rows) {
      absl::StrAppend(
          &s, "    kevo_gemm_blocks(KEVO_A(a, lda, lo, 0), lda, b, n, c + lo * n, n, hi - lo, n, k, nullptr);\n");
    } else {
      absl::StrAppend(&s, "    kevo_gemm_blocks(a, lda, b + lo, n, c + lo, n, m, hi - lo, k, nullptr);\n");
    }
    absl::StrAppend(&s, "  }\n}\n\n");
  }
  return s;
}

namespace {

class GemmPackedRecipe final : public Recipe {
 public:
  // `bf16_pairs`: gemm_bf16_dot (bf16 A and B only), else gemm_packed.
  explicit GemmPackedRecipe(bool bf16_pairs) : pairs_(bf16_pairs), space_(PackedGemmSpace()) {}

  std::string name() const override { return pairs_ ? "gemm_bf16_dot" : "gemm_packed"; }
  std::string family() const override { return "gemm"; }
  std::string description() const override {
    return pairs_ ? "packed, cache-blocked bf16 GEMM: k pairs packed in 32 bits, an MR x NR "
                    "micro-kernel of AVX512_BF16 dot products (vdpbf16ps), float32 sums"
                  : "packed, cache-blocked GEMM with an MR x NR AVX-512 FMA register "
                    "micro-kernel (bf16 operands widened to float32 while packed)";
  }
  const SearchSpace& space() const override { return space_; }

  bool Applies(const v1::Task& task, std::string_view platform) const override {
    GemmBinding g;
    return platform == "cpu" && Hint(task, "pattern") == "gemm" && BindGemm(task, &g) &&
           (!pairs_ || g.a_dtype == v1::BF16);
  }

  absl::StatusOr<v1::Candidate> Generate(const v1::Task& task, const Genome& genome) const override {
    KEVO_RETURN_IF_ERROR(CheckGenerate(*this, task, genome));
    GemmBinding g;
    BindGemm(task, &g);
    KEVO_ASSIGN_OR_RETURN(std::string definition, DefinitionLine(task));
    const bool threaded = StrParam(genome, "threads") == "all";
    const bool bf16_out = g.c_dtype == v1::BF16;
    std::string s;
    if (!pairs_ && g.a_dtype == v1::BF16) {
      // bf16 operands: where the compiler targets AVX512_BF16 (Zen 4,
      // Sapphire Rapids), gemm_bf16_dot's code at this genome (vdpbf16ps on
      // packed pairs: 0.78-0.80x of PyTorch's oneDNN at 512^3 on a 2-core
      // Zen 4, where widening to float32 while packing read 0.44x), else the
      // operands widened while packed. The same genome suits both hosts.
      Genome dots = genome;
      dots.recipe = "gemm_bf16_dot";
      s = absl::StrCat("#if defined(__AVX512BF16__)\n", PackedGemmFunctions(dots, g.a_dtype), "#else\n",
                       PackedGemmFunctions(genome, g.a_dtype), "#endif\n");
    } else {
      s = PackedGemmFunctions(genome, g.a_dtype);
    }
    if (bf16_out) {
      // The float32 result in a scratch matrix, then rounded to bf16 as the
      // reference rounds (to nearest even; a NaN stays a quiet NaN).
      absl::StrAppend(&s, R"(static inline uint16_t kevo_to_bf16(float f) {
  uint32_t bits;
  __builtin_memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return (uint16_t)(bits >> 16);
}

)",
                      definition, " {\n  const int64_t kevo_mn = ", g.m, " * ", g.n, ";\n",
                      "  if (kevo_mn <= 0) return;\n", "  static thread_local kevo_scratch kevo_c_scratch;\n",
                      "  float* kevo_c32 = kevo_c_scratch.get(kevo_mn);\n", "  if (kevo_c32 == nullptr) return;\n",
                      "  kevo_gemm(", g.a, ", ", g.b, ", kevo_c32, ", g.m, ", ", g.n, ", ", g.k, ");\n",
                      threaded ? "#pragma omp parallel for simd schedule(static)\n" : "#pragma omp simd\n",
                      "  for (int64_t i = 0; i < kevo_mn; ++i) ", g.c, "[i] = kevo_to_bf16(kevo_c32[i]);\n", "}\n");
    } else {
      absl::StrAppend(&s, definition, " {\n  kevo_gemm(", g.a, ", ", g.b, ", ", g.c, ", ", g.m, ", ", g.n, ", ", g.k,
                      ");\n}\n");
    }
    v1::Candidate candidate;
    candidate.set_language("c++");
    candidate.set_source(std::move(s));
    return candidate;
  }

 private:
  bool pairs_;
  SearchSpace space_;
};

}  // namespace

std::unique_ptr<Recipe> NewGemmPackedRecipe() { return std::make_unique<GemmPackedRecipe>(/*bf16_pairs=*/false); }
std::unique_ptr<Recipe> NewGemmBf16DotRecipe() { return std::make_unique<GemmPackedRecipe>(/*bf16_pairs=*/true); }

}  // namespace kevo::proposer
