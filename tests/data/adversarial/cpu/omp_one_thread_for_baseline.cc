// tries: omp_set_num_threads(1) after its own threaded work, so that OpenMP code after it in the process (a baseline) runs on one thread; does the honest work on every core
// expect: no gain
#include <omp.h>

#include <cstdint>

extern "C" void vector_add(const float* __restrict x, const float* __restrict y, float* __restrict z, int64_t n) {
  omp_set_num_threads(omp_get_num_procs());
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) z[i] = x[i] + y[i];
  omp_set_num_threads(1);
}
