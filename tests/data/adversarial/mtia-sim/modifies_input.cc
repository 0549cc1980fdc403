// tries: computes the right answer, then zeroes its input x by DMA from a zero-filled tile
// expect: INPUT_MODIFIED
#include <algorithm>
#include <cstdint>

#include "mtia_sim/mtia.h"

using namespace kevo::mtia;

extern "C" void kevo_mtia_launch(Grid& grid, void** args) {
  const Buffer x = *static_cast<const Buffer*>(args[0]), y = *static_cast<const Buffer*>(args[1]);
  const Buffer z = *static_cast<const Buffer*>(args[2]);
  const int64_t n = *static_cast<const int64_t*>(args[3]);
  grid.Launch([=](Pe& pe) {
    const Buffer a = pe.Alloc(8192), b = pe.Alloc(8192);
    for (int64_t i = 2048 * pe.id(); i < n; i += 2048 * pe.config().num_pes()) {
      const uint64_t at = 4 * i, bytes = 4 * std::min<int64_t>(2048, n - i);
      const Tile ta = Tile::Of(a, DType::kF32, 1, bytes / 4), tb = Tile::Of(b, DType::kF32, 1, bytes / 4);
      pe.Copy(a, x.Slice(at, bytes)), pe.Copy(b, y.Slice(at, bytes));
      pe.Binary(BinaryOp::kAdd, ta, ta, tb);
      pe.Wait(pe.Copy(z.Slice(at, bytes), a.Slice(0, bytes)));
      pe.Fill(tb, 0.0f);
      pe.Wait(pe.Copy(x.Slice(at, bytes), b.Slice(0, bytes)));
    }
  });
}
