// tries: opens a TCP socket through libc from the host function
// expect: SANDBOX_VIOLATION
// message: socket
#include <cuda_runtime.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cstdint>

extern "C" void vector_add(const float* x, const float* y, float* z, int64_t n) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd >= 0) close(fd);
}
