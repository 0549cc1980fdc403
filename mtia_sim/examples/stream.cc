#include <algorithm>

#include "mtia_sim/examples/kernels.h"

namespace kevo::mtia::examples {

Kernel StreamScale(Buffer x, Buffer y, uint64_t bytes, StreamOptions o) {
  return [=](Pe& pe) {
    const int active = o.active_pes > 0 ? o.active_pes : pe.config().num_pes();
    if (pe.id() >= active) return;
    const uint64_t share = bytes / active;
    const uint64_t base = share * pe.id();
    const int64_t tiles = static_cast<int64_t>((share + o.tile_bytes - 1) / o.tile_bytes);
    CircularBuffer in = pe.AllocCircular(o.tile_bytes, o.slots);
    CircularBuffer out = pe.AllocCircular(o.tile_bytes, o.slots);
    auto len = [&](int64_t t) { return std::min<uint64_t>(o.tile_bytes, share - t * o.tile_bytes); };
    auto load = [&](int64_t t) {
      Token tok = pe.Copy(in.Slot(t).Slice(0, len(t)), x.Slice(base + t * o.tile_bytes, len(t)));
      if (o.wait_each_dma) pe.Wait(tok);
    };
    // The DMA queue is in order: loads are issued slots-1 tiles ahead, before
    // the store of the current tile (which must wait for its compute).
    for (int64_t t = 0; t < std::min<int64_t>(o.slots - 1, tiles); ++t) load(t);
    for (int64_t t = 0; t < tiles; ++t) {
      if (t + o.slots - 1 < tiles) load(t + o.slots - 1);
      const int64_t elems = static_cast<int64_t>(len(t) / 4);
      pe.BinaryScalar(BinaryOp::kMul, Tile::Of(out.Slot(t), DType::kF32, 1, elems),
                      Tile::Of(in.Slot(t), DType::kF32, 1, elems), 2.0f);
      Token store = pe.Copy(y.Slice(base + t * o.tile_bytes, len(t)), out.Slot(t).Slice(0, len(t)));
      if (o.wait_each_dma) pe.Wait(store);
    }
  };
}

}  // namespace kevo::mtia::examples
