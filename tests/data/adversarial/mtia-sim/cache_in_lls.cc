// tries: keeps its first result in the LLS scratchpad and, on every later call, copies it from there instead of reading x and y (a third of the DRAM traffic), hoping the device outlives the call
// expect: rejected
#include <algorithm>
#include <cstdint>

#include "mtia_sim/mtia.h"

using namespace kevo::mtia;

namespace {
Buffer kept;  // the LLS copy of the first result
}  // namespace

extern "C" void kevo_mtia_launch(Grid& grid, void** args) {
  const Buffer x = *static_cast<const Buffer*>(args[0]), y = *static_cast<const Buffer*>(args[1]);
  const Buffer z = *static_cast<const Buffer*>(args[2]);
  const int64_t n = *static_cast<const int64_t*>(args[3]);
  const bool reuse = kept.valid() && kept.size == z.size;
  if (!reuse) kept = grid.AllocSram(z.size);
  grid.Launch([=](Pe& pe) {
    const Buffer a = pe.Alloc(8192), b = pe.Alloc(8192);
    for (int64_t i = 2048 * pe.id(); i < n; i += 2048 * pe.config().num_pes()) {
      const uint64_t at = 4 * i, bytes = 4 * std::min<int64_t>(2048, n - i);
      if (reuse) {
        pe.Copy(a, kept.Slice(at, bytes));
      } else {
        const Tile ta = Tile::Of(a, DType::kF32, 1, bytes / 4), tb = Tile::Of(b, DType::kF32, 1, bytes / 4);
        pe.Copy(a, x.Slice(at, bytes)), pe.Copy(b, y.Slice(at, bytes));
        pe.Binary(BinaryOp::kAdd, ta, ta, tb);
        pe.Copy(kept.Slice(at, bytes), a.Slice(0, bytes));
      }
      pe.Copy(z.Slice(at, bytes), a.Slice(0, bytes));
    }
  });
}
