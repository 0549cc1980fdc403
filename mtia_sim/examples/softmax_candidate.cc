// An MTIA candidate in the form the mtia-sim backend loads (docs/mtia-simulator.md,
// "Candidate ABI"): C++ that includes only mtia_sim/mtia.h, built as a
// shared object, exporting kevo_mtia_launch for the softmax task
// (tasks/softmax: softmax(x, y, rows, cols), fp32, row-wise). Not part of any
// library: tests/mtia_sim/candidate_abi_test.cc compiles and loads it.
#include <algorithm>
#include <cstdint>

#include "mtia_sim/mtia.h"

using namespace kevo::mtia;

extern "C" void kevo_mtia_launch(Grid& grid, void** args) {
  const Buffer x = *static_cast<const Buffer*>(args[0]);
  const Buffer y = *static_cast<const Buffer*>(args[1]);
  const int64_t rows = *static_cast<const int64_t*>(args[2]);
  const int64_t cols = *static_cast<const int64_t*>(args[3]);
  grid.Launch([=](Pe& pe) {
    // Row blocks start on multiples of 8 rows, so every fp32 block starts on a
    // 32-byte boundary whatever `cols` is.
    const int64_t pes = pe.config().num_pes();
    const int64_t per_pe = ((rows + pes - 1) / pes + 7) / 8 * 8;
    const int64_t r0 = pe.id() * per_pe, r1 = std::min(rows, r0 + per_pe);
    if (r0 >= r1) return;
    // As many rows per tile as fit two input and two output slots in half
    // of local memory (a multiple of 8).
    int64_t tr = static_cast<int64_t>(pe.config().local_memory_bytes / 2 / (4 * cols * 4)) / 8 * 8;
    tr = std::max<int64_t>(8, std::min<int64_t>(tr, 64));
    const int64_t tiles = (r1 - r0 + tr - 1) / tr;
    CircularBuffer in = pe.AllocCircular(tr * cols * 4, 2), out = pe.AllocCircular(tr * cols * 4, 2);
    CircularBuffer mx = pe.AllocCircular(tr * 4, 2), sum = pe.AllocCircular(tr * 4, 2);
    auto n_rows = [&](int64_t t) { return std::min(tr, r1 - (r0 + t * tr)); };
    auto load = [&](int64_t t) {
      const uint64_t bytes = n_rows(t) * cols * 4;
      pe.Copy(in.Slot(t).Slice(0, bytes), x.Slice((r0 + t * tr) * cols * 4, bytes));
    };
    load(0);
    for (int64_t t = 0; t < tiles; ++t) {
      if (t + 1 < tiles) load(t + 1);  // the next load goes ahead of this tile's store
      const int64_t n = n_rows(t);
      Tile xt = Tile::Of(in.Slot(t), DType::kF32, n, cols), yt = Tile::Of(out.Slot(t), DType::kF32, n, cols);
      Tile m = Tile::Of(mx.Slot(t), DType::kF32, n, 1), s = Tile::Of(sum.Slot(t), DType::kF32, n, 1);
      pe.ReduceRows(ReduceOp::kMax, m, xt, false);
      pe.BinaryRow(BinaryOp::kSub, yt, xt, m);
      pe.Unary(UnaryOp::kExp, yt, yt);
      pe.ReduceRows(ReduceOp::kSum, s, yt, false);
      pe.Unary(UnaryOp::kRecip, s, s);
      pe.BinaryRow(BinaryOp::kMul, yt, yt, s);
      pe.Copy(y.Slice((r0 + t * tr) * cols * 4, n * cols * 4), out.Slot(t).Slice(0, n * cols * 4));
    }
  });
}
