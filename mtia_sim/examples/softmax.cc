#include <algorithm>

#include "mtia_sim/examples/kernels.h"

namespace kevo::mtia::examples {

Kernel SoftmaxF32(Buffer x, Buffer y, int64_t rows, int64_t cols, SoftmaxOptions o) {
  return [=](Pe& pe) {
    const int64_t pes = pe.config().num_pes();
    const int64_t per_pe = ((rows + pes - 1) / pes + 7) / 8 * 8;
    const int64_t r0 = pe.id() * per_pe, r1 = std::min(rows, r0 + per_pe);
    if (r0 >= r1) return;
    const int64_t tr = o.tile_rows;
    const int64_t tiles = (r1 - r0 + tr - 1) / tr;
    const uint64_t tile_bytes = tr * cols * 4;
    CircularBuffer in = pe.AllocCircular(tile_bytes, o.slots);
    CircularBuffer out = pe.AllocCircular(tile_bytes, o.slots);
    CircularBuffer mx = pe.AllocCircular(tr * 4, o.slots);
    CircularBuffer sum = pe.AllocCircular(tr * 4, o.slots);
    auto n_rows = [&](int64_t t) { return std::min(tr, r1 - (r0 + t * tr)); };
    auto load = [&](int64_t t) {
      const uint64_t bytes = n_rows(t) * cols * 4;
      Token tok = pe.Copy(in.Slot(t).Slice(0, bytes), x.Slice((r0 + t * tr) * cols * 4, bytes));
      if (o.wait_each_dma) pe.Wait(tok);
    };
    // Loads run slots-1 tiles ahead of compute (the DMA queue is in order).
    for (int64_t t = 0; t < std::min<int64_t>(o.slots - 1, tiles); ++t) load(t);
    for (int64_t t = 0; t < tiles; ++t) {
      if (t + o.slots - 1 < tiles) load(t + o.slots - 1);
      const int64_t n = n_rows(t);
      const uint64_t bytes = n * cols * 4;
      Tile xt = Tile::Of(in.Slot(t), DType::kF32, n, cols);
      Tile yt = Tile::Of(out.Slot(t), DType::kF32, n, cols);
      Tile m = Tile::Of(mx.Slot(t), DType::kF32, n, 1);
      Tile s = Tile::Of(sum.Slot(t), DType::kF32, n, 1);
      pe.ReduceRows(ReduceOp::kMax, m, xt, false);
      pe.BinaryRow(BinaryOp::kSub, yt, xt, m);
      pe.Unary(UnaryOp::kExp, yt, yt);
      pe.ReduceRows(ReduceOp::kSum, s, yt, false);
      pe.Unary(UnaryOp::kRecip, s, s);
      pe.BinaryRow(BinaryOp::kMul, yt, yt, s);
      Token store = pe.Copy(y.Slice((r0 + t * tr) * cols * 4, bytes), out.Slot(t).Slice(0, bytes));
      if (o.wait_each_dma) pe.Wait(store);
    }
  };
}

}  // namespace kevo::mtia::examples
