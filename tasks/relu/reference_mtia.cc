// MTIA baseline for relu (the mtia-sim platform times candidates against it):
// a straightforward, NAIVE single-PE port of reference.cc to the MTIA
// simulator API (mtia_sim/mtia.h). PE 0 does all the work while the
// other 63 PEs idle: chunks of 8192 elements (every chunk starts 32-byte
// aligned) are copied into ONE local buffer, max(x, 0) is taken on the SIMD
// engine and copied out, and the next chunk waits for the store: no double
// buffering, no overlap.
#include <algorithm>
#include <cstdint>

#include "mtia_sim/mtia.h"

using namespace kevo::mtia;

extern "C" void kevo_mtia_launch(Grid& grid, void** args) {
  const Buffer x = *static_cast<const Buffer*>(args[0]);
  const Buffer y = *static_cast<const Buffer*>(args[1]);
  const int64_t n = *static_cast<const int64_t*>(args[2]);
  grid.Launch([=](Pe& pe) {
    if (pe.id() != 0) return;
    constexpr int64_t kChunk = 8192;
    const Buffer a = pe.Alloc(kChunk * 4);
    for (int64_t i0 = 0; i0 < n; i0 += kChunk) {
      const int64_t m = std::min(kChunk, n - i0);
      const uint64_t bytes = m * 4;
      pe.Copy(a.Slice(0, bytes), x.Slice(i0 * 4, bytes));
      const Tile v = Tile::Of(a, DType::kF32, 1, m);
      pe.Unary(UnaryOp::kRelu, v, v);
      pe.Wait(pe.Copy(y.Slice(i0 * 4, bytes), a.Slice(0, bytes)));
    }
  });
}
