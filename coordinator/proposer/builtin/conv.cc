// Recipe "conv2d_rows" for the CPU: a direct 2-D convolution, NCHW float32
// x [n, c, h, width], OIHW w [f, c, kh, kw], stride 1, no padding, no bias,
// y [n, f, h - kh + 1, width - kw + 1]; hints {pattern: conv2d, x, weight, y,
// n, c, h, width, f, kh, kw} (defaults x, w, y, N, C, H, W, F, KH, KW).
//
// Each task of the loop nest is one output row of `fb` filters: for every
// (channel, kernel row, kernel column), in the reference's order, the
// weights of the fb filters times the shifted input row are added to fb
// accumulator rows, vectorised along the row, so every output element is the
// same sum in the same order as the naive reference (only FMA contraction
// differs) while each input row load serves fb filters. Threads take
// (image, filter block, output row) tasks.
//
// Recipe "conv2d_im2col", same hints: per image, the input unrolled into a
// [c*kh*kw, oh*ow] matrix (row r = (channel, kernel row, kernel column) holds
// the shifted input pixels it multiplies), then the packed GEMM of
// gemm_packed (its micro-kernel and parameters) of the [f, c*kh*kw] weights by
// it, written straight into the image's [f, oh*ow] output. The sums run in
// the GEMM's order, not the reference's. With at least as many images as
// threads (or one thread), each thread takes whole images and unrolls each
// straight into the GEMM's packed layout (one pass over the matrix, not an
// unrolling and then a packing); with fewer, the threads share each image.
//
// Recipe "conv2d_direct", same hints: an implicit GEMM with no im2col
// matrix. A register tile holds FB filters x NV vectors of VW output pixels
// along one output row; for each (channel, kernel row, kernel column) step it
// loads the NV shifted input vectors once and adds each times the FB filters'
// weights, broadcast from a copy of w packed per filter block as [c*kh*kw][FB]
// (zero filters padding the last block). Each thread takes (image, output
// row) tasks: it first copies the kh input rows of every channel that the row
// reads into a strip padded with zeros to a whole number of tiles, so every
// load is a plain unaligned vector load inside the strip; columns past the
// row's end are computed and not stored. The sums run over (channel, kernel
// row, kernel column) in the reference's order, one FMA chain per output.
// The tile is at most 24 vectors (12 without AVX-512, where they are 8 floats).
#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"

#include "coordinator/proposer/builtin/bound_recipe.h"
#include "coordinator/proposer/builtin/codegen.h"
#include "coordinator/proposer/builtin/recipe.h"

