// Max and average pooling over up to three spatial dims, for float32 x
// [planes, d, h, w] (planes: batch x channels; a 1-D or 2-D pool has d = h
// = 1 or d = 1) into y [planes, od, oh, ow]:
//   pool       (cpu)
//   cuda_pool  (nvidia)
//       hints {pattern: pool, op: max|avg, kernel, stride, padding, dilation:
//              "kd,kh,kw" each, include_pad: 1|0 (avg), in, out, planes, d, h,
//              w, od, oh, ow}
// Windows start at o * stride - padding and take kernel taps dilation
// apart; taps outside x are skipped (max) or count as zeros (avg with
// include_pad, divided by the kernel's volume; without it, by the taps
// inside). Max propagates NaN, as PyTorch's does. Only floor-mode output
// sizes (no ceil_mode). No native task has this shape: the KernelBench
// bridge lowers nn.MaxPool1d/2d/3d and nn.AvgPool1d/2d/3d to it
// (kernelbench_bridge.cc), which never computes max pooling's indices.
//
// The cpu recipe walks an output row (fixed plane, oz, oy) in chunks of
// `chunk` outputs, tap by tap over the chunk (a stride-1 pool reads x
// contiguously there), OpenMP threads over rows. The CUDA one gives each
// thread a group of outputs at a time, the taps unrolled (the kernel's size
// is a constant), consecutive threads along ow; a thread keeps its columns
// and steps over rows, its index arithmetic 32-bit where the sizes allow.
// Where neighbouring windows overlap along the row (stride 1), a thread takes
// 4 outputs and loads the x values their windows span once. Or (`load`;
// 1-D pools by default) a block copies the x values a tile of its row's
// outputs spans to shared memory, coalesced, and its threads take
// consecutive outputs from there (coalesced stores too).
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

#include "coordinator/proposer/builtin/bound_recipe.h"
#include "coordinator/proposer/builtin/codegen.h"
#include "coordinator/proposer/builtin/gpu_codegen.h"
#include "coordinator/proposer/builtin/recipe.h"

