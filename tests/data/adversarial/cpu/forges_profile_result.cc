// tries: at the timed size only (validation passes first), writes a forged profile (a 1 ns candidate) into every open descriptor, the runner's result and output files among them, through the syscall instruction; then computes honestly
// expect: RUNTIME_ERROR
// message: the candidate ended the process (exit?) or wrote into the runner's files
#include <cstdint>

namespace {
long RawWrite(long fd, const char* p, long len) {
  long ret;
  __asm__ volatile("syscall" : "=a"(ret) : "0"(1L /* write */), "D"(fd), "S"(p), "d"(len) : "rcx", "r11", "memory");
  return ret;
}
const char kForged[] = "{\"candidate\":{\"median_s\":1e-9,\"samples_s\":[1e-9]},\"baseline\":{\"median_s\":1}}";
bool forged = false;
}  // namespace

extern "C" void vector_add(const float* x, const float* y, float* z, int64_t n) {
  if (n == 16777216 && !forged) {
    forged = true;
    for (long fd = 3; fd < 32; ++fd) RawWrite(fd, kForged, sizeof(kForged) - 1);
  }
  for (int64_t i = 0; i < n; ++i) z[i] = x[i] + y[i];
}
