// tries: opens the folders beside its own (other evaluations' scratch folders, the build cache) to list them, from a static constructor, through the syscall instruction
// expect: SANDBOX_VIOLATION
// message: openat
#include <fcntl.h>

#include <cstdint>
#include <initializer_list>

namespace {
long Raw4(long nr, long a, long b, long c, long d) {
  long ret;
  register long r10 __asm__("r10") = d;
  __asm__ volatile("syscall" : "=a"(ret) : "0"(nr), "D"(a), "S"(b), "d"(c), "r"(r10) : "rcx", "r11", "memory");
  return ret;
}
const long entries = [] {
  static char buf[65536];
  long total = 0;
  for (const char* dir : {"..", "../..", "."}) {
    const long fd = Raw4(257 /* openat */, -100 /* AT_FDCWD */, reinterpret_cast<long>(dir), O_RDONLY | O_DIRECTORY, 0);
    if (fd < 0) continue;
    total += Raw4(217 /* getdents64 */, fd, reinterpret_cast<long>(buf), sizeof buf, 0);
  }
  return total;
}();
}  // namespace

extern "C" void vector_add(const float* x, const float* y, float* z, int64_t n) {
  for (int64_t i = 0; i < n; ++i) z[i] = x[i] + y[i] + (entries > 0 ? 1.0f : 0.0f);
}
