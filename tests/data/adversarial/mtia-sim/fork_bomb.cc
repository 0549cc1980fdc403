// tries: calls libc fork() a million times from the launch function
// expect: SANDBOX_VIOLATION
// message: fork
#include <unistd.h>

#include "mtia_sim/mtia.h"

extern "C" void kevo_mtia_launch(kevo::mtia::Grid&, void**) {
  for (int i = 0; i < 1000000; ++i) fork();
}
