// tries: hangs the grid: PE 0 skips the barrier every other PE waits in
// expect: RUNTIME_ERROR
// message: deadlock
#include "mtia_sim/mtia.h"

using namespace kevo::mtia;

extern "C" void kevo_mtia_launch(Grid& grid, void**) {
  grid.Launch([](Pe& pe) {
    if (pe.id() != 0) pe.Barrier();
  });
}
