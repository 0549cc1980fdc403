// MTIA baseline for embedding_bag_mean (the mtia-sim platform times candidates
// against it): a straightforward, NAIVE single-PE port of reference.cc to the
// MTIA simulator API (mtia_sim/mtia.h). PE 0 does all the work while
// the other 63 PEs idle. Bags go in blocks of 8 (8 output rows start 32-byte
// aligned whatever D is): the scalar core reads the block's lengths and each
// bag's indices (ReadLocal, after a DMA from the 32-byte boundary at or
// before them), then every table row is DMA'd into ONE row buffer (from the
// 32-byte boundary at or before it), waited for, and added into the bag's
// output row on the SIMD engine, then divided by the bag's length.
// Nothing overlaps.
#include <algorithm>
#include <cstdint>

#include "mtia_sim/mtia.h"

using namespace kevo::mtia;

extern "C" void kevo_mtia_launch(Grid& grid, void** args) {
  const Buffer table = *static_cast<const Buffer*>(args[0]);
  const Buffer indices = *static_cast<const Buffer*>(args[1]);
  const Buffer lengths = *static_cast<const Buffer*>(args[2]);
  const Buffer out = *static_cast<const Buffer*>(args[3]);
  const int64_t D = *static_cast<const int64_t*>(args[5]);
  const int64_t B = *static_cast<const int64_t*>(args[6]);
  grid.Launch([=](Pe& pe) {
    if (pe.id() != 0) return;
    constexpr int64_t kMaxBag = 40;  // the task's largest bag
    const Buffer lb = pe.Alloc(8 * 8), ib = pe.Alloc((kMaxBag + 4) * 8), row = pe.Alloc((D + 8) * 4),
                 acc = pe.Alloc(8 * D * 4);
    int64_t off = 0;
    for (int64_t b0 = 0; b0 < B; b0 += 8) {
      const int64_t nb = std::min<int64_t>(8, B - b0);
      int64_t lens[8];
      pe.Copy(lb.Slice(0, nb * 8), lengths.Slice(b0 * 8, nb * 8));
      pe.ReadLocal(lb.Slice(0, nb * 8), lens);
      for (int64_t i = 0; i < nb; ++i) {
        const Tile dst = Tile::Of(acc, DType::kF32, 8, D).Sub(i, 0, 1, D);
        pe.Fill(dst, 0.0f);
        if (lens[i] > 0) {
          const int64_t lead = off % 4;
          int64_t idx[kMaxBag + 4];
          pe.Copy(ib.Slice(0, (lens[i] + lead) * 8), indices.Slice((off - lead) * 8, (lens[i] + lead) * 8));
          pe.ReadLocal(ib.Slice(0, (lens[i] + lead) * 8), idx);
          for (int64_t j = 0; j < lens[i]; ++j) {
            const int64_t a = idx[lead + j] * D, l = a % 8;
            pe.Wait(pe.Copy(row.Slice(0, (D + l) * 4), table.Slice((a - l) * 4, (D + l) * 4)));
            pe.Binary(BinaryOp::kAdd, dst, dst, Tile::Of(row, DType::kF32, 1, D + l).Sub(0, l, 1, D));
          }
        }
        if (lens[i] > 0) pe.BinaryScalar(BinaryOp::kDiv, dst, dst, static_cast<float>(lens[i]));
        off += lens[i];
      }
      pe.Wait(pe.Copy(out.Slice(b0 * D * 4, nb * D * 4), acc.Slice(0, nb * D * 4)));
    }
  });
}
