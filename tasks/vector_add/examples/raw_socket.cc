// Bad candidate (kevo's own tests): opens a TCP socket to 127.0.0.1 through the
// `syscall` instruction, importing no symbol; the runner's seccomp filter
// stops it -> SANDBOX_VIOLATION ("socket").
#include <cstdint>

static long RawSyscall3(long nr, long a, long b, long c) {
  long ret;
  __asm__ volatile("syscall" : "=a"(ret) : "0"(nr), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
  return ret;
}

extern "C" void vector_add(const float* x, const float* y, float* z, int64_t n) {
  // struct sockaddr_in for 127.0.0.1:80, built by hand.
  unsigned char addr[16] = {2, 0, 0, 80, 127, 0, 0, 1};
  long fd = RawSyscall3(41, /*AF_INET=*/2, /*SOCK_STREAM=*/1, 0);   // __NR_socket
  RawSyscall3(42, fd, reinterpret_cast<long>(addr), sizeof(addr));  // __NR_connect
  for (int64_t i = 0; i < n; ++i) z[i] = x[i] + y[i];
}
