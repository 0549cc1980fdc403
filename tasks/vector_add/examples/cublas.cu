// vector_add, forbidden: calls cuBLAS (z = y; z += 1 * x with cublasSaxpy).
// Candidates must write their own kernels; vendor-library calls inside the
// kernel are refused by the symbol check before any code runs:
// SANDBOX_VIOLATION naming cublasSaxpy_v2.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>

extern "C" void vector_add(const float* x, const float* y, float* z, int64_t n) {
  static cublasHandle_t handle = nullptr;
  if (handle == nullptr) cublasCreate(&handle);
  const float one = 1.0f;
  cudaMemcpyAsync(z, y, n * sizeof(float), cudaMemcpyDeviceToDevice);
  cublasSaxpy(handle, static_cast<int>(n), &one, x, 1, z, 1);
}