namespace kevo::proposer {
namespace {

struct ConvBinding {
  std::string x, w, y, n, c, h, width, f, kh, kw;
};

bool BindConv(const v1::Task& task, ConvBinding* b) {
  if (Hint(task, "pattern") != "conv2d") return false;
  *b = {Hint(task, "x", "x"),   Hint(task, "weight", "w"), Hint(task, "y", "y"),     Hint(task, "n", "N"),
        Hint(task, "c", "C"),   Hint(task, "h", "H"),      Hint(task, "width", "W"), Hint(task, "f", "F"),
        Hint(task, "kh", "KH"), Hint(task, "kw", "KW")};
  const v1::TensorSpec* x = FindInput(task, b->x);
  const v1::TensorSpec* w = FindInput(task, b->w);
  const v1::TensorSpec* y = FindOutput(task, b->y);
  if (x == nullptr || w == nullptr || y == nullptr) return false;
  for (const std::string& name : {b->x, b->w, b->y}) {
    if (!IsSignatureParam(task, name)) return false;
  }
  for (const std::string& sym : {b->n, b->c, b->h, b->width, b->f, b->kh, b->kw}) {
    if (!IsSymbolParam(task, sym)) return false;
  }
  auto shape_is = [](const v1::TensorSpec* t, const std::vector<std::string>& s) {
    if (t->dtype() != v1::F32 || t->shape_size() != static_cast<int>(s.size())) return false;
    for (size_t i = 0; i < s.size(); ++i) {
      if (t->shape(static_cast<int>(i)) != s[i]) return false;
    }
    return true;
  };
  // The output's spatial extents as the task writes them ("H - KH + 1").
  auto valid = [](const std::string& expr, const std::string& in, const std::string& k) {
    std::string compact;
    for (char ch : expr) {
      if (ch != ' ') compact += ch;
    }
    return compact == absl::StrCat(in, "-", k, "+1");
  };
  return shape_is(x, {b->n, b->c, b->h, b->width}) && shape_is(w, {b->f, b->c, b->kh, b->kw}) &&
         y->dtype() == v1::F32 && y->shape_size() == 4 && y->shape(0) == b->n && y->shape(1) == b->f &&
         valid(y->shape(2), b->h, b->kh) && valid(y->shape(3), b->width, b->kw) && DefinitionLine(task).ok();
}

// The accumulation of `count` filters' weights times the shifted input row
// (a compile-time count when it is FB, so the filter loop unrolls).
std::string FilterRows(const std::string& count) {
  return absl::StrCat("              for (int64_t r = 0; r < ", count, R"(; ++r) {
                const float wv = kevo_w[(((f0 + r) * kevo_c + ch) * kevo_kh + p) * kevo_kw + q];
                float* __restrict a = acc + r * ow;
                const float* __restrict xs = xr + q;
#pragma omp simd
                for (int64_t j = 0; j < ow; ++j) a[j] += wv * xs[j];
              }
)");
}

// The generated body's names for the binding's tensors and sizes (kevo_x,
// kevo_w, kevo_y, kevo_n, kevo_c, kevo_h, kevo_wd, kevo_f, kevo_kh, kevo_kw)
// and the output's extents oh, ow.
std::string ConvLocals(const ConvBinding& b) {
  return absl::StrCat("  const float* kevo_x = ", b.x, ";\n  const float* kevo_w = ", b.w, ";\n  float* kevo_y = ", b.y,
                      ";\n  const int64_t kevo_n = ", b.n, ", kevo_c = ", b.c, ", kevo_h = ", b.h,
                      ", kevo_wd = ", b.width, ", kevo_f = ", b.f, ", kevo_kh = ", b.kh, ", kevo_kw = ", b.kw, ";\n",
                      "  const int64_t oh = kevo_h - kevo_kh + 1, ow = kevo_wd - kevo_kw + 1;\n");
}

// What the conv2d recipes share: the family, the platform and the binding.
class ConvRecipe : public BoundRecipe<ConvBinding> {
 public:
  ConvRecipe(std::string name, std::string description, SearchSpace space)
      : BoundRecipe({std::move(name), "conv2d", "cpu", std::move(description)}, std::move(space)) {}

 protected:
  bool Bind(const v1::Task& task, ConvBinding* b) const final { return BindConv(task, b); }
};

class Conv2dRowsRecipe final : public ConvRecipe {
 public:
  Conv2dRowsRecipe()
      : ConvRecipe("conv2d_rows",
                   "direct conv2d by output rows of fb filters, shifted input rows times weights "
                   "added in the reference's order, vectorised along the row",
                   SearchSpace({
                       {"fb", {"1", "2", "4", "8"}, "4", "filters per task (share each input row load)"},
                       {"threads", {"1", "all"}, "all", "OpenMP threads over (image, filter block, row)"},
                   })) {}

 protected:
  absl::StatusOr<v1::Candidate> Write(const v1::Task& task, const Genome& genome, const ConvBinding& b) const override {
    KEVO_ASSIGN_OR_RETURN(std::string definition, DefinitionLine(task));
    const bool threaded = StrParam(genome, "threads") == "all";
    std::string s = absl::StrCat(kPrelude, "\n// Generated by kevo builtin recipe ", genome.ToString(),
                                 "\nenum : int64_t { FB = ", IntParam(genome, "fb"), " };\n", definition, " {\n");
    absl::StrAppend(&s, ConvLocals(b));
    absl::StrAppend(&s, R"(  if (oh <= 0 || ow <= 0) return;
  const int64_t blocks = kevo_ceil_div(kevo_f, FB);
)");
    if (threaded) absl::StrAppend(&s, "#pragma omp parallel\n");
    absl::StrAppend(&s, "  {\n    float* acc = static_cast<float*>(std::malloc(sizeof(float) * FB * ow));\n");
    if (threaded) absl::StrAppend(&s, "#pragma omp for schedule(static)\n");
    absl::StrAppend(&s, R"(    for (int64_t t = 0; t < kevo_n * blocks * oh; ++t) {
      const int64_t i = t % oh, fblk = t / oh % blocks, img = t / oh / blocks;
      const int64_t f0 = fblk * FB, nf = kevo_min(FB, kevo_f - f0);
      for (int64_t k = 0; k < FB * ow; ++k) acc[k] = 0.0f;
      for (int64_t ch = 0; ch < kevo_c; ++ch) {
        for (int64_t p = 0; p < kevo_kh; ++p) {
          const float* xr = kevo_x + ((img * kevo_c + ch) * kevo_h + i + p) * kevo_wd;
          for (int64_t q = 0; q < kevo_kw; ++q) {
            if (nf == FB) {
)",
                    FilterRows("FB"), R"(            } else {
)",
                    FilterRows("nf"), R"(            }
          }
        }
      }
      for (int64_t r = 0; r < nf; ++r) {
        float* yr = kevo_y + ((img * kevo_f + f0 + r) * oh + i) * ow;
        for (int64_t j = 0; j < ow; ++j) yr[j] = acc[r * ow + j];
      }
    }
    std::free(acc);
  }
}
)");
    return CppCandidate(std::move(s));
  }
};

