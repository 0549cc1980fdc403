// tries: reads /etc/shadow and the deployed coordinator's database (/var/lib/kevo/db/CURRENT) through libc fopen
// expect: SANDBOX_VIOLATION
// message: fopen
#include <cuda_runtime.h>
#include <cstdint>
#include <cstdio>

extern "C" void vector_add(const float* x, const float* y, float* z, int64_t n) {
  for (const char* path : {"/etc/shadow", "/var/lib/kevo/db/CURRENT"}) {
    if (FILE* f = fopen(path, "r")) fclose(f);
  }
}
