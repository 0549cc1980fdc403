#include "worker/runner/cuda/device_kernels.h"

#include <vector>

namespace kevo::runner::cuda {
namespace {

__global__ void FillKernel(int* out, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    out[i] = i * 3 + 1;
  }
}

__global__ void ReadKernel(const float4* __restrict__ buf, size_t n, float* sink) {
  float s = 0;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const float4 v = buf[i];
    s += (v.x + v.y) + (v.z + v.w);
  }
  if (s == -1.2345f) *sink = s;
}

// 8 independent FMA chains per thread keep the pipes full; the result is
// stored only when impossible, so the compiler cannot drop the loop.
__global__ void FmaKernel(float* sink, int iters, float seed) {
  float a[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) a[j] = seed + threadIdx.x * 1e-7f + j;
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int j = 0; j < 8; ++j) a[j] = fmaf(a[j], 0.9999999f, 1e-7f);
  }
  float s = 0;
#pragma unroll
  for (int j = 0; j < 8; ++j) s += a[j];
  if (s == -1.2345f) sink[threadIdx.x] = s;
}

}  // namespace

cudaError_t HealthCheck(int n) {
  int* d = nullptr;
  cudaError_t e = cudaMalloc(&d, sizeof(int) * n);
  if (e != cudaSuccess) return e;
  FillKernel<<<(n + 255) / 256, 256>>>(d, n);
  e = cudaGetLastError();
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  std::vector<int> h(n);
  if (e == cudaSuccess) e = cudaMemcpy(h.data(), d, sizeof(int) * n, cudaMemcpyDeviceToHost);
  cudaFree(d);
  if (e != cudaSuccess) return e;
  for (int i = 0; i < n; ++i) {
    if (h[i] != i * 3 + 1) return cudaErrorUnknown;
  }
  return cudaSuccess;
}

cudaError_t ReadToFlushL2(const void* buf, size_t bytes, float* sink) {
  int dev = 0, sms = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  ReadKernel<<<sms * 4, 512>>>(static_cast<const float4*>(buf), bytes / 16, sink);
  return cudaGetLastError();
}

cudaError_t MeasureFp32Peak(double* gflops) {
  int dev = 0, sms = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  float* sink = nullptr;
  cudaError_t e = cudaMalloc(&sink, 1024 * sizeof(float));
  if (e != cudaSuccess) return e;
  const int blocks = sms * 8, threads = 256, iters = 4096;
  FmaKernel<<<blocks, threads>>>(sink, 16, 1.0f);  // warm-up
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  float best_ms = 1e30f;
  for (int rep = 0; rep < 5 && e == cudaSuccess; ++rep) {
    cudaEventRecord(start);
    FmaKernel<<<blocks, threads>>>(sink, iters, 1.0f + rep);
    cudaEventRecord(stop);
    e = cudaGetLastError();
    if (e == cudaSuccess) e = cudaEventSynchronize(stop);
    float ms = 0;
    if (e == cudaSuccess) cudaEventElapsedTime(&ms, start, stop);
    if (ms > 0 && ms < best_ms) best_ms = ms;
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaFree(sink);
  if (e != cudaSuccess) return e;
  const double flops = 2.0 * 8 * iters * static_cast<double>(blocks) * threads;
  *gflops = flops / (best_ms * 1e-3) / 1e9;
  return cudaSuccess;
}

}  // namespace kevo::runner::cuda
