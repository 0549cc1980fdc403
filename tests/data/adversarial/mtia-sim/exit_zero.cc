// tries: exit(0) through libc at its first call, before any result is written
// expect: SANDBOX_VIOLATION
// message: exit
#include <cstdlib>

#include "mtia_sim/mtia.h"

extern "C" void kevo_mtia_launch(kevo::mtia::Grid&, void**) { std::exit(0); }
