// MTIA baseline for bucketize (the mtia-sim platform times candidates against
// it): a straightforward, NAIVE single-PE port of reference.cc to the MTIA
// simulator API (mtia_sim/mtia.h). PE 0 does all the work while the
// other 63 PEs idle. The SIMD engine has no branches, so the reference's
// binary search becomes the branchless one, over a chunk of 8192 values at
// once: the boundaries sit in local memory padded with NaN to P = 2^L > nb
// entries (NaN compares false), and for step = P/2 .. 1,
// pos += step * (boundary[pos + step - 1] <= value) (Gather + compare mask).
// ONE buffer per chunk, and the next chunk waits for the store: no double
// buffering, no overlap.
#include <algorithm>
#include <cstdint>

#include "mtia_sim/mtia.h"

using namespace kevo::mtia;

extern "C" void kevo_mtia_launch(Grid& grid, void** args) {
  const Buffer values = *static_cast<const Buffer*>(args[0]);
  const Buffer boundaries = *static_cast<const Buffer*>(args[1]);
  const Buffer index = *static_cast<const Buffer*>(args[2]);
  const int64_t n = *static_cast<const int64_t*>(args[3]);
  const int64_t nb = *static_cast<const int64_t*>(args[4]);
  int64_t p = 1;
  while (p <= nb) p *= 2;
  grid.Launch([=](Pe& pe) {
    if (pe.id() != 0) return;
    constexpr int64_t kChunk = 8192;
    const Buffer table = pe.Alloc(p * 4);
    const Tile tt = Tile::Of(table, DType::kF32, 1, p);
    pe.Fill(tt, __builtin_nanf(""));
    if (nb > 0) pe.Copy(table.Slice(0, nb * 4), boundaries.Slice(0, nb * 4));
    const Buffer v = pe.Alloc(kChunk * 4), pos = pe.Alloc(kChunk * 4), idx = pe.Alloc(kChunk * 4),
                 probe = pe.Alloc(kChunk * 4), out = pe.Alloc(kChunk * 4);
    for (int64_t i0 = 0; i0 < n; i0 += kChunk) {
      const int64_t m = std::min(kChunk, n - i0);
      pe.Copy(v.Slice(0, m * 4), values.Slice(i0 * 4, m * 4));
      const Tile tv = Tile::Of(v, DType::kF32, 1, m), tpos = Tile::Of(pos, DType::kF32, 1, m);
      const Tile tidx = Tile::Of(idx, DType::kF32, 1, m), tprobe = Tile::Of(probe, DType::kF32, 1, m);
      pe.Fill(tpos, 0.0f);
      for (int64_t step = p / 2; step >= 1; step /= 2) {
        pe.BinaryScalar(BinaryOp::kAdd, tidx, tpos, static_cast<float>(step - 1));
        pe.Gather(tprobe, tt, tidx);
        pe.Binary(BinaryOp::kLe, tprobe, tprobe, tv);  // boundary <= value
        pe.BinaryScalar(BinaryOp::kMul, tprobe, tprobe, static_cast<float>(step));
        pe.Binary(BinaryOp::kAdd, tpos, tpos, tprobe);
      }
      pe.Convert(Tile::Of(out, DType::kI32, 1, m), tpos, 1.0f);
      pe.Wait(pe.Copy(index.Slice(i0 * 4, m * 4), out.Slice(0, m * 4)));
    }
  });
}
