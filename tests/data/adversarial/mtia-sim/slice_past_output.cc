// tries: stores one 32-byte granule at z.Slice(n * 4, 32), just past the end of its output z
// expect: RUNTIME_ERROR
// message: the simulated kernel failed
#include <cstdint>

#include "mtia_sim/mtia.h"

using namespace kevo::mtia;

extern "C" void kevo_mtia_launch(Grid& grid, void** args) {
  const Buffer z = *static_cast<const Buffer*>(args[2]);
  const int64_t n = *static_cast<const int64_t*>(args[3]);
  grid.Launch([=](Pe& pe) {
    if (pe.id() != 0) return;
    const Buffer t = pe.Alloc(32);
    pe.Fill(Tile::Of(t, DType::kF32, 1, 8), 1.0f);
    pe.Copy(z.Slice(n * 4, 32), t);
  });
}
