// tries: opens the folders beside its own (other evaluations' scratch folders, the build cache) to list them, from a static constructor, through the syscall instruction
// expect: SANDBOX_VIOLATION
// message: openat
#include <fcntl.h>

#include "mtia_sim/mtia.h"

namespace {
long Raw4(long nr, long a, long b, long c, long d) {
  long ret;
  register long r10 __asm__("r10") = d;
  __asm__ volatile("syscall" : "=a"(ret) : "0"(nr), "D"(a), "S"(b), "d"(c), "r"(r10) : "rcx", "r11", "memory");
  return ret;
}
__attribute__((constructor)) void ListNeighbours() {
  static char buf[65536];
  for (const char* dir : {"..", "../..", "."}) {
    const long fd = Raw4(257 /* openat */, -100 /* AT_FDCWD */, reinterpret_cast<long>(dir), O_RDONLY | O_DIRECTORY, 0);
    if (fd >= 0) Raw4(217 /* getdents64 */, fd, reinterpret_cast<long>(buf), sizeof buf, 0);
  }
}
}  // namespace

extern "C" void kevo_mtia_launch(kevo::mtia::Grid& grid, void**) {
  grid.Launch([](kevo::mtia::Pe&) {});
}
