// vector_add, cheat: launches its kernel on a stream of its own that does not
// synchronise with the default stream (cudaStreamNonBlocking) and returns at
// once, so a harness that records its stop event on the default stream, or
// reads the outputs with a plain copy, would see a kernel that takes no time
// (or NaN outputs). kevo synchronises the whole device after every call and
// times such samples on the host clock up to that synchronisation: the
// candidate passes, with its real time (profile counter escaped_samples > 0).
#include <cuda_runtime.h>

#include <cstdint>

namespace {

__global__ void Add(const float* x, const float* y, float* z, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    z[i] = x[i] + y[i];
  }
}

}  // namespace

extern "C" void vector_add(const float* x, const float* y, float* z, int64_t n) {
  static cudaStream_t side = nullptr;
  if (side == nullptr) cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);
  const int64_t blocks = (n + 255) / 256 < 4096 ? (n + 255) / 256 : 4096;
  if (n > 0) Add<<<static_cast<unsigned>(blocks), 256, 0, side>>>(x, y, z, n);
}
