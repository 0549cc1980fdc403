// tries: defines clock_gettime, gettimeofday, time and the vDSO's __vdso_clock_gettime returning a frozen clock, hoping the timer resolves to them; does the honest work
// expect: no gain
#include <sys/time.h>

#include <cstdint>
#include <ctime>

extern "C" {
int clock_gettime(clockid_t, struct timespec* ts) {
  ts->tv_sec = 1;
  ts->tv_nsec = 0;
  return 0;
}
int __vdso_clock_gettime(clockid_t c, struct timespec* ts) { return clock_gettime(c, ts); }
int gettimeofday(struct timeval* tv, void*) {
  tv->tv_sec = 1;
  tv->tv_usec = 0;
  return 0;
}
time_t time(time_t* t) {
  if (t != nullptr) *t = 1;
  return 1;
}

void vector_add(const float* __restrict x, const float* __restrict y, float* __restrict z, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) z[i] = x[i] + y[i];
}
}
