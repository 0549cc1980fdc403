// MTIA baseline for softmax (the mtia-sim platform times candidates against
// it): a straightforward, NAIVE single-PE port of reference.cc to the MTIA
// simulator API (mtia_sim/mtia.h). PE 0 does all the work while the
// other 63 PEs idle; it takes 8 rows at a time (8 rows of fp32 always start on
// a 32-byte boundary, whatever cols is) into ONE local buffer, computes the
// three passes (row max on the Reduction Engine, subtract and exp on the SIMD
// engine, row sum, reciprocal, scale), stores the rows, and waits for the
// store before the next load: no double buffering, no overlap.
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
    if (pe.id() != 0) return;
    constexpr int64_t kRows = 8;
    const Buffer buf = pe.Alloc(kRows * cols * 4);
    const Buffer mx = pe.Alloc(kRows * 4), sum = pe.Alloc(kRows * 4);
    for (int64_t r0 = 0; r0 < rows; r0 += kRows) {
      const int64_t n = std::min(kRows, rows - r0);
      const uint64_t bytes = n * cols * 4;
      pe.Copy(buf.Slice(0, bytes), x.Slice(r0 * cols * 4, bytes));
      const Tile t = Tile::Of(buf, DType::kF32, n, cols);
      const Tile m = Tile::Of(mx, DType::kF32, n, 1), s = Tile::Of(sum, DType::kF32, n, 1);
      pe.ReduceRows(ReduceOp::kMax, m, t, /*accumulate=*/false);
      pe.BinaryRow(BinaryOp::kSub, t, t, m);
      pe.Unary(UnaryOp::kExp, t, t);
      pe.ReduceRows(ReduceOp::kSum, s, t, /*accumulate=*/false);
      pe.Unary(UnaryOp::kRecip, s, s);
      pe.BinaryRow(BinaryOp::kMul, t, t, s);
      pe.Wait(pe.Copy(y.Slice(r0 * cols * 4, bytes), buf.Slice(0, bytes)));
    }
  });
}