// One image's im2col matrix [c*kh*kw, oh*ow] written straight in the layout
// kevo_gemm_blocks reads B from when it is given `packed`: block (jc, pc) at
// packed + jc * k + pc * round_up(nc, NR), panels of NR columns, each kc x NR,
// zero-padded; row r = (channel, kernel row, kernel column), column j = the
// output pixel (i, x), the input pixel it multiplies at (i + row, x + column).
constexpr char kIm2colPacked[] = R"(
static void kevo_im2col_packed(const float* __restrict xi, int64_t c, int64_t h, int64_t wd, int64_t kh,
                               int64_t kw, int64_t oh, int64_t ow, float* __restrict packed) {
  const int64_t kk = c * kh * kw, pp = oh * ow;
  for (int64_t jc = 0; jc < pp; jc += NC) {
    const int64_t nc = kevo_min(NC, pp - jc), ncpad = (nc + NR - 1) / NR * NR;
    for (int64_t pc = 0; pc < kk; pc += KC) {
      const int64_t kc = kevo_min(KC, kk - pc);
      for (int64_t jp = 0; jp < ncpad / NR; ++jp) {
        float* __restrict panel = packed + jc * kk + pc * ncpad + jp * NR * kc;
        const int64_t j0 = jc + jp * NR, w = kevo_min(NR, pp - j0);
        for (int64_t p = 0; p < kc; ++p) {
          const int64_t r = pc + p, ch = r / (kh * kw), u = r / kw % kh, v = r % kw;
          const float* __restrict src = xi + (ch * h + u) * wd + v;
          float* __restrict dst = panel + p * NR;
          int64_t i = j0 / ow, x = j0 % ow, q = 0;
          while (q < w) {  // runs along an output row
            const int64_t run = kevo_min(w - q, ow - x);
            std::memcpy(dst + q, src + i * wd + x, run * sizeof(float));
            q += run;
            x = 0;
            ++i;
          }
          for (; q < NR; ++q) dst[q] = 0.0f;
        }
      }
    }
  }
}
)";

class Conv2dIm2colRecipe final : public ConvRecipe {
 public:
  Conv2dIm2colRecipe()
      : ConvRecipe("conv2d_im2col",
                   "im2col of each image into a [c*kh*kw, oh*ow] matrix, then gemm_packed's "
                   "register-blocked GEMM of the weights by it",
                   PackedGemmSpace()) {}

