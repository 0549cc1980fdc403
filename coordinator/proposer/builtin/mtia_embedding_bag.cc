// Recipe "mtia_embedding_bag" for the mtia-sim platform: out[b] = sum (or
// mean) of the table rows indices[off[b] .. off[b] + lengths[b]), off[b] the
// running sum of lengths, for a float32 table (rows x D), int64 indices and
// lengths; hints {pattern: embedding_bag, mode: sum|mean, table, indices,
// lengths, out, d, bags}.
//
// Bags are split over `pes` PEs in blocks of 8 (so output blocks start
// 32-byte aligned). Each PE reads its bags' lengths with the scalar core
// (ReadLocal), publishes its index count through DRAM and, after a barrier,
// adds up the counts of the PEs before it: its first index. Then, per group
// of `group` bags: the group's indices come in with one DMA (prefetched a
// group ahead when `prefetch` is on), the scalar core reads them and issues
// one DMA per table row into a ring of `inflight` row slots (each slot its
// own allocation, so the row DMAs overlap each other and the adds), and the
// bag's rows are summed: by one Reduction-Engine ReduceCols over the bag's
// consecutive slots when rows are 32-byte aligned (D % 8 == 0) and
// `reduce` is re, else row by row on the SIMD engine (rows DMA'd from the
// 32-byte boundary before them). Sums are in index order, like the
// reference. A group's output block goes out in one DMA.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

#include "coordinator/proposer/builtin/bound_recipe.h"
#include "coordinator/proposer/builtin/codegen.h"
#include "coordinator/proposer/builtin/mtia_codegen.h"
#include "coordinator/proposer/builtin/recipe.h"

namespace kevo::proposer {
namespace {

struct BagBinding {
  int table = -1, indices = -1, lengths = -1, out = -1, d = -1, bags = -1;
  bool mean = false;
};

bool BindBags(const v1::Task& task, BagBinding* b) {
  EmbeddingBagShapes e;
  if (!BindEmbeddingBag(task, &e)) return false;
  *b = {ParamIndex(task, e.table),
        ParamIndex(task, e.indices),
        ParamIndex(task, e.lengths),
        ParamIndex(task, e.out),
        ParamIndex(task, e.d),
        ParamIndex(task, e.bags),
        e.mean};
  return true;
}

class MtiaEmbeddingBagRecipe final : public BoundRecipe<BagBinding> {
 public:
  MtiaEmbeddingBagRecipe()
      : BoundRecipe(
            {"mtia_embedding_bag", "mtia_embedding_bag", kMtiaPlatform,
             "MTIA embedding bag: bags over PEs, scalar-core index reads, one DMA per table row "
             "into a ring of slots, Reduction-Engine column sums"},
            SearchSpace({
                {"pes", {"1", "8", "16", "32", "64"}, "64", "PEs the bags are split over"},
                {"group", {"8", "16", "32"}, "16", "bags per index DMA and output block"},
                {"inflight", {"48", "96", "192"}, "96", "row slots: table-row DMAs that can run ahead of the adds"},
                {"reduce", {"re", "simd"}, "re", "sum a bag with one ReduceCols (aligned rows) or row by row"},
                {"prefetch", {"on", "off"}, "on", "load the next group's indices before reading this one's"},
            })) {}

  std::vector<std::map<std::string, std::string>> SeedOverrides() const override {
    return {{{"reduce", "simd"}}, {{"group", "32"}}};
  }

 protected:
  bool Bind(const v1::Task& task, BagBinding* b) const override { return BindBags(task, b); }

