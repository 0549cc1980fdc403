// tries: reads /etc/shadow and the deployed coordinator's database (/var/lib/kevo/db/CURRENT) through libc fopen
// expect: SANDBOX_VIOLATION
// message: fopen
#include <cstdio>

#include "mtia_sim/mtia.h"

extern "C" void kevo_mtia_launch(kevo::mtia::Grid& grid, void**) {
  for (const char* path : {"/etc/shadow", "/var/lib/kevo/db/CURRENT"}) {
    if (std::FILE* f = std::fopen(path, "r")) std::fclose(f);
  }
  grid.Launch([](kevo::mtia::Pe&) {});
}