namespace kevo::proposer {
namespace {

struct PoolBinding {
  std::string in, out, planes, d, h, w, od, oh, ow;
  bool max = true, include_pad = true;
  int64_t k[3], s[3], p[3], dil[3];  // d, h, w
};

// "a,b,c" as three positive (or, for padding, non-negative) numbers.
bool Triple(const std::string& text, int64_t min, int64_t out[3]) {
  std::vector<std::string> parts = absl::StrSplit(text, ',');
  if (parts.size() != 3) return false;
  for (int i = 0; i < 3; ++i) {
    if (!absl::SimpleAtoi(parts[i], &out[i]) || out[i] < min || out[i] > 1024) return false;
  }
  return true;
}

bool BindPool(const v1::Task& task, PoolBinding* b) {
  if (Hint(task, "pattern") != "pool") return false;
  const std::string op = Hint(task, "op"), include_pad = Hint(task, "include_pad", "1");
  if ((op != "max" && op != "avg") || (include_pad != "1" && include_pad != "0")) return false;
  b->max = op == "max";
  b->include_pad = include_pad == "1";
  if (!Triple(Hint(task, "kernel"), 1, b->k) || !Triple(Hint(task, "stride"), 1, b->s) ||
      !Triple(Hint(task, "padding"), 0, b->p) || !Triple(Hint(task, "dilation", "1,1,1"), 1, b->dil)) {
    return false;
  }
  for (int i = 0; i < 3; ++i) {
    if (2 * b->p[i] > b->k[i]) return false;  // PyTorch's rule: every window holds a tap inside x
  }
  b->in = Hint(task, "in", "x");
  b->out = Hint(task, "out", "y");
  std::string* dims[] = {&b->planes, &b->d, &b->h, &b->w, &b->od, &b->oh, &b->ow};
  const char* names[] = {"planes", "d", "h", "w", "od", "oh", "ow"};
  for (int i = 0; i < 7; ++i) {
    *dims[i] = Hint(task, names[i], names[i]);
    if (!IsSymbolParam(task, *dims[i])) return false;
  }
  const v1::TensorSpec* x = FindInput(task, b->in);
  const v1::TensorSpec* y = FindOutput(task, b->out);
  if (x == nullptr || y == nullptr || x->dtype() != v1::F32 || y->dtype() != v1::F32 ||
      !IsSignatureParam(task, b->in) || !IsSignatureParam(task, b->out) || x->shape_size() != 4 ||
      y->shape_size() != 4) {
    return false;
  }
  for (int i = 0; i < 4; ++i) {
    if (x->shape(i) != *dims[i] || y->shape(i) != *dims[i == 0 ? 0 : i + 3]) return false;
  }
  return DefinitionLine(task).ok();
}

// constexpr K*/S*/P*/L* (dilation) for the three dims, and the divisor.
std::string PoolConstants(const PoolBinding& b) {
  std::string s;
  const char* axis[] = {"D", "H", "W"};
  for (int i = 0; i < 3; ++i) {
    absl::StrAppend(&s, "constexpr int64_t K", axis[i], " = ", b.k[i], ", S", axis[i], " = ", b.s[i], ", P", axis[i],
                    " = ", b.p[i], ", L", axis[i], " = ", b.dil[i], ";\n");
  }
  return s;
}

// A tap's value `v` taken into `acc`: NaN sticks in a max.
std::string Take(const PoolBinding& b, const std::string& acc, const std::string& v) {
  return b.max ? absl::StrCat(acc, " = (", v, " > ", acc, " || ", v, " != ", v, ") ? ", v, " : ", acc, ";")
               : absl::StrCat(acc, " += ", v, ";");
}

class PoolRecipe final : public BoundRecipe<PoolBinding> {
 public:
  PoolRecipe()
      : BoundRecipe({"pool", "pool", "cpu",
                     "max or average pooling: output rows in chunks, tap by tap over a chunk, rows over threads"},
                    SearchSpace({
                        {"chunk", {"64", "256", "1024"}, "256", "outputs of a row taken tap by tap together"},
                        {"threads", {"1", "all"}, "all", "OpenMP threads over output rows"},
                    })) {}

 protected:
  bool Bind(const v1::Task& task, PoolBinding* b) const override { return BindPool(task, b); }

