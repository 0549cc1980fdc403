// Bad candidate (kevo's own tests): opens a TCP connection to 127.0.0.1:80
// through libc -> SANDBOX_VIOLATION ("socket").
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

extern "C" void vector_add(const float* x, const float* y, float* z, int64_t n) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr;
  std::memset(&addr, 0, sizeof(addr));
  addr.sin_family = AF_INET;
  addr.sin_port = htons(80);
  addr.sin_addr.s_addr = htonl(0x7f000001);
  connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  close(fd);
  for (int64_t i = 0; i < n; ++i) z[i] = x[i] + y[i];
}
