// HIP sources shared by the amd tests.
#pragma once

#include <string>

#include "absl/strings/str_cat.h"

namespace kevo::worker {

// One wavefront per element block; `body` is the kernel's statement list
// over x, y, n, i; `attributes` go before the kernel's name.
inline std::string VectorKernel(const std::string& attributes, const std::string& body) {
  return absl::StrCat(R"(#include <hip/hip_runtime.h>
#include <cstdint>
__global__ )",
                      attributes, R"( void K(const float* a, const float* b, float* c, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
)",
                      body, R"(
}
extern "C" void vector_add(const float* a, const float* b, float* c, int64_t n) {
  hipLaunchKernelGGL(K, dim3((n + 255) / 256), dim3(256), 0, 0, a, b, c, n);
}
)");
}

}  // namespace kevo::worker