  absl::StatusOr<v1::Candidate> Write(const v1::Task& task, const Genome& genome, const PoolBinding& b) const override {
    KEVO_ASSIGN_OR_RETURN(std::string definition, DefinitionLine(task));
    const int64_t chunk = IntParam(genome, "chunk");
    std::string s = kPrelude;
    absl::StrAppend(&s, "#include <math.h>\n\n// Generated by kevo builtin recipe ", genome.ToString(), "\n",
                    PoolConstants(b), "constexpr int64_t kChunk = ", chunk, ";\n\n", definition, " {\n",
                    "  const int64_t kevo_d = ", b.d, ", kevo_h = ", b.h, ", kevo_w = ", b.w, ", kevo_od = ", b.od,
                    ", kevo_oh = ", b.oh, ", kevo_ow = ", b.ow, ";\n");
    if (StrParam(genome, "threads") != "1") absl::StrAppend(&s, "#pragma omp parallel for schedule(static)\n");
    absl::StrAppend(&s, "  for (int64_t kevo_r = 0; kevo_r < ", b.planes, R"( * kevo_od * kevo_oh; ++kevo_r) {
    const int64_t kevo_oy = kevo_r % kevo_oh, kevo_oz = kevo_r / kevo_oh % kevo_od, kevo_p = kevo_r / kevo_oh / kevo_od;
    const float* kevo_xp = )",
                    b.in, R"( + kevo_p * kevo_d * kevo_h * kevo_w;
    float* kevo_yr = )",
                    b.out, R"( + kevo_r * kevo_ow;
    int64_t kevo_rows = 0;  // taps of the window inside x along d and h
    for (int64_t kevo_kz = 0; kevo_kz < KD; ++kevo_kz) {
      const int64_t kevo_z = kevo_oz * SD - PD + kevo_kz * LD;
      for (int64_t kevo_ky = 0; kevo_ky < KH; ++kevo_ky) {
        const int64_t kevo_y = kevo_oy * SH - PH + kevo_ky * LH;
        kevo_rows += kevo_z >= 0 && kevo_z < kevo_d && kevo_y >= 0 && kevo_y < kevo_h;
      }
    }
    for (int64_t kevo_c0 = 0; kevo_c0 < kevo_ow; kevo_c0 += kChunk) {
      const int64_t kevo_n = kevo_min(kChunk, kevo_ow - kevo_c0);
      float kevo_acc[kChunk];
      for (int64_t kevo_i = 0; kevo_i < kevo_n; ++kevo_i) {
        kevo_acc[kevo_i] = )",
                    b.max ? "-INFINITY" : "0.0f", R"(;
      }
      for (int64_t kevo_kz = 0; kevo_kz < KD; ++kevo_kz) {
        const int64_t kevo_z = kevo_oz * SD - PD + kevo_kz * LD;
        if (kevo_z < 0 || kevo_z >= kevo_d) continue;
        for (int64_t kevo_ky = 0; kevo_ky < KH; ++kevo_ky) {
          const int64_t kevo_y = kevo_oy * SH - PH + kevo_ky * LH;
          if (kevo_y < 0 || kevo_y >= kevo_h) continue;
          const float* kevo_xr = kevo_xp + (kevo_z * kevo_h + kevo_y) * kevo_w;
          for (int64_t kevo_kx = 0; kevo_kx < KW; ++kevo_kx) {
            // The chunk's outputs whose tap kx lies inside x: x index
            // (c0 + i) * SW - PW + kx * LW in [0, w).
            const int64_t kevo_off = kevo_kx * LW - PW;
            const int64_t kevo_lo = kevo_min(kevo_n, kevo_max(0, kevo_ceil_div(-kevo_off, SW) - kevo_c0));
            const int64_t kevo_hi = kevo_max(kevo_lo, kevo_min(kevo_n, kevo_ceil_div(kevo_w - kevo_off, SW) - kevo_c0));
#pragma omp simd
            for (int64_t kevo_i = kevo_lo; kevo_i < kevo_hi; ++kevo_i) {
              const float kevo_v = kevo_xr[(kevo_c0 + kevo_i) * SW + kevo_off];
              )",
                    Take(b, "kevo_acc[kevo_i]", "kevo_v"), R"(
            }
          }
        }
      }
)");
    // The divisor: the kernel's volume, or the taps inside x.
    if (b.max) {
      absl::StrAppend(
          &s,
          "      for (int64_t kevo_i = 0; kevo_i < kevo_n; ++kevo_i) kevo_yr[kevo_c0 + kevo_i] = kevo_acc[kevo_i];\n");
    } else if (b.include_pad) {
      absl::StrAppend(&s,
                      "      for (int64_t kevo_i = 0; kevo_i < kevo_n; ++kevo_i) kevo_yr[kevo_c0 + kevo_i] = "
                      "kevo_acc[kevo_i] / static_cast<float>(KD * KH * KW);\n");
    } else {
      absl::StrAppend(&s, R"(      for (int64_t kevo_i = 0; kevo_i < kevo_n; ++kevo_i) {
        int64_t kevo_inside = 0;
        for (int64_t kevo_kx = 0; kevo_kx < KW; ++kevo_kx) {
          const int64_t kevo_x = (kevo_c0 + kevo_i) * SW - PW + kevo_kx * LW;
          kevo_inside += kevo_x >= 0 && kevo_x < kevo_w;
        }
        kevo_yr[kevo_c0 + kevo_i] = kevo_acc[kevo_i] / static_cast<float>(kevo_rows * kevo_inside);
      }
)");
    }
    absl::StrAppend(&s, "    }\n  }\n}\n");
    return CppCandidate(std::move(s));
  }
};