  absl::StatusOr<v1::Candidate> Write(const v1::Task& task, const Genome& genome, const BagBinding& b) const override {
    std::string s = MtiaPreamble(genome, absl::StrCat("MTIA embedding bag (", b.mean ? "mean" : "sum",
                                                      "): bags over PEs, one DMA per table row, column sums."));
    absl::StrAppend(&s, "constexpr int64_t kPes = ", IntParam(genome, "pes"),
                    ";\nconstexpr int64_t kGroup = ", IntParam(genome, "group"),
                    ";\nconstexpr int64_t kInflight = ", IntParam(genome, "inflight"),
                    ";\nconstexpr bool kUseRe = ", StrParam(genome, "reduce") == "re" ? "true" : "false",
                    ";\nconstexpr bool kPrefetch = ", StrParam(genome, "prefetch") == "on" ? "true" : "false",
                    ";\nconstexpr bool kMean = ", b.mean ? "true" : "false", R"(;
}  // namespace

extern "C" void kevo_mtia_launch(Grid& grid, void** args) {
)",
                    MtiaBufferArg("table", b.table), MtiaBufferArg("indices", b.indices),
                    MtiaBufferArg("lengths", b.lengths), MtiaBufferArg("out", b.out), MtiaIntArg("D", b.d),
                    MtiaIntArg("B", b.bags), R"(  const int64_t all_pes = grid.config().num_pes();
  const Buffer counts = grid.AllocDram(all_pes * 32);  // each PE's index count, 32 bytes apart
  if (!grid.ok()) return;
  grid.Launch([=](Pe& pe) {
    const int64_t pes = std::min<int64_t>(kPes, all_pes);
    const int64_t per_pe = ((B + 7) / 8 + pes - 1) / pes * 8;
    const int64_t b0 = pe.id() < pes ? std::min(B, pe.id() * per_pe) : B, b1 = std::min(B, b0 + per_pe);
    const int64_t nbags = b1 - b0;
    // Lengths through the scalar core, 512 at a time.
    std::vector<int64_t> lens(nbags);
    const Buffer lb = pe.Alloc(512 * 8);
    for (int64_t c0 = 0; c0 < nbags; c0 += 512) {
      const int64_t c = std::min<int64_t>(512, nbags - c0);
      pe.Copy(lb.Slice(0, c * 8), lengths.Slice((b0 + c0) * 8, c * 8));
      pe.ReadLocal(lb.Slice(0, c * 8), &lens[c0]);
    }
    int64_t mine = 0;
    for (int64_t l : lens) mine += l;
    // Publish the count as two floats (exact): mine / 4096 and mine % 4096.
    const Buffer cb = pe.Alloc(32);
    const Tile ct = Tile::Of(cb, DType::kF32, 1, 2);
    pe.Fill(ct.Sub(0, 0, 1, 1), static_cast<float>(mine / 4096));
    pe.Fill(ct.Sub(0, 1, 1, 1), static_cast<float>(mine % 4096));
    pe.Copy(counts.Slice(pe.id() * 32, 32), cb);
    pe.Barrier();
    if (nbags == 0) return;
    const Buffer allb = pe.Alloc(all_pes * 32);
    pe.Copy(allb, counts);
    std::vector<float> cv(all_pes * 8);
    pe.ReadLocal(allb, cv.data());
    int64_t off = 0;  // this PE's first index
    for (int q = 0; q < pe.id(); ++q) off += static_cast<int64_t>(cv[q * 8]) * 4096 + static_cast<int64_t>(cv[q * 8 + 1]);

    const int64_t groups = (nbags + kGroup - 1) / kGroup;
    std::vector<int64_t> gstart(groups + 1, off);  // first index of each group
    for (int64_t g = 0; g < groups; ++g) {
      gstart[g + 1] = gstart[g];
      for (int64_t i = g * kGroup; i < std::min(nbags, (g + 1) * kGroup); ++i) gstart[g + 1] += lens[i];
    }
    int64_t most = 0;
    for (int64_t g = 0; g < groups; ++g) most = std::max(most, gstart[g + 1] - gstart[g]);
    const CircularBuffer ib = pe.AllocCircular((most + 4) * 8, kPrefetch ? 2 : 1);
    const CircularBuffer ob = pe.AllocCircular(kGroup * D * 4, 2);
    const uint64_t slot_bytes = Round32((D + 8) * 4);
    const int64_t fit = static_cast<int64_t>(pe.LocalFree() / slot_bytes);
    const int64_t ring = std::max<int64_t>(1, std::min(kInflight, fit));
    const CircularBuffer rs = pe.AllocCircular(slot_bytes, static_cast<int>(ring));
    auto load_indices = [&](int64_t g) {
      const int64_t o = gstart[g], c = gstart[g + 1] - o, lead = o % 4;
      if (c > 0) pe.Copy(ib.Slot(g).Slice(0, (c + lead) * 8), indices.Slice((o - lead) * 8, (c + lead) * 8));
    };
    if (kPrefetch) load_indices(0);
    int64_t next = 0;  // next row slot
    for (int64_t g = 0; g < groups; ++g) {
      if (kPrefetch && g + 1 < groups) load_indices(g + 1);
      if (!kPrefetch) load_indices(g);
      const int64_t o = gstart[g], c = gstart[g + 1] - o, lead = o % 4;
      std::vector<int64_t> idx(c + lead);
      if (c > 0) pe.ReadLocal(ib.Slot(g).Slice(0, (c + lead) * 8), idx.data());
      const int64_t first = b0 + g * kGroup, nb = std::min(kGroup, b1 - first);
      const Tile ot = Tile::Of(ob.Slot(g), DType::kF32, nb, D);
      int64_t j = lead;
      for (int64_t i = 0; i < nb; ++i) {
        const int64_t L = lens[g * kGroup + i];
        const Tile dst = ot.Sub(i, 0, 1, D);
        if (L == 0) {
          pe.Fill(dst, 0.0f);
          continue;
        }
        const bool re = kUseRe && D % 8 == 0 && L <= ring;
        if (re && next + L > ring) next = 0;  // the bag's rows in consecutive slots
        std::vector<int64_t> leads(L);
        for (int64_t r = 0; r < L; ++r) {
          const int64_t a = idx[j++] * D;
          leads[r] = a % 8;
          pe.Copy(rs.Slot(next + r).Slice(0, (D + leads[r]) * 4), table.Slice((a - leads[r]) * 4, (D + leads[r]) * 4));
        }
        if (re) {
          const Buffer span{Space::kLocal, pe.id(), rs.Slot(next).address, L * rs.slot_stride};
          pe.ReduceCols(ReduceOp::kSum, dst, Tile::Of(span, DType::kF32, L, D, rs.slot_stride / 4), false);
        } else {
          auto row = [&](int64_t r) {
            return Tile::Of(rs.Slot(next + r), DType::kF32, 1, D + leads[r]).Sub(0, leads[r], 1, D);
          };
          pe.Unary(UnaryOp::kCopy, dst, row(0));
          for (int64_t r = 1; r < L; ++r) pe.Binary(BinaryOp::kAdd, dst, dst, row(r));
        }
        if (kMean) pe.BinaryScalar(BinaryOp::kDiv, dst, dst, static_cast<float>(L));
        next = (next + L) % ring;
      }
      pe.Copy(out.Slice(first * D * 4, nb * D * 4), ob.Slot(g).Slice(0, nb * D * 4));
    }
  });
}
)");
    return MtiaCandidate(std::move(s));
  }
};

}  // namespace

std::unique_ptr<Recipe> NewMtiaEmbeddingBagRecipe() { return std::make_unique<MtiaEmbeddingBagRecipe>(); }

}  // namespace kevo::proposer
