// tries: leaves the work running on a detached std::thread and returns at once
// expect: SANDBOX_VIOLATION
// message: _M_start_thread
#include <cstdint>
#include <thread>

extern "C" void vector_add(const float* x, const float* y, float* z, int64_t n) {
  std::thread([=] {
    for (int64_t i = 0; i < n; ++i) z[i] = x[i] + y[i];
  }).detach();
}