class CudaPoolRecipe final : public BoundRecipe<PoolBinding> {
 public:
  CudaPoolRecipe()
      : BoundRecipe({"cuda_pool", "cuda_pool", kCudaPlatform,
                     "CUDA max or average pooling: a thread per output column (or 4 where windows overlap, "
                     "their span loaded once), or a block's tile of a row through shared memory, stepping over "
                     "rows, the taps unrolled, 32-bit index arithmetic"},
                    SearchSpace({
                        {"threads", {"128", "256", "512"}, "256", "threads per block"},
                        {"load",
                         {"auto", "registers", "shared"},
                         "auto",
                         "windows read from registers (a thread's span) or a block's tile in shared memory; auto: "
                         "shared for 1-D pools"},
                    })) {}

 protected:
  bool Bind(const v1::Task& task, PoolBinding* b) const override { return BindPool(task, b); }

  absl::StatusOr<v1::Candidate> Write(const v1::Task& task, const Genome& genome, const PoolBinding& b) const override {
    KEVO_ASSIGN_OR_RETURN(std::string definition, DefinitionLine(task));
    const bool shared = Shared(b, StrParam(genome, "load"), IntParam(genome, "threads"));
    const int64_t items = shared ? kSharedItems : Items(b);
    const std::string pad = b.max ? "-INFINITY" : "0.0f";
    std::string s = absl::StrCat(
        "// Generated by kevo builtin recipe ", genome.ToString(), "\n", CudaPrelude(),
        "#include <math.h>\n\nnamespace {\n\nconstexpr int kThreads = ", IntParam(genome, "threads"), ";\n",
        PoolConstants(b), "constexpr int kItems = ", items, ";  // outputs a thread takes along the row\n");
    if (shared) {
      absl::StrAppend(&s, R"(constexpr int kTile = kThreads * kItems;  // outputs a block takes along the row
constexpr int kTileSpan = (kTile - 1) * SW + (KW - 1) * LW + 1;  // x values their windows cover

// A block takes a tile of kTile consecutive outputs of a row (grid y: the
// row's tiles) and steps over rows (grid x). For each window row inside x,
// its threads copy the x values the tile's windows span to shared memory,
// consecutive threads consecutive values, then thread t takes the outputs
// t + i * kThreads from there: every load and store coalesced, each x value
// read from memory once per tile and window row. The row's plane and
// position are found once a row in I (32-bit where the sizes allow).
template <typename I>
__global__ void __launch_bounds__(kThreads)
kevo_pool(const float* __restrict__ x, float* __restrict__ y, I rows, I d, I h, I w, I od, I oh, I ow) {
  __shared__ float tile[kTileSpan];
  for (I t0 = static_cast<I>(blockIdx.y) * kTile; t0 < ow; t0 += static_cast<I>(gridDim.y) * kTile) {
    for (I r = blockIdx.x; r < rows; r += gridDim.x) {
)");
    } else {
      absl::StrAppend(
          &s, R"(constexpr int kSpan = (kItems - 1) * SW + (KW - 1) * LW + 1;  // x values their windows cover in a row

// A block's threads take consecutive groups of kItems outputs of a row (grid
// y: the row's tiles); blocks step over rows (grid x). The row's plane and
// position are found once a row in I (32-bit where the sizes allow): a
// division in int64_t is tens of instructions, more than the taps.
template <typename I>
__global__ void __launch_bounds__(kThreads)
kevo_pool(const float* __restrict__ x, float* __restrict__ y, I rows, I d, I h, I w, I od, I oh, I ow) {
  for (I ox0 = (static_cast<I>(blockIdx.y) * kThreads + threadIdx.x) * kItems; ox0 < ow;
       ox0 += static_cast<I>(gridDim.y) * kThreads * kItems) {
    for (I r = blockIdx.x; r < rows; r += gridDim.x) {
)");
    }
    absl::StrAppend(&s, R"(      const I oy = r % oh, t = r / oh;
      const I oz = t % od;
      const float* xp = x + static_cast<int64_t>(t / od) * d * h * w;
      float acc[kItems];
#pragma unroll
      for (int i = 0; i < kItems; ++i) acc[i] = )",
                    pad, R"(;
      int rows_inside = 0;  // window rows (d, h) inside x
#pragma unroll
      for (int kz = 0; kz < KD; ++kz) {
        const int64_t z = static_cast<int64_t>(oz) * SD - PD + kz * LD;
        if (z < 0 || z >= d) continue;
#pragma unroll
        for (int ky = 0; ky < KH; ++ky) {
          const int64_t yy = static_cast<int64_t>(oy) * SH - PH + ky * LH;
          if (yy < 0 || yy >= h) continue;
          ++rows_inside;
          const float* xr = xp + (z * h + yy) * w;
          const int64_t x0 = static_cast<int64_t>()",
                    shared ? "t0" : "ox0", R"() * SW - PW;
)");
    if (shared) {
      // The window row is the block's (r is), so every thread meets the barriers.
      absl::StrAppend(&s, R"(          __syncthreads();  // the previous window row's reads are done
#pragma unroll
          for (int k = 0; k < (kTileSpan + kThreads - 1) / kThreads; ++k) {
            const int j = threadIdx.x + k * kThreads;
            const int64_t xx = x0 + j;
            if (j < kTileSpan) tile[j] = xx >= 0 && xx < w ? __ldg(xr + xx) : )",
                      pad, R"(;
          }
          __syncthreads();
#pragma unroll
          for (int i = 0; i < kItems; ++i) {
            const int o = threadIdx.x + i * kThreads;
#pragma unroll
            for (int kx = 0; kx < KW; ++kx) {
              )",
                      Take(b, "acc[i]", "tile[o * SW + kx * LW]"), R"(
            }
          }
)");
    } else if (items > 1) {
      // The windows of kItems neighbours overlap: each x value of their span
      // is loaded once, then every window reads it from registers.
      absl::StrAppend(&s, R"(          float v[kSpan];
#pragma unroll
          for (int j = 0; j < kSpan; ++j) {
            const int64_t xx = x0 + j;
            v[j] = xx >= 0 && xx < w ? __ldg(xr + xx) : )",
                      pad, R"(;
          }
#pragma unroll
          for (int i = 0; i < kItems; ++i) {
#pragma unroll
            for (int kx = 0; kx < KW; ++kx) {
              )",
                      Take(b, "acc[i]", "v[i * SW + kx * LW]"), R"(
            }
          }
)");
    } else {
      absl::StrAppend(&s, R"(#pragma unroll
          for (int kx = 0; kx < KW; ++kx) {
            const int64_t xx = x0 + kx * LW;
            if (xx < 0 || xx >= w) continue;
            const float v = __ldg(xr + xx);
            )",
                      Take(b, "acc[0]", "v"), R"(
          }
)");
    }
    // Taps outside x count for nothing (max, or avg with include_pad, whose
    // divisor is the kernel's volume); without include_pad an average is over
    // the taps inside: its window rows times its columns inside.
    // Output i of the thread is column ox of the row, y[row + ox].
    std::string store = "y[row + ox] = acc[i];";
    if (!b.max && b.include_pad) store = "y[row + ox] = acc[i] / static_cast<float>(KD * KH * KW);";
    if (!b.max && !b.include_pad) {
      store = R"(int cols_inside = 0;
#pragma unroll
        for (int kx = 0; kx < KW; ++kx) {
          const int64_t xx = static_cast<int64_t>(ox) * SW - PW + kx * LW;
          cols_inside += xx >= 0 && xx < w;
        }
        y[row + ox] = acc[i] / static_cast<float>(rows_inside * cols_inside);)";
    }
    absl::StrAppend(&s, R"(        }
      }
      (void)rows_inside;
      const int64_t row = static_cast<int64_t>(r) * ow;
#pragma unroll
      for (int i = 0; i < kItems; ++i) {
        const I ox = )",
                    shared ? "t0 + threadIdx.x + i * kThreads" : "ox0 + i", R"(;
        if (ox >= ow) break;
        )",
                    store, R"(
      }
    }
  }
}

}  // namespace

)",
                    definition, " {\n  const int64_t kevo_rows = ", b.planes, " * ", b.od, " * ", b.oh,
                    ", kevo_ow = ", b.ow, ";\n  if (kevo_rows <= 0 || kevo_ow <= 0) return;\n",
                    R"(  const int64_t kevo_tiles = kevo_min(kevo_ceil_div(kevo_ow, kThreads * kItems), 65535);
  const dim3 kevo_grid(static_cast<unsigned>(kevo_max(1, kevo_min(kevo_rows, kevo_grid_blocks(2048 / kThreads * 8) / kevo_tiles))),
                       static_cast<unsigned>(kevo_tiles));
  const int64_t kevo_widest = kevo_max(kevo_max(kevo_rows, kevo_ow + kThreads * kItems), kevo_max()",
                    b.d, ", kevo_max(", b.h, ", ", b.w, R"()));
  if (kevo_widest < (int64_t{1} << 31)) {
    kevo_pool<uint32_t><<<kevo_grid, kThreads>>>()",
                    b.in, ", ", b.out, ", kevo_rows, ", b.d, ", ", b.h, ", ", b.w, ", ", b.od, ", ", b.oh,
                    ", kevo_ow);\n", "  } else {\n    kevo_pool<int64_t><<<kevo_grid, kThreads>>>(", b.in, ", ", b.out,
                    ", kevo_rows, ", b.d, ", ", b.h, ", ", b.w, ", ", b.od, ", ", b.oh, ", kevo_ow);\n  }\n}\n");
    return CudaCandidate(std::move(s));
  }

 private:
  // Outputs a thread takes in shared memory's tiles.
  static constexpr int64_t kSharedItems = 4;

  // Whether the windows are read through a tile in shared memory: `load`
  // "shared", or "auto" for a 1-D pool (one window row: one pair of barriers
  // a tile) whose windows overlap (else each x value is read once anyway),
  // where the tile fits in 48 KiB.
  static bool Shared(const PoolBinding& b, const std::string& load, int64_t threads) {
    const int64_t span = (threads * kSharedItems - 1) * b.s[2] + (b.k[2] - 1) * b.dil[2] + 1;
    const bool overlap = (b.k[2] - 1) * b.dil[2] + 1 > b.s[2];
    const bool wanted = load == "shared" || (load == "auto" && b.k[0] == 1 && b.k[1] == 1 && overlap);
    return wanted && span * 4 <= 48 * 1024;
  }

  // Outputs a thread takes along the row: 4 where their windows overlap
  // enough that loading their span once saves a quarter of the loads or
  // more, and the span fits in registers; else 1 (each tap loaded).
  static int64_t Items(const PoolBinding& b) {
    constexpr int64_t kItemsOverlapping = 4, kMaxSpan = 48;
    const int64_t span = (kItemsOverlapping - 1) * b.s[2] + (b.k[2] - 1) * b.dil[2] + 1;
    const int64_t taps = kItemsOverlapping * b.k[2];
    return span <= kMaxSpan && 4 * span <= 3 * taps ? kItemsOverlapping : 1;
  }
};

}  // namespace

std::unique_ptr<Recipe> NewPoolRecipe() { return std::make_unique<PoolRecipe>(); }
std::unique_ptr<Recipe> NewCudaPoolRecipe() { return std::make_unique<CudaPoolRecipe>(); }

}  // namespace kevo::proposer
