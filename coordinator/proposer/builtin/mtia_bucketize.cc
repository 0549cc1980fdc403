// Recipe "mtia_bucketize" for the mtia-sim platform: index[i] = number of
// boundaries b[j] <= values[i] (side right; b[j] < values[i] for side left),
// float32 values and ascending float32 boundaries, int32 indices; hints
// {pattern: bucketize, values, boundaries, out, n, nb, side} (the CPU
// bucketize recipes' hints).
//
// The SIMD engine has no branches, so each PE runs a branchless binary search
// over a whole tile of values at once: the boundaries sit in local memory as
// a lookup table padded with NaN to P = 2^L > nb entries (NaN compares false,
// so padding never counts), and for step = P/2 .. 1
//   probe = table[pos + step - 1]   (Gather)
//   pos  += step * (probe <= v)      (a comparison mask)
// ends with pos = the count, converted to int32. That is 5 SIMD commands per
// step, log2(P) steps. Values are split over `pes` PEs in blocks of 8 and
// stream through `buffers`-slot circular buffers of `tile_kib` KiB, so the
// loads and stores overlap the search.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

#include "coordinator/proposer/builtin/bound_recipe.h"
#include "coordinator/proposer/builtin/codegen.h"
#include "coordinator/proposer/builtin/mtia_codegen.h"
#include "coordinator/proposer/builtin/recipe.h"

namespace kevo::proposer {
namespace {

struct BucketizeBinding {
  int values = -1, boundaries = -1, out = -1, n = -1, nb = -1;
  bool right = true;
};

bool BindBucketize(const v1::Task& task, BucketizeBinding* b) {
  if (Hint(task, "pattern") != "bucketize") return false;
  const std::string side = Hint(task, "side", "right");
  if (side != "right" && side != "left") return false;
  const std::string v = Hint(task, "values", "values"), bd = Hint(task, "boundaries", "boundaries");
  const std::string out = Hint(task, "out", "index"), n = Hint(task, "n", "n"), nb = Hint(task, "nb", "nb");
  const v1::TensorSpec* tv = FindInput(task, v);
  const v1::TensorSpec* tb = FindInput(task, bd);
  const v1::TensorSpec* to = FindOutput(task, out);
  if (tv == nullptr || tb == nullptr || to == nullptr) return false;
  if (tv->dtype() != v1::F32 || tb->dtype() != v1::F32 || to->dtype() != v1::I32) return false;
  if (tv->shape_size() != 1 || tv->shape(0) != n || tb->shape_size() != 1 || tb->shape(0) != nb ||
      to->shape_size() != 1 || to->shape(0) != n || !IsSymbolParam(task, n) || !IsSymbolParam(task, nb)) {
    return false;
  }
  *b = {ParamIndex(task, v), ParamIndex(task, bd), ParamIndex(task, out),
        ParamIndex(task, n), ParamIndex(task, nb), side == "right"};
  return true;
}

class MtiaBucketizeRecipe final : public BoundRecipe<BucketizeBinding> {
 public:
  MtiaBucketizeRecipe()
      : BoundRecipe(
            {"mtia_bucketize", "mtia_bucketize", kMtiaPlatform,
             "MTIA bucketize: branchless binary search on the SIMD engine (Gather from a "
             "NaN-padded boundary table, compare masks), values over PEs, tiles double-buffered"},
            SearchSpace({
                {"pes", {"1", "8", "16", "32", "64"}, "64", "PEs the values are split over"},
                {"tile_kib",
                 {"4", "8", "16", "32"},
                 "16",
                 "KiB of values per tile (halved while local memory is short)"},
                {"buffers", {"1", "2", "3", "4"}, "3", "circular-buffer slots: loads run buffers-1 tiles ahead"},
            })) {}

  std::vector<std::map<std::string, std::string>> SeedOverrides() const override {
    return {{{"buffers", "2"}}, {{"tile_kib", "32"}}};
  }

 protected:
  bool Bind(const v1::Task& task, BucketizeBinding* b) const override { return BindBucketize(task, b); }

