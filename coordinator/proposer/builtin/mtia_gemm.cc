// Recipe "mtia_gemm" for the mtia-sim platform: C = A * B for row-major
// float32 A (M x K), B (K x N), C (M x N), hints {pattern: gemm, a, b, c, m,
// n, k} (the CPU gemm recipe's hints).
//
// The Dot Product Engine multiplies fp16/bf16/int8 only, so float32 accuracy
// comes from the split x = hi + lo, hi = fp16(x), lo = fp16(2^11 (x - hi))
// (scaled so that lo keeps its bits instead of going subnormal), and
//   C = Ah.Bh + 2^-11 (Ah.Bl + Al.Bh),
// three fp16 DPE passes accumulated in fp32 (the Al.Bl term, ~2^-22
// relative, is dropped). An fp32 GEMM therefore runs at most at one third of
// the DPE's fp16 peak; docs/mtia-simulator.md says so.
//
// Two launches. (1) Every PE splits a slice of B into Bh and Bl (fp16, K x N)
// in the LLS scratchpad (or device DRAM). (2) The PEs of `pes / 8` grid rows
// take blocks of `rows` rows of C in turn; a block loads its A rows
// (contiguous, 32-byte aligned since blocks start on multiples of 8 rows),
// splits them, and streams B in panels of `depth` rows through
// `buffers`-slot circular buffers, read once per grid row with a row
// broadcast (or per PE), feeding three MatMuls per panel; then
// C = C1 + C2 / 2048 goes out in one DMA. Every PE of a grid row walks the
// same sequence of panels, so the broadcasts match even where a PE has no
// rows left. C blocks are full width: N is bounded by local memory (about
// 4,000 on MTIA 2i); tiles shrink (rows, then depth, then slots) to fit.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

#include "coordinator/proposer/builtin/bound_recipe.h"
#include "coordinator/proposer/builtin/codegen.h"
#include "coordinator/proposer/builtin/mtia_codegen.h"
#include "coordinator/proposer/builtin/recipe.h"

namespace kevo::proposer {
namespace {

struct GemmBinding {
  int a = -1, b = -1, c = -1, m = -1, n = -1, k = -1;
};

bool BindGemm(const v1::Task& task, GemmBinding* g) {
  if (Hint(task, "pattern") != "gemm") return false;
  const std::string a = Hint(task, "a", "A"), b = Hint(task, "b", "B"), c = Hint(task, "c", "C");
  const std::string m = Hint(task, "m", "M"), n = Hint(task, "n", "N"), k = Hint(task, "k", "K");
  const v1::TensorSpec* ta = FindInput(task, a);
  const v1::TensorSpec* tb = FindInput(task, b);
  const v1::TensorSpec* tc = FindOutput(task, c);
  auto is = [](const v1::TensorSpec* t, const std::string& r, const std::string& cc) {
    return t != nullptr && t->dtype() == v1::F32 && t->shape_size() == 2 && t->shape(0) == r && t->shape(1) == cc;
  };
  if (!is(ta, m, k) || !is(tb, k, n) || !is(tc, m, n)) return false;
  if (!IsSymbolParam(task, m) || !IsSymbolParam(task, n) || !IsSymbolParam(task, k)) return false;
  *g = {ParamIndex(task, a), ParamIndex(task, b), ParamIndex(task, c),
        ParamIndex(task, m), ParamIndex(task, n), ParamIndex(task, k)};
  return g->a >= 0 && g->b >= 0 && g->c >= 0;
}

class MtiaGemmRecipe final : public BoundRecipe<GemmBinding> {
 public:
  MtiaGemmRecipe()
      : BoundRecipe({"mtia_gemm", "mtia_gemm", kMtiaPlatform,
                     "MTIA fp32 GEMM on the fp16 DPE (hi/lo split, 3 passes): B split once into LLS, row "
                     "blocks over PEs, B panels broadcast per grid row and double-buffered"},
                    SearchSpace({
                        {"pes", {"8", "16", "32", "64"}, "64", "PEs computing C (whole grid rows of 8)"},
                        {"rows", {"8", "16", "32"}, "8", "rows of C per block (fewer if local memory is short)"},
                        {"depth", {"32", "64"}, "32", "rows of B per panel (the DPE reduces 32 deep per pass)"},
                        {"buffers", {"1", "2", "3"}, "2", "circular-buffer slots for B panels"},
                        {"broadcast", {"row", "none"}, "row", "B panels read once per grid row (broadcast) or per PE"},
                        {"stage", {"lls", "dram"}, "lls", "where the split B lives: LLS scratchpad or device DRAM"},
                    })) {}

