// cuda_gemm_bf16: one matmul_bf16 candidate (a .so exporting the task's
// extern "C" matmul_bf16 over device pointers, as the nvidia worker builds
// it) checked and timed against cuBLAS on the GPU host, without kevo.
//
//   cuda_gemm_bf16 CANDIDATE.so LABEL [SAMPLES]
//
// 1. Correctness: the task's validation shapes and two larger partial-tile
//    shapes against the task's C++ reference (tasks/matmul_bf16/reference.cc),
//    then 4096^3 against cuBLAS;
//    fresh uniform(-1, 1) inputs for each shape, the output NaN-poisoned
//    before the call, the task's tolerance (|got - want| <= 1e-2 + 1e-2 |want|).
// 2. Timing at 4096^3, as the worker's runner times a sample: L2 flushed by
//    reading a buffer twice its size, start event queued behind the flush,
//    the call, end event; candidate and cuBLAS samples interleaved; medians.
// Prints one line "RESULT label=... correct=0|1 ..." last. Exits 0 when the
// run finished (correct or not), 1 on a CUDA or setup error, 3 when a call
// of the candidate had not finished after 10 s (a deadlocked kernel).
// Build (from this folder of the repository, which the reference is found
// from): nvcc -O2 -arch=sm_90 --cudart shared cuda_gemm_bf16.cu -lcublas -ldl
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

// The task's own reference (the i-j-k loop, float32 accumulation) and its
// bf16 conversions, Bf16ToFloat and FloatToBf16; renamed so that only the
// candidate's library defines matmul_bf16.
#define matmul_bf16 ReferenceMatmulBf16
#include "../../tasks/matmul_bf16/reference.cc"
#undef matmul_bf16