 protected:
  absl::StatusOr<v1::Candidate> Write(const v1::Task& task, const Genome& genome, const ConvBinding& b) const override {
    KEVO_ASSIGN_OR_RETURN(std::string definition, DefinitionLine(task));
    const bool threaded = StrParam(genome, "threads") == "all";
    std::string s = PackedGemmFunctions(genome, v1::F32);
    absl::StrAppend(&s, kIm2colPacked, "\n", definition, " {\n", ConvLocals(b));
    absl::StrAppend(&s, R"(  if (oh <= 0 || ow <= 0 || kevo_n <= 0 || kevo_f <= 0) return;
  const int64_t kk = kevo_c * kevo_kh * kevo_kw, pp = oh * ow;
  if (kk <= 0) {  // no channels: every output is the empty sum
    std::memset(kevo_y, 0, sizeof(float) * kevo_n * kevo_f * pp);
    return;
  }
  // A thread an image: unrolled straight into the GEMM's packed layout and
  // multiplied by that thread alone, with no barrier between images.
  auto kevo_by_image = [&](int64_t img) {
    static thread_local kevo_scratch kevo_packed_scratch;
    float* packed = kevo_packed_scratch.get(kk * ((pp + NR - 1) / NR * NR));
    if (packed == nullptr) return;
    kevo_im2col_packed(kevo_x + img * kevo_c * kevo_h * kevo_wd, kevo_c, kevo_h, kevo_wd, kevo_kh, kevo_kw, oh, ow,
                       packed);
    kevo_gemm_blocks(kevo_w, kk, nullptr, pp, kevo_y + img * kevo_f * pp, pp, kevo_f, pp, kk, packed);
  };
)");
    if (!threaded) {
      absl::StrAppend(&s, "  for (int64_t img = 0; img < kevo_n; ++img) kevo_by_image(img);\n}\n");
      return CppCandidate(std::move(s));
    }
    // Fewer images than threads: the threads share each image's unrolling
    // and GEMM (which packs the unrolled matrix itself).
    absl::StrAppend(&s, R"(  if (kevo_n >= omp_get_max_threads()) {
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t img = 0; img < kevo_n; ++img) kevo_by_image(img);
    return;
  }
  static thread_local kevo_scratch kevo_col_scratch;
  float* col = kevo_col_scratch.get(kk * pp);
  if (col == nullptr) return;
  for (int64_t img = 0; img < kevo_n; ++img) {
    const float* xi = kevo_x + img * kevo_c * kevo_h * kevo_wd;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < kk; ++r) {
      const int64_t ch = r / (kevo_kh * kevo_kw), p = r / kevo_kw % kevo_kh, q = r % kevo_kw;
      float* dst = col + r * pp;
      for (int64_t i = 0; i < oh; ++i) {
        std::memcpy(dst + i * ow, xi + (ch * kevo_h + i + p) * kevo_wd + q, ow * sizeof(float));
      }
    }
    kevo_gemm(kevo_w, col, kevo_y + img * kevo_f * pp, kevo_f, pp, kk);
  }
}
)");
    return CppCandidate(std::move(s));
  }
};

class Conv2dDirectRecipe final : public ConvRecipe {
 public:
  Conv2dDirectRecipe()
      : ConvRecipe("conv2d_direct",
                   "direct conv2d as an implicit GEMM: FB filters x NV vectors of an output row in "
                   "registers, shifted input vectors from a zero-padded strip times broadcast packed weights",
                   SearchSpace({
                       {"fb", {"4", "8", "16"}, "8", "filters in a register tile"},
                       {"nv", {"1", "2", "4"}, "2", "vectors of output pixels in a register tile"},
                       {"width", {"8", "16"}, "16", "floats in a vector (16: one AVX-512 register; 8 without AVX-512)"},
                       {"threads", {"1", "all"}, "all", "OpenMP threads over (image, output row) tasks"},
                   })) {}

