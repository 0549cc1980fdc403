#include "mtia_sim/examples/kernels.h"

namespace kevo::mtia::examples {

Kernel GemmF16(Buffer a, Buffer b, Buffer c, int64_t m, int64_t n, int64_t k, GemmOptions o) {
  return [=](Pe& pe) {
    const Config& cfg = pe.config();
    const int64_t bm = m / cfg.grid_rows, bn = n / cfg.grid_cols, kt = o.k_tile;
    const int64_t steps = k / kt;
    Buffer acc = pe.Alloc(bm * bn * 4);
    CircularBuffer at = pe.AllocCircular(bm * kt * 2, o.slots);
    CircularBuffer bt = pe.AllocCircular(kt * bn * 2, o.slots);
    Tile c_tile = Tile::Of(acc, DType::kF32, bm, bn);
    for (int64_t s = 0; s < steps; ++s) {
      // A block: rows [r*bm, +bm), columns [s*kt, +kt); B block: rows
      // [s*kt, +kt), columns [c*bn, +bn). Hazards are tracked per slot, so
      // the load of step s+1 overlaps the MatMul of step s.
      Buffer a_src = a.Slice((pe.row() * bm * k + s * kt) * 2, ((bm - 1) * k + kt) * 2);
      Buffer b_src = b.Slice((s * kt * n + pe.col() * bn) * 2, ((kt - 1) * n + bn) * 2);
      if (o.broadcast) {
        pe.BroadcastCopy2D(Group::kRow, at.Slot(s), kt * 2, a_src, k * 2, bm, kt * 2);
        pe.BroadcastCopy2D(Group::kColumn, bt.Slot(s), bn * 2, b_src, n * 2, kt, bn * 2);
      } else {
        pe.Copy2D(at.Slot(s), kt * 2, a_src, k * 2, bm, kt * 2);
        pe.Copy2D(bt.Slot(s), bn * 2, b_src, n * 2, kt, bn * 2);
      }
      pe.MatMul(c_tile, Tile::Of(at.Slot(s), DType::kF16, bm, kt), Tile::Of(bt.Slot(s), DType::kF16, kt, bn),
                /*accumulate=*/s > 0);
    }
    pe.Copy2D(c.Slice((pe.row() * bm * n + pe.col() * bn) * 4, ((bm - 1) * n + bn) * 4), n * 4, acc, bn * 4, bm,
              bn * 4);
  };
}

}  // namespace kevo::mtia::examples
