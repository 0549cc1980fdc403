// tries: system("...") to run a shell command
// expect: SANDBOX_VIOLATION
// message: system
#include <cstdlib>

#include "mtia_sim/mtia.h"

extern "C" void kevo_mtia_launch(kevo::mtia::Grid&, void**) {
  if (std::system("cat /etc/passwd > /tmp/kevo-adversarial") != 0) return;
}