  std::vector<std::map<std::string, std::string>> SeedOverrides() const override {
    return {{{"rows", "16"}}, {{"broadcast", "none"}}};
  }

 protected:
  bool Bind(const v1::Task& task, GemmBinding* g) const override { return BindGemm(task, g); }

  absl::StatusOr<v1::Candidate> Write(const v1::Task& task, const Genome& genome, const GemmBinding& g) const override {
    std::string s = MtiaPreamble(genome,
                                 "MTIA fp32 GEMM on the fp16 DPE: C = Ah.Bh + (Ah.Bl + Al.Bh) / 2048; B split "
                                 "once into scratch, row blocks of C over PEs, B panels streamed.");
    absl::StrAppend(&s, "constexpr int64_t kPes = ", IntParam(genome, "pes"),
                    ";\nconstexpr int64_t kRows = ", IntParam(genome, "rows"),
                    ";\nconstexpr int64_t kDepth = ", IntParam(genome, "depth"),
                    ";\nconstexpr int kSlots = ", IntParam(genome, "buffers"),
                    ";\nconstexpr bool kBroadcast = ", StrParam(genome, "broadcast") == "row" ? "true" : "false",
                    ";\nconstexpr bool kStageInLls = ", StrParam(genome, "stage") == "lls" ? "true" : "false", R"(;
constexpr float kLoScale = 2048.0f;  // 2^11: lo = fp16(2^11 (x - hi))

// hi = fp16(x), lo = fp16(2^11 (x - hi)); x (fp32) is clobbered, tmp is scratch.
void Split(Pe& pe, const Tile& x, const Tile& hi, const Tile& lo, const Tile& tmp) {
  pe.Convert(hi, x, 1.0f);
  pe.Convert(tmp, hi, 1.0f);
  pe.Binary(BinaryOp::kSub, x, x, tmp);
  pe.Convert(lo, x, kLoScale);
}
}  // namespace

extern "C" void kevo_mtia_launch(Grid& grid, void** args) {
)",
                    MtiaBufferArg("A", g.a), MtiaBufferArg("B", g.b), MtiaBufferArg("C", g.c), MtiaIntArg("M", g.m),
                    MtiaIntArg("N", g.n), MtiaIntArg("K", g.k),
                    R"(  const uint64_t half_bytes = static_cast<uint64_t>(K * N) * 2;
  const bool lls = kStageInLls && 2 * half_bytes <= grid.config().lls_bytes / 2;
  const Buffer bh = lls ? grid.AllocSram(half_bytes) : grid.AllocDram(half_bytes);
  const Buffer bl = lls ? grid.AllocSram(half_bytes) : grid.AllocDram(half_bytes);
  if (!grid.ok()) return;
  // (1) Split B, a flat K*N array, in 16-element-aligned slices (so fp32 and
  // fp16 offsets are both 32-byte aligned), 4,096 elements at a time.
  grid.Launch([=](Pe& pe) {
    const int64_t total = K * N, pes = pe.config().num_pes();
    const int64_t per_pe = ((total + 15) / 16 + pes - 1) / pes * 16;
    const int64_t e0 = pe.id() * per_pe, e1 = std::min(total, e0 + per_pe);
    if (e0 >= e1) return;
    constexpr int64_t kChunk = 4096;
    const CircularBuffer x = pe.AllocCircular(kChunk * 4, 2), t = pe.AllocCircular(kChunk * 4, 2);
    const CircularBuffer h = pe.AllocCircular(kChunk * 2, 2), l = pe.AllocCircular(kChunk * 2, 2);
    for (int64_t i = 0, c0 = e0; c0 < e1; ++i, c0 += kChunk) {
      const int64_t m = std::min(kChunk, e1 - c0);
      pe.Copy(x.Slot(i).Slice(0, m * 4), B.Slice(c0 * 4, m * 4));
      Split(pe, Tile::Of(x.Slot(i), DType::kF32, 1, m), Tile::Of(h.Slot(i), DType::kF16, 1, m),
            Tile::Of(l.Slot(i), DType::kF16, 1, m), Tile::Of(t.Slot(i), DType::kF32, 1, m));
      pe.Copy(bh.Slice(c0 * 2, m * 2), h.Slot(i).Slice(0, m * 2));
      pe.Copy(bl.Slice(c0 * 2, m * 2), l.Slot(i).Slice(0, m * 2));
    }
  });
  // (2) Row blocks of C; B panels from the split copies.
  grid.Launch([=](Pe& pe) {
    const int64_t grid_rows = std::max<int64_t>(1, std::min<int64_t>(kPes, pe.config().num_pes()) / pe.config().grid_cols);
    if (pe.row() >= grid_rows) return;
    const int64_t cols = pe.config().grid_cols, workers = grid_rows * cols;
    int64_t rows = kRows, depth = kDepth;
    int slots = kSlots;
    auto need = [&] {
      return 2 * Round32(rows * std::max(K, N) * 4) + 2 * Round32(rows * K * 2) + 2 * slots * Round32(depth * N * 2);
    };
    while (need() > pe.LocalFree()) {
      if (rows > 8) {
        rows -= 8;
      } else if (depth > 32) {
        depth /= 2;
      } else if (slots > 1) {
        --slots;
      } else if (depth > 16) {
        depth = 16;
      } else {
        break;  // the Alloc below reports the overflow
      }
    }
    // a32 holds A's rows, then C1; t32 is the split's scratch, then C2.
    const Buffer a32 = pe.Alloc(rows * std::max(K, N) * 4), t32 = pe.Alloc(rows * std::max(K, N) * 4);
    const Buffer ah = pe.Alloc(rows * K * 2), al = pe.Alloc(rows * K * 2);
    const CircularBuffer ph = pe.AllocCircular(depth * N * 2, slots), pl = pe.AllocCircular(depth * N * 2, slots);
    const int64_t blocks = (M + rows - 1) / rows, panels = (K + depth - 1) / depth;
    const int64_t rounds = (blocks + workers - 1) / workers;
    int64_t issued = 0;  // panels loaded so far (the slot index)
    auto load = [&](int64_t p) {
      const int64_t k0 = p * depth, kk = std::min(depth, K - k0);
      const Buffer sh = bh.Slice(k0 * N * 2, kk * N * 2), sl = bl.Slice(k0 * N * 2, kk * N * 2);
      const Buffer dh = ph.Slot(issued).Slice(0, kk * N * 2), dl = pl.Slot(issued).Slice(0, kk * N * 2);
      if (kBroadcast) {
        pe.BroadcastCopy(Group::kRow, dh, sh);
        pe.BroadcastCopy(Group::kRow, dl, sl);
      } else {
        pe.Copy(dh, sh);
        pe.Copy(dl, sl);
      }
      ++issued;
    };
    for (int64_t round = 0; round < rounds; ++round) {
      // Blocks go round-robin over the grid rows, then along each row.
      const int64_t block = (round * grid_rows + pe.row()) * cols + pe.col();
      const int64_t i0 = block * rows, m = std::max<int64_t>(0, std::min(rows, M - i0));
      if (m == 0 && !kBroadcast) break;
      Tile ahi, alo, c1, c2;
      if (m > 0) {
        pe.Copy(a32.Slice(0, m * K * 4), A.Slice(i0 * K * 4, m * K * 4));
        ahi = Tile::Of(ah, DType::kF16, m, K);
        alo = Tile::Of(al, DType::kF16, m, K);
        Split(pe, Tile::Of(a32, DType::kF32, m, K), ahi, alo, Tile::Of(t32, DType::kF32, m, K));
        c1 = Tile::Of(a32, DType::kF32, m, N);
        c2 = Tile::Of(t32, DType::kF32, m, N);
      }
      const int64_t first = issued;
      for (int64_t p = 0; p < std::min<int64_t>(slots - 1, panels); ++p) load(p);
      for (int64_t p = 0; p < panels; ++p) {
        if (p + slots - 1 < panels) load(p + slots - 1);
        if (m == 0) continue;  // still loading: the broadcasts of this grid row must match
        const int64_t k0 = p * depth, kk = std::min(depth, K - k0);
        const Tile bhi = Tile::Of(ph.Slot(first + p), DType::kF16, kk, N);
        const Tile blo = Tile::Of(pl.Slot(first + p), DType::kF16, kk, N);
        const Tile a_hi = ahi.Sub(0, k0, m, kk), a_lo = alo.Sub(0, k0, m, kk);
        pe.MatMul(c1, a_hi, bhi, /*accumulate=*/p > 0);
        pe.MatMul(c2, a_hi, blo, /*accumulate=*/p > 0);
        pe.MatMul(c2, a_lo, bhi, /*accumulate=*/true);
      }
      if (m == 0) continue;
      pe.BinaryScalar(BinaryOp::kMul, c2, c2, 1.0f / kLoScale);
      pe.Binary(BinaryOp::kAdd, c1, c1, c2);
      pe.Copy(C.Slice(i0 * N * 4, m * N * 4), a32.Slice(0, m * N * 4));
    }
  });
}
)");
    return MtiaCandidate(std::move(s));
  }
};

}  // namespace

std::unique_ptr<Recipe> NewMtiaGemmRecipe() { return std::make_unique<MtiaGemmRecipe>(); }

}  // namespace kevo::proposer