 protected:
  absl::StatusOr<v1::Candidate> Write(const v1::Task& task, const Genome& genome, const ConvBinding& b) const override {
    KEVO_ASSIGN_OR_RETURN(std::string definition, DefinitionLine(task));
    const bool threaded = StrParam(genome, "threads") == "all";
    const int64_t fb = IntParam(genome, "fb"), nv = IntParam(genome, "nv");
    // Without AVX-512 a vector of 16 floats is two registers of 16, and the
    // tile spills (the default read 0.02x of PyTorch on a Zen 4 built with
    // -mno-avx512f): there it is vectors of 8 and at most 12 accumulators
    // (fb=8, nv=2: 6 filters; 0.62x against im2col's 0.55x). With it, 24 at
    // most (fb=16 with nv=2 would take all 32 registers and spill).
    std::string s =
        absl::StrCat(kPrelude, "\n// Generated by kevo builtin recipe ", genome.ToString(), "\n", kIfAvx2WithoutAvx512,
                     "enum : int64_t { FB = ", std::min(fb, 12 / nv), ", NV = ", nv,
                     ", VW = 8 };\n#else\nenum : int64_t { FB = ", std::min(fb, 24 / nv), ", NV = ", nv,
                     ", VW = ", IntParam(genome, "width"), " };\n#endif\nenum : int64_t { TW = NV * VW };\n", kScratch);
    absl::StrAppend(&s, R"(typedef float kevo_cv __attribute__((vector_size(VW * sizeof(float))));

// One register tile: FB filters x TW pixels of an output row, over every
// (channel, kernel row, kernel column) step, the strip's rows `srow` floats
// apart, the weights `wb` packed [c*kh*kw][FB].
static inline void kevo_conv_tile(const float* __restrict sx, int64_t srow, const float* __restrict wb, int64_t c,
                                  int64_t kh, int64_t kw, float* __restrict out) {
  kevo_cv acc[FB][NV] = {};
  for (int64_t ch = 0; ch < c; ++ch) {
    for (int64_t p = 0; p < kh; ++p) {
      const float* __restrict sr = sx + (ch * kh + p) * srow;
      for (int64_t q = 0; q < kw; ++q, wb += FB) {
        kevo_cv xv[NV];
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) __builtin_memcpy(&xv[v], sr + q + v * VW, sizeof(kevo_cv));
#pragma GCC unroll 16
        for (int r = 0; r < FB; ++r) {
#pragma GCC unroll 4
          for (int v = 0; v < NV; ++v) acc[r][v] += wb[r] * xv[v];
        }
      }
    }
  }
  __builtin_memcpy(out, acc, sizeof acc);
}

)",
                    definition, " {\n", ConvLocals(b));
    absl::StrAppend(&s, R"(  if (oh <= 0 || ow <= 0 || kevo_n <= 0 || kevo_f <= 0) return;
  const int64_t kk = kevo_c * kevo_kh * kevo_kw;
  if (kk <= 0) {  // no channels: every output is the empty sum
    std::memset(kevo_y, 0, sizeof(float) * kevo_n * kevo_f * oh * ow);
    return;
  }
  const int64_t blocks = kevo_ceil_div(kevo_f, FB), tiles = kevo_ceil_div(ow, TW);
  // A strip row: the tiles' columns plus the kernel's overhang (>= the input's width).
  const int64_t srow = tiles * TW + kevo_kw - 1;
  static thread_local kevo_scratch kevo_wp_scratch;
  float* wp = kevo_wp_scratch.get(blocks * kk * FB);
  if (wp == nullptr) return;
)");
    const char* parallel = threaded ? "#pragma omp parallel\n" : "";
    const char* omp_for = threaded ? "#pragma omp for schedule(static)\n" : "";
    absl::StrAppend(&s, parallel, "  {\n", omp_for, R"(    for (int64_t blk = 0; blk < blocks; ++blk) {
      for (int64_t k = 0; k < kk; ++k) {
        for (int64_t r = 0; r < FB; ++r) {
          const int64_t f = blk * FB + r;
          wp[(blk * kk + k) * FB + r] = f < kevo_f ? kevo_w[f * kk + k] : 0.0f;
        }
      }
    }
    static thread_local kevo_scratch kevo_strip_scratch;
    float* strip = kevo_strip_scratch.get(kevo_c * kevo_kh * srow);
    alignas(64) float tile[FB * TW];
)",
                    omp_for, R"(    for (int64_t t = 0; t < kevo_n * oh; ++t) {
      if (strip == nullptr) continue;
      const int64_t img = t / oh, i = t % oh;
      for (int64_t ch = 0; ch < kevo_c; ++ch) {
        for (int64_t p = 0; p < kevo_kh; ++p) {
          float* dst = strip + (ch * kevo_kh + p) * srow;
          std::memcpy(dst, kevo_x + ((img * kevo_c + ch) * kevo_h + i + p) * kevo_wd, sizeof(float) * kevo_wd);
          std::memset(dst + kevo_wd, 0, sizeof(float) * (srow - kevo_wd));
        }
      }
      for (int64_t blk = 0; blk < blocks; ++blk) {
        const int64_t f0 = blk * FB, nf = kevo_min(FB, kevo_f - f0);
        for (int64_t j = 0; j < tiles; ++j) {
          kevo_conv_tile(strip + j * TW, srow, wp + blk * kk * FB, kevo_c, kevo_kh, kevo_kw, tile);
          const int64_t cols = kevo_min(TW, ow - j * TW);
          for (int64_t r = 0; r < nf; ++r) {
            std::memcpy(kevo_y + ((img * kevo_f + f0 + r) * oh + i) * ow + j * TW, tile + r * TW,
                        sizeof(float) * cols);
          }
        }
      }
    }
  }
}
)");
    return CppCandidate(std::move(s));
  }
};

}  // namespace

std::unique_ptr<Recipe> NewConv2dDirectRecipe() { return std::make_unique<Conv2dDirectRecipe>(); }
std::unique_ptr<Recipe> NewConv2dRowsRecipe() { return std::make_unique<Conv2dRowsRecipe>(); }
std::unique_ptr<Recipe> NewConv2dIm2colRecipe() { return std::make_unique<Conv2dIm2colRecipe>(); }

}  // namespace kevo::proposer
