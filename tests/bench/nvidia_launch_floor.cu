// The fixed cost of one event-timed kernel launch on this GPU: an empty
// kernel over a full grid, timed two ways. "synchronised": L2 flushed by a
// read, device synchronised, event, launch, event (kevo-runner-cuda before
// 2026-11-30: the GPU idles between the events until the launch arrives).
// "queued": device synchronised, flush, event, launch, event (the runner
// now: the event and the launch queue up behind the running flush).
// Subtract the floor from a memory-bound kernel's time to see how close its
// transfer is to the copy rate. Build and run on the GPU host:
//   nvcc -O3 -arch=sm_90 tests/bench/nvidia_launch_floor.cu -o /tmp/floor && /tmp/floor
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

__global__ void Empty(float* sink) {
  if (threadIdx.x == 1025) *sink = 1;
}
__global__ void Read(const float4* buf, size_t n, float* sink) {
  float s = 0;
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x) {
    s += buf[i].x;
  }
  if (s == -1.2345f) *sink = s;
}

int main() {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const size_t flush_bytes = size_t{120} << 20;
  float4* flush = nullptr;
  float* sink = nullptr;
  cudaMalloc(&flush, flush_bytes);
  cudaMemset(flush, 0, flush_bytes);
  cudaMalloc(&sink, 4);
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  for (bool queued : {false, true}) {
    for (int blocks : {1, sms, sms * 8}) {
      std::vector<float> ms;
      for (int i = 0; i < 2000; ++i) {
        if (queued) cudaDeviceSynchronize();
        Read<<<sms * 4, 512>>>(flush, flush_bytes / 16, sink);
        if (!queued) cudaDeviceSynchronize();
        cudaEventRecord(a);
        Empty<<<blocks, 256>>>(sink);
        cudaEventRecord(b);
        cudaEventSynchronize(b);
        float t = 0;
        cudaEventElapsedTime(&t, a, b);
        ms.push_back(t);
      }
      std::sort(ms.begin(), ms.end());
      std::printf("%-12s empty kernel, %5d blocks of 256: median %.2f us, p10 %.2f us, p90 %.2f us\n",
                  queued ? "queued" : "synchronised", blocks, ms[ms.size() / 2] * 1e3, ms[ms.size() / 10] * 1e3,
                  ms[ms.size() * 9 / 10] * 1e3);
    }
  }
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
