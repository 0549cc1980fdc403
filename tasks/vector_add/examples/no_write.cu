// vector_add, cheat: writes nothing and returns, counting on the output
// memory still holding an answer from an earlier call: the reference's
// (harnesses that time the reference first and reuse its output buffer hand
// it the reference's result) or its own. The native-format analogue of
// "return the reference's output tensor". kevo gives every call fresh or
// re-poisoned output buffers (NaN bytes) and the baseline buffers of its
// own, so the validation finds NaN: NONFINITE.
#include <cuda_runtime.h>

#include <cstdint>

extern "C" void vector_add(const float* x, const float* y, float* z, int64_t n) {
  (void)x;
  (void)y;
  (void)z;
  (void)n;
}
