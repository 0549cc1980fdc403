// tries: does the work on one PE, then writes the time it reports: a const_cast of grid.stats() sets its seconds and cycles to 140% of the DRAM roofline, just under what the speed-of-light check allows
// expect: rejected
// message: rewrote the simulator's run statistics
#include <algorithm>
#include <cstdint>

#include "mtia_sim/mtia.h"

using namespace kevo::mtia;

extern "C" void kevo_mtia_launch(Grid& grid, void** args) {
  const Buffer x = *static_cast<const Buffer*>(args[0]), y = *static_cast<const Buffer*>(args[1]);
  const Buffer z = *static_cast<const Buffer*>(args[2]);
  const int64_t n = *static_cast<const int64_t*>(args[3]);
  grid.Launch([=](Pe& pe) {
    if (pe.id() != 0) return;
    const Buffer a = pe.Alloc(32768), b = pe.Alloc(32768);
    for (int64_t i = 0; i < n; i += 8192) {
      const uint64_t bytes = 4 * std::min<int64_t>(8192, n - i);
      pe.Copy(a, x.Slice(4 * i, bytes)), pe.Copy(b, y.Slice(4 * i, bytes));
      pe.Binary(BinaryOp::kAdd, Tile::Of(a, DType::kF32, 1, bytes / 4), Tile::Of(a, DType::kF32, 1, bytes / 4),
                Tile::Of(b, DType::kF32, 1, bytes / 4));
      pe.Copy(z.Slice(4 * i, bytes), a.Slice(0, bytes));
    }
  });
  const Config& chip = grid.config();
  const RunStats& stats = grid.stats();
  RunStats& forged = const_cast<RunStats&>(stats);
  forged.seconds = 12.0 * n / (chip.dram_bytes_per_cycle * chip.clock_hz) / 1.4;
  forged.cycles = static_cast<uint64_t>(forged.seconds * chip.clock_hz);
}
