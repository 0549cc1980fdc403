// MTIA baseline for row_sum (the mtia-sim platform times candidates against
// it): a straightforward, NAIVE single-PE port of reference.cc to the MTIA
// simulator API (mtia_sim/mtia.h). PE 0 does all the work while the
// other 63 PEs idle. Row by row, in chunks of at most 8192 columns, it copies
// the chunk into ONE local buffer (from the 32-byte boundary at or before the
// chunk: DMA needs aligned addresses) and adds it into the row's sum on the
// Reduction Engine; sums go out 8 rows at a time. Nothing overlaps: every
// load waits for the previous chunk's reduction.
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
    constexpr int64_t kChunk = 8192;
    const Buffer buf = pe.Alloc((kChunk + 8) * 4);
    const Buffer sums = pe.Alloc(8 * 4);
    for (int64_t r = 0; r < rows; ++r) {
      const Tile sum = Tile::Of(sums, DType::kF32, 8, 1).Sub(r % 8, 0, 1, 1);
      for (int64_t c0 = 0; c0 < cols; c0 += kChunk) {
        const int64_t n = std::min(kChunk, cols - c0);
        const int64_t lead = (r * cols + c0) % 8;  // elements before the chunk in its 32 bytes
        const uint64_t bytes = (n + lead) * 4;
        pe.Wait(pe.Copy(buf.Slice(0, bytes), x.Slice((r * cols + c0 - lead) * 4, bytes)));
        const Tile chunk = Tile::Of(buf, DType::kF32, 1, n + lead).Sub(0, lead, 1, n);
        pe.Wait(pe.ReduceRows(ReduceOp::kSum, sum, chunk, /*accumulate=*/c0 > 0));
      }
      if (r % 8 == 7 || r == rows - 1) {
        const int64_t r0 = r - r % 8;
        pe.Wait(pe.Copy(y.Slice(r0 * 4, (r - r0 + 1) * 4), sums.Slice(0, (r - r0 + 1) * 4)));
      }
    }
  });
}
