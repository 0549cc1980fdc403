// tries: a kernel that never returns: PE 0 spins on its fiber without issuing a command, so the simulator never reaches the next PE
// expect: RUN_TIMEOUT
#include <atomic>

#include "mtia_sim/mtia.h"

using namespace kevo::mtia;

extern "C" void kevo_mtia_launch(Grid& grid, void**) {
  grid.Launch([](Pe&) {
    std::atomic<int> spin{0};
    while (spin.load(std::memory_order_relaxed) >= 0) spin.fetch_add(0, std::memory_order_relaxed);
  });
}
