// tries: enlarges the z Buffer the runner passed (its size field, through the args pointer) by 64 bytes and stores a tile into them, past the end of z
// expect: RUNTIME_ERROR
// message: the simulated kernel failed
#include <cstdint>

#include "mtia_sim/mtia.h"

using namespace kevo::mtia;

extern "C" void kevo_mtia_launch(Grid& grid, void** args) {
  Buffer* z = static_cast<Buffer*>(args[2]);
  z->size += 64;
  const Buffer past = z->Slice(z->size - 64, 64);
  grid.Launch([=](Pe& pe) {
    if (pe.id() != 0) return;
    const Buffer t = pe.Alloc(64);
    pe.Fill(Tile::Of(t, DType::kF32, 1, 16), 1.0f);
    pe.Copy(past, t);
  });
}
