// tries: builds a DRAM Buffer by hand at an address of its choosing (just past z, and below every mapped tensor) and stores into it
// expect: RUNTIME_ERROR
// message: the simulated kernel failed
#include <cstdint>

#include "mtia_sim/mtia.h"

using namespace kevo::mtia;

extern "C" void kevo_mtia_launch(Grid& grid, void** args) {
  const Buffer z = *static_cast<const Buffer*>(args[2]);
  const Buffer past{Space::kDram, -1, (z.address + z.size + 31) / 32 * 32, 4096};
  const Buffer low{Space::kDram, -1, 0, 4096};
  grid.Launch([=](Pe& pe) {
    if (pe.id() != 0) return;
    const Buffer t = pe.Alloc(4096);
    pe.Fill(Tile::Of(t, DType::kF32, 1, 1024), 1.0f);
    pe.Copy(past, t);
    pe.Copy(low, t);
  });
}
