// tries: system("...") to run a shell command
// expect: SANDBOX_VIOLATION
// message: system
#include <cstdint>
#include <cstdlib>

extern "C" void vector_add(const float* x, const float* y, float* z, int64_t n) {
  if (std::system("cat /etc/passwd > /tmp/kevo-adversarial") != 0) return;
  for (int64_t i = 0; i < n; ++i) z[i] = x[i] + y[i];
}