  absl::StatusOr<v1::Candidate> Write(const v1::Task& task, const Genome& genome,
                                      const BucketizeBinding& b) const override {
    std::string s = MtiaPreamble(genome,
                                 "MTIA bucketize: branchless binary search per tile of values (Gather "
                                 "from a NaN-padded boundary table, compare masks).");
    absl::StrAppend(&s, "constexpr int64_t kPes = ", IntParam(genome, "pes"),
                    ";\nconstexpr int64_t kTileElems = ", IntParam(genome, "tile_kib") * 256,
                    ";\nconstexpr int64_t kSlots = ", IntParam(genome, "buffers"),
                    ";\nconstexpr BinaryOp kCounts = ", b.right ? "BinaryOp::kLe" : "BinaryOp::kLt",
                    ";  // probe op value: the boundary counts\n}  // namespace\n\n",
                    "extern \"C\" void kevo_mtia_launch(Grid& grid, void** args) {\n",
                    MtiaBufferArg("values", b.values), MtiaBufferArg("boundaries", b.boundaries),
                    MtiaBufferArg("index", b.out), MtiaIntArg("n", b.n), MtiaIntArg("nb", b.nb),
                    R"(  int64_t table_size = 1;
  while (table_size <= nb) table_size *= 2;  // P = 2^L > nb: the count fits in [0, P - 1]
  grid.Launch([=](Pe& pe) {
    const int64_t pes = std::min<int64_t>(kPes, pe.config().num_pes());
    if (pe.id() >= pes) return;
    const int64_t per_pe = ((n + 7) / 8 + pes - 1) / pes * 8;
    const int64_t e0 = pe.id() * per_pe, e1 = std::min(n, e0 + per_pe);
    if (e0 >= e1) return;
    const Buffer table = pe.Alloc(table_size * 4);
    const Tile tt = Tile::Of(table, DType::kF32, 1, table_size);
    pe.Fill(tt, __builtin_nanf(""));
    if (nb > 0) pe.Copy(table.Slice(0, nb * 4), boundaries.Slice(0, nb * 4));
    int64_t te = std::min<int64_t>(kTileElems, (e1 - e0 + 7) / 8 * 8);
    // Per tile: values and int32 indices (kSlots each), pos, idx and probe.
    auto need = [&](int64_t t) { return (2 * kSlots + 3) * Round32(t * 4); };
    while (te > 8 && need(te) > pe.LocalFree()) te = std::max<int64_t>(8, te / 16 * 8);
    const CircularBuffer vin = pe.AllocCircular(te * 4, kSlots), iout = pe.AllocCircular(te * 4, kSlots);
    const Buffer posb = pe.Alloc(te * 4), idxb = pe.Alloc(te * 4), probeb = pe.Alloc(te * 4);
    const int64_t tiles = (e1 - e0 + te - 1) / te;
    auto len = [&](int64_t t) { return std::min(te, e1 - (e0 + t * te)); };
    auto load = [&](int64_t t) {
      pe.Copy(vin.Slot(t).Slice(0, len(t) * 4), values.Slice((e0 + t * te) * 4, len(t) * 4));
    };
    for (int64_t t = 0; t < std::min<int64_t>(kSlots - 1, tiles); ++t) load(t);
    for (int64_t t = 0; t < tiles; ++t) {
      if (t + kSlots - 1 < tiles) load(t + kSlots - 1);
      const int64_t m = len(t);
      const Tile v = Tile::Of(vin.Slot(t), DType::kF32, 1, m);
      const Tile pos = Tile::Of(posb, DType::kF32, 1, m), idx = Tile::Of(idxb, DType::kF32, 1, m);
      const Tile probe = Tile::Of(probeb, DType::kF32, 1, m);
      pe.Fill(pos, 0.0f);
      for (int64_t step = table_size / 2; step >= 1; step /= 2) {
        pe.BinaryScalar(BinaryOp::kAdd, idx, pos, static_cast<float>(step - 1));
        pe.Gather(probe, tt, idx);
        pe.Binary(kCounts, probe, probe, v);
        pe.BinaryScalar(BinaryOp::kMul, probe, probe, static_cast<float>(step));
        pe.Binary(BinaryOp::kAdd, pos, pos, probe);
      }
      pe.Convert(Tile::Of(iout.Slot(t), DType::kI32, 1, m), pos, 1.0f);
      pe.Copy(index.Slice((e0 + t * te) * 4, m * 4), iout.Slot(t).Slice(0, m * 4));
    }
  });
}
)");
    return MtiaCandidate(std::move(s));
  }
};

}  // namespace

std::unique_ptr<Recipe> NewMtiaBucketizeRecipe() { return std::make_unique<MtiaBucketizeRecipe>(); }

}  // namespace kevo::proposer
