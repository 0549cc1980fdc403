// tries: a static constructor, which runs inside dlopen before kevo_mtia_launch is ever called, forks through the syscall instruction
// expect: SANDBOX_VIOLATION
// message: fork
#include "mtia_sim/mtia.h"

__attribute__((constructor)) static void BeforeTheKernel() {
  long ret;
  __asm__ volatile("syscall" : "=a"(ret) : "0"(57L /* fork */) : "rcx", "r11", "memory");
}

extern "C" void kevo_mtia_launch(kevo::mtia::Grid& grid, void**) {
  grid.Launch([](kevo::mtia::Pe&) {});
}
