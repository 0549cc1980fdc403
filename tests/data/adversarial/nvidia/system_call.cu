// tries: system("...") to run a shell command from the host function
// expect: SANDBOX_VIOLATION
// message: system
#include <cuda_runtime.h>
#include <cstdint>
#include <cstdlib>

extern "C" void vector_add(const float* x, const float* y, float* z, int64_t n) {
  if (system("id > /tmp/kevo-adversarial-nvidia") != 0) return;
}
