// tries: opens a TCP connection to 127.0.0.1:80 through the syscall instruction from inside a PE's kernel, importing no symbol
// expect: SANDBOX_VIOLATION
// message: socket
#include "mtia_sim/mtia.h"

using namespace kevo::mtia;

namespace {
long RawSyscall3(long nr, long a, long b, long c) {
  long ret;
  __asm__ volatile("syscall" : "=a"(ret) : "0"(nr), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
  return ret;
}
}  // namespace

extern "C" void kevo_mtia_launch(Grid& grid, void**) {
  grid.Launch([](Pe& pe) {
    if (pe.id() != 0) return;
    unsigned char addr[16] = {2, 0, 0, 80, 127, 0, 0, 1};  // sockaddr_in 127.0.0.1:80
    const long fd = RawSyscall3(41 /* socket */, 2 /* AF_INET */, 1 /* SOCK_STREAM */, 0);
    RawSyscall3(42 /* connect */, fd, reinterpret_cast<long>(addr), sizeof addr);
  });
}
