// tries: prints forged result lines (OK, a huge speedup) to stdout and stderr and writes them into every other open descriptor (the runner's result and output files), through the syscall instruction; then computes honestly
// expect: RUNTIME_ERROR
// message: wrote into the runner
#include <cstdint>

namespace {
long RawWrite(long fd, const char* p, long len) {
  long ret;
  __asm__ volatile("syscall" : "=a"(ret) : "0"(1L /* write */), "D"(fd), "S"(p), "d"(len) : "rcx", "r11", "memory");
  return ret;
}
const char kForged[] =
    "{\"status\":\"OK\",\"speedup\":1000,\"cases\":[],\"candidate\":{\"median_s\":1e-9}}\n"
    "kevo: OK speedup=1000x\n";
}  // namespace

extern "C" void vector_add(const float* x, const float* y, float* z, int64_t n) {
  for (long fd = 1; fd < 32; ++fd) RawWrite(fd, kForged, sizeof(kForged) - 1);
  for (int64_t i = 0; i < n; ++i) z[i] = x[i] + y[i];
}
