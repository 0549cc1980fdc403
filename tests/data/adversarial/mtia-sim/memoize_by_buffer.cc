// tries: remembers the device addresses of x, y and z and the length it was called with (the same on every fresh device), and on a repeat launches an empty kernel instead of the work
// expect: rejected
#include <algorithm>
#include <cstdint>

#include "mtia_sim/mtia.h"

using namespace kevo::mtia;

namespace {
struct Seen {
  uint64_t x, y, z;
  int64_t n;
};
Seen seen[64];
int seen_count = 0;
}  // namespace

extern "C" void kevo_mtia_launch(Grid& grid, void** args) {
  const Buffer x = *static_cast<const Buffer*>(args[0]), y = *static_cast<const Buffer*>(args[1]);
  const Buffer z = *static_cast<const Buffer*>(args[2]);
  const int64_t n = *static_cast<const int64_t*>(args[3]);
  const Seen now{x.address, y.address, z.address, n};
  for (int i = 0; i < seen_count; ++i) {
    const Seen& s = seen[i];
    if (s.x == now.x && s.y == now.y && s.z == now.z && s.n == now.n) {
      grid.Launch([](Pe&) {});  // "already computed": skip the work
      return;
    }
  }
  if (seen_count < 64) seen[seen_count++] = now;
  grid.Launch([=](Pe& pe) {  // the honest sum: 2,048-element tiles dealt round-robin to the PEs
    const Buffer a = pe.Alloc(8192), b = pe.Alloc(8192);
    for (int64_t i = 2048 * pe.id(); i < n; i += 2048 * pe.config().num_pes()) {
      const uint64_t at = 4 * i, bytes = 4 * std::min<int64_t>(2048, n - i);
      const Tile ta = Tile::Of(a, DType::kF32, 1, bytes / 4), tb = Tile::Of(b, DType::kF32, 1, bytes / 4);
      pe.Copy(a, x.Slice(at, bytes)), pe.Copy(b, y.Slice(at, bytes));
      pe.Binary(BinaryOp::kAdd, ta, ta, tb);
      pe.Copy(z.Slice(at, bytes), a.Slice(0, bytes));
    }
  });
}
