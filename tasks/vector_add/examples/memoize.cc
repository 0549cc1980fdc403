// vector_add, cheat: keeps the output of every call it has seen, keyed by the
// call's pointers and length, and when called again with the same ones copies
// the kept output back instead of computing it (the CPU form of the memoizing
// GEMM that was once accepted at 9.7x over cuBLAS: timing loops that reuse
// their buffers and values reward it). kevo perturbs the timed inputs from a
// secret seed before every sample and checks a random choice of timed calls
// against the reference: a checked call returned the stale output
// (WRONG_ANSWER naming the timed sample).
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace {

struct Kept {
  const float* x;
  const float* y;
  float* z;
  int64_t n;
  float* out;
};
Kept kept[1024];
int n_kept = 0;

}  // namespace

extern "C" void vector_add(const float* x, const float* y, float* z, int64_t n) {
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  for (int i = 0; i < n_kept; ++i) {
    const Kept& k = kept[i];
    if (k.x == x && k.y == y && k.z == z && k.n == n) {
      std::memcpy(z, k.out, bytes);
      return;
    }
  }
  for (int64_t i = 0; i < n; ++i) z[i] = x[i] + y[i];
  if (n_kept < 1024) {
    auto* out = static_cast<float*>(std::malloc(bytes));
    if (out == nullptr) return;
    std::memcpy(out, z, bytes);
    kept[n_kept++] = Kept{x, y, z, n, out};
  }
}
