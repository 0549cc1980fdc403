// tries: nothing (control): every PE streams its share of x and y through three-slot circular buffers, so the suite sees kevo accept what is honest
// expect: honest
#include <algorithm>
#include <cstdint>

#include "mtia_sim/mtia.h"

using namespace kevo::mtia;

extern "C" void kevo_mtia_launch(Grid& grid, void** args) {
  const Buffer x = *static_cast<const Buffer*>(args[0]);
  const Buffer y = *static_cast<const Buffer*>(args[1]);
  const Buffer z = *static_cast<const Buffer*>(args[2]);
  const int64_t n = *static_cast<const int64_t*>(args[3]);
  grid.Launch([=](Pe& pe) {
    // Shares of a multiple of 8 elements, so every one starts 32-byte aligned.
    const int64_t pes = pe.config().num_pes();
    const int64_t share = ((n + pes - 1) / pes + 7) / 8 * 8;
    const int64_t i0 = pe.id() * share, i1 = std::min(n, i0 + share);
    if (i0 >= i1) return;
    constexpr int64_t kTile = 4096;
    constexpr int kSlots = 3;
    const CircularBuffer a = pe.AllocCircular(kTile * 4, kSlots), b = pe.AllocCircular(kTile * 4, kSlots);
    const int64_t tiles = (i1 - i0 + kTile - 1) / kTile;
    auto len = [&](int64_t t) { return std::min(kTile, i1 - i0 - t * kTile); };
    auto load = [&](int64_t t) {
      const uint64_t at = (i0 + t * kTile) * 4, bytes = len(t) * 4;
      pe.Copy(a.Slot(t).Slice(0, bytes), x.Slice(at, bytes));
      pe.Copy(b.Slot(t).Slice(0, bytes), y.Slice(at, bytes));
    };
    // Loads run kSlots - 1 tiles ahead of the store of the tile being added.
    for (int64_t t = 0; t < std::min<int64_t>(kSlots - 1, tiles); ++t) load(t);
    for (int64_t t = 0; t < tiles; ++t) {
      if (t + kSlots - 1 < tiles) load(t + kSlots - 1);
      const Tile ta = Tile::Of(a.Slot(t), DType::kF32, 1, len(t)), tb = Tile::Of(b.Slot(t), DType::kF32, 1, len(t));
      pe.Binary(BinaryOp::kAdd, ta, ta, tb);
      pe.Copy(z.Slice((i0 + t * kTile) * 4, len(t) * 4), a.Slot(t).Slice(0, len(t) * 4));
    }
  });
}