namespace {

using GemmFn = void (*)(const uint16_t*, const uint16_t*, uint16_t*, int64_t, int64_t, int64_t);

#define CHECK_CUDA(x)                                                                            \
  do {                                                                                           \
    cudaError_t e_ = (x);                                                                        \
    if (e_ != cudaSuccess) {                                                                     \
      std::printf("CUDA error %s at %s:%d: %s\n", cudaGetErrorName(e_), __FILE__, __LINE__, #x); \
      std::exit(1);                                                                              \
    }                                                                                            \
  } while (0)

std::vector<uint16_t> Random(size_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = FloatToBf16(d(rng));
  return v;
}

struct Device {
  uint16_t *a = nullptr, *b = nullptr, *c = nullptr;
};

Device Upload(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b, size_t c_elems) {
  Device d;
  CHECK_CUDA(cudaMalloc(&d.a, std::max<size_t>(a.size(), 1) * 2));
  CHECK_CUDA(cudaMalloc(&d.b, std::max<size_t>(b.size(), 1) * 2));
  CHECK_CUDA(cudaMalloc(&d.c, std::max<size_t>(c_elems, 1) * 2));
  CHECK_CUDA(cudaMemcpy(d.a, a.data(), a.size() * 2, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(d.b, b.data(), b.size() * 2, cudaMemcpyHostToDevice));
  return d;
}

// Waits for the device's work, at most 10 s: a kernel still running then is
// taken for a deadlock (the run ends with exit code 3, the process tearing
// the context down).
void SyncOrHang(const char* what) {
  cudaEvent_t e;
  CHECK_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  CHECK_CUDA(cudaEventRecord(e));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  cudaError_t q;
  while ((q = cudaEventQuery(e)) == cudaErrorNotReady) {
    if (std::chrono::steady_clock::now() > deadline) {
      std::printf("HANG: %s still running after 10 s\n", what);
      std::fflush(stdout);
      std::_Exit(3);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  CHECK_CUDA(q);
  CHECK_CUDA(cudaEventDestroy(e));
  CHECK_CUDA(cudaDeviceSynchronize());
}

void Free(Device& d) {
  cudaFree(d.a);
  cudaFree(d.b);
  cudaFree(d.c);
}

// Counts elements outside the tolerance (NaN included); prints the first few.
int64_t Compare(const std::vector<uint16_t>& got, const std::vector<float>& want, int64_t n_cols, const char* what) {
  int64_t bad = 0;
  double max_err = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const float g = Bf16ToFloat(got[i]), w = want[i];
    const float err = std::fabs(g - w);
    if (!(err <= 1e-2f + 1e-2f * std::fabs(w))) {
      if (bad < 5) {
        std::printf("  %s: C[%lld][%lld] = %g, want %g\n", what, static_cast<long long>(i / n_cols),
                    static_cast<long long>(i % n_cols), g, w);
      }
      ++bad;
    }
    if (err == err) max_err = std::max<double>(max_err, err);
  }
  std::printf("  %s: %lld of %zu outside tolerance, max |err| %.3g\n", what, static_cast<long long>(bad), got.size(),
              max_err);
  return bad;
}

bool CheckSmall(GemmFn fn, int64_t m, int64_t n, int64_t k, std::mt19937_64& rng) {
  const std::vector<uint16_t> a = Random(m * k, rng), b = Random(k * n, rng);
  Device d = Upload(a, b, m * n);
  CHECK_CUDA(cudaMemset(d.c, 0xff, m * n * 2));  // NaN
  fn(d.a, d.b, d.c, m, n, k);
  CHECK_CUDA(cudaGetLastError());
  SyncOrHang("the candidate");
  std::vector<uint16_t> got(m * n);
  CHECK_CUDA(cudaMemcpy(got.data(), d.c, got.size() * 2, cudaMemcpyDeviceToHost));
  Free(d);
  std::vector<uint16_t> want16(m * n);
  ReferenceMatmulBf16(a.data(), b.data(), want16.data(), m, n, k);
  std::vector<float> want(m * n);
  for (size_t i = 0; i < want.size(); ++i) want[i] = Bf16ToFloat(want16[i]);
  char what[64];
  std::snprintf(what, sizeof what, "%lldx%lldx%lld", static_cast<long long>(m), static_cast<long long>(n),
                static_cast<long long>(k));
  return Compare(got, want, n, what) == 0;
}

// Row-major C = A B through column-major cuBLAS: C^T = B^T A^T.
void Cublas(cublasHandle_t h, const Device& d, int64_t m, int64_t n, int64_t k) {
  const float one = 1, zero = 0;
  if (cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, d.b, CUDA_R_16BF, n, d.a, CUDA_R_16BF, k, &zero, d.c,
                   CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS) {
    std::printf("cublasGemmEx failed\n");
    std::exit(1);
  }
}

__global__ void ReadFlush(const int4* p, size_t n, int* sink) {
  int acc = 0;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const int4 v = p[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x7fffffff) *sink = acc;  // keeps the loads
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::printf("usage: %s CANDIDATE.so LABEL [SAMPLES]\n", argv[0]);
    return 1;
  }
  const std::string label = argv[2];
  const int samples = argc > 3 ? std::atoi(argv[3]) : 50;
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    std::printf("dlopen %s: %s\n", argv[1], dlerror());
    return 1;
  }
  const auto fn = reinterpret_cast<GemmFn>(dlsym(lib, "matmul_bf16"));
  if (fn == nullptr) {
    std::printf("%s defines no matmul_bf16\n", argv[1]);
    return 1;
  }
  std::printf("== %s (%s)\n", label.c_str(), argv[1]);
  std::mt19937_64 rng(20261130);
  bool correct = true;
  // The task's validation shapes, then partial tiles in every dimension at larger sizes.
  const int64_t shapes[][3] = {{128, 128, 128}, {200, 136, 328},  {33, 65, 47},
                               {1, 264, 512},   {520, 392, 1000}, {300, 1032, 136}};
  for (const auto& s : shapes) correct &= CheckSmall(fn, s[0], s[1], s[2], rng);

  const int64_t m = 4096, n = 4096, k = 4096;
  const std::vector<uint16_t> a = Random(m * k, rng), b = Random(k * n, rng);
  Device cand = Upload(a, b, m * n), ref = Upload(a, b, m * n);
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) {
    std::printf("cublasCreate failed\n");
    return 1;
  }
  CHECK_CUDA(cudaMemset(cand.c, 0xff, m * n * 2));
  fn(cand.a, cand.b, cand.c, m, n, k);
  CHECK_CUDA(cudaGetLastError());
  SyncOrHang("the candidate at 4096^3");
  Cublas(h, ref, m, n, k);
  CHECK_CUDA(cudaDeviceSynchronize());
  {
    std::vector<uint16_t> got(m * n), want16(m * n);
    CHECK_CUDA(cudaMemcpy(got.data(), cand.c, got.size() * 2, cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(want16.data(), ref.c, want16.size() * 2, cudaMemcpyDeviceToHost));
    std::vector<float> want(m * n);
    for (size_t i = 0; i < want.size(); ++i) want[i] = Bf16ToFloat(want16[i]);
    correct &= Compare(got, want, n, "4096^3 vs cuBLAS") == 0;
  }

  int dev = 0, l2 = 0;
  CHECK_CUDA(cudaGetDevice(&dev));
  CHECK_CUDA(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
  const size_t flush_n = 2 * static_cast<size_t>(l2) / sizeof(int4);
  int4* flush = nullptr;
  int* sink = nullptr;
  CHECK_CUDA(cudaMalloc(&flush, flush_n * sizeof(int4)));
  CHECK_CUDA(cudaMemset(flush, 1, flush_n * sizeof(int4)));
  CHECK_CUDA(cudaMalloc(&sink, sizeof(int)));
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  auto sample = [&](bool candidate) {
    ReadFlush<<<1024, 256>>>(flush, flush_n, sink);
    CHECK_CUDA(cudaEventRecord(start));
    if (candidate) {
      fn(cand.a, cand.b, cand.c, m, n, k);
    } else {
      Cublas(h, ref, m, n, k);
    }
    CHECK_CUDA(cudaEventRecord(stop));
    CHECK_CUDA(cudaEventSynchronize(stop));
    CHECK_CUDA(cudaGetLastError());
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
    return 1e3 * ms;
  };
  for (int i = 0; i < 5; ++i) {
    sample(true);
    sample(false);
  }
  std::vector<double> tc, tb;
  for (int i = 0; i < samples; ++i) {
    tc.push_back(sample(true));
    tb.push_back(sample(false));
  }
  const double flops = 2.0 * m * n * k;
  const double c_us = Median(tc), b_us = Median(tb);
  std::printf(
      "RESULT label=%s correct=%d cand_us=%.1f cand_tflops=%.0f cublas_us=%.1f cublas_tflops=%.0f ratio=%.3f "
      "cand_min_us=%.1f cublas_min_us=%.1f\n",
      label.c_str(), correct ? 1 : 0, c_us, flops / c_us * 1e-6, b_us, flops / b_us * 1e-6, b_us / c_us,
      *std::min_element(tc.begin(), tc.end()), *std::min_element(tb.begin(), tb.end()));
  cublasDestroy(h);
  return 0;
}
