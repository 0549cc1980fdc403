// tries: does the work on one PE, then raises the simulated chip's clock from inside a kernel (a const_cast of pe.config()) so that the cycles it spent come to 140% of the DRAM roofline, just under what the speed-of-light check allows
// expect: rejected
// message: changed the simulated chip's configuration
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
    const Buffer a = pe.Alloc(16384), b = pe.Alloc(16384);
    for (int64_t i = 0; i < n; i += 4096) {
      const int64_t m = std::min<int64_t>(4096, n - i);
      const Tile ta = Tile::Of(a, DType::kF32, 1, m);
      pe.Copy(a, x.Slice(4 * i, 4 * m)), pe.Copy(b, y.Slice(4 * i, 4 * m));
      pe.Binary(BinaryOp::kAdd, ta, ta, Tile::Of(b, DType::kF32, 1, m));
      pe.Copy(z.Slice(4 * i, 4 * m), a.Slice(0, 4 * m));
    }
  });
  // The second (empty) launch adds its overhead; the totals are then
  // recomputed at whatever clock the configuration holds.
  const double cycles = static_cast<double>(grid.stats().cycles + grid.config().launch_cycles);
  const double target_s = 12.0 * n / (grid.config().dram_bytes_per_cycle * grid.config().clock_hz) / 1.4;
  grid.Launch([=](Pe& pe) {
    const Config& chip = pe.config();
    if (pe.id() == 0) const_cast<Config&>(chip).clock_hz = cycles / target_s;
  });
}
