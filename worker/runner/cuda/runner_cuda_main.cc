// kevo-runner-cuda: the GPU runner of the nvidia platform. Its modes (probe,
// health, run, profile), buffers, guards, timing and fault handling are the
// shared core's (worker/runner/device/device_runner.h); this file is what is
// CUDA's own: the runtime calls (runtime_shim.h), the properties the probe
// reports, the runner's kernels (device_kernels.cu) and the cuBLAS baseline
// of gemm tasks (--baseline=cublas).
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include <nlohmann/json.hpp>

#include "kevo/v1/task.pb.h"
#include "worker/runner/cuda/device_kernels.h"
#include "worker/runner/device/device_runner.h"
#include "worker/runner/device/runtime_shim.h"
#include "worker/runner/protocol.h"

namespace kevo::runner {
namespace {

using device::Kernel;

// cuBLAS is loaded at run time: the runner works (without a cuBLAS baseline)
// where it is missing, and whatever cuBLAS the host's CUDA has is used.
struct Cublas {
  decltype(&cublasCreate_v2) create = nullptr;
  // cublas_api.h overloads cublasGemmEx for C++; this is the C symbol's type.
  using GemmExFn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                                      const void*, cudaDataType, int, const void*, cudaDataType, int, const void*,
                                      void*, cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
  GemmExFn gemm_ex = nullptr;
  cublasHandle_t handle = nullptr;
};

Cublas LoadCublas() {
  void* lib = nullptr;
  std::string tried;
  for (const char* name :
       {"libcublas.so.13", "libcublas.so.12", "libcublas.so", "/usr/local/cuda/lib64/libcublas.so.13",
        "/usr/local/cuda/lib64/libcublas.so.12", "/usr/local/cuda/lib64/libcublas.so"}) {
    lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (lib != nullptr) break;
    const char* err = dlerror();
    absl::StrAppend(&tried, err ? err : name, "; ");
  }
  if (lib == nullptr) Fail(kExitInfra, "error", absl::StrCat("cannot load cuBLAS: ", tried));
  Cublas c;
  c.create = reinterpret_cast<decltype(c.create)>(dlsym(lib, "cublasCreate_v2"));
  c.gemm_ex = reinterpret_cast<decltype(c.gemm_ex)>(dlsym(lib, "cublasGemmEx"));
  if (c.create == nullptr || c.gemm_ex == nullptr) {
    Fail(kExitInfra, "error", "cuBLAS lacks cublasCreate_v2 or cublasGemmEx");
  }
  if (c.create(&c.handle) != CUBLAS_STATUS_SUCCESS) Fail(kExitInfra, "error", "cublasCreate failed");
  return c;
}

// The production baseline of a task whose hints say pattern=gemm:
// row-major C[m,n] = A[m,k] * B[k,n] through cublasGemmEx, computed in FP32
// (no TF32), as C^T = B^T * A^T in cuBLAS's column-major terms.
Kernel CublasGemmBaseline(const v1::Task& task, const std::vector<Param>& params) {
  auto hint = [&](const char* key) -> std::string {
    auto it = task.hints().find(key);
    if (it == task.hints().end()) Fail(kExitInfra, "error", absl::StrCat("gemm baseline: no hint '", key, "'"));
    return it->second;
  };
  auto index = [&](const std::string& name) -> size_t {
    for (size_t i = 0; i < params.size(); ++i) {
      if (params[i].name == name) return i;
    }
    Fail(kExitInfra, "error", absl::StrCat("gemm baseline: no parameter '", name, "'"));
  };
  const size_t a = index(hint("a")), b = index(hint("b")), c = index(hint("c"));
  const size_t m = index(hint("m")), n = index(hint("n")), k = index(hint("k"));
  cudaDataType type = CUDA_R_32F;
  switch (params[a].spec->dtype()) {
    case v1::F32:
      type = CUDA_R_32F;
      break;
    case v1::F16:
      type = CUDA_R_16F;
      break;
    case v1::BF16:
      type = CUDA_R_16BF;
      break;
    default:
      Fail(kExitInfra, "error", "gemm baseline: only f32, f16 and bf16 are supported");
  }
  auto blas = std::make_shared<Cublas>(LoadCublas());
  return [=](void** args) {
    const int M = static_cast<int>(*static_cast<int64_t*>(args[m]));
    const int N = static_cast<int>(*static_cast<int64_t*>(args[n]));
    const int K = static_cast<int>(*static_cast<int64_t*>(args[k]));
    const float alpha = 1.0f, beta = 0.0f;
    cublasStatus_t s = blas->gemm_ex(blas->handle, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &alpha, args[b], type, N, args[a],
                                     type, K, &beta, args[c], type, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (s != CUBLAS_STATUS_SUCCESS) {
      Fail(kExitInfra, "error", absl::StrCat("cublasGemmEx failed with status ", static_cast<int>(s)));
    }
  };
}

class CudaRuntime final : public device::Runtime {
 public:
  KEVO_DEVICE_RUNTIME_CALLS(cuda)
  const char* RunnerName() const override { return "kevo-runner-cuda"; }
  const char* Name() const override { return "CUDA"; }
  const char* ApiPrefix() const override { return "cuda"; }
  Error L2Bytes(int* bytes) override {
    int dev = 0;
    const cudaError_t e = cudaGetDevice(&dev);
    return e != cudaSuccess ? e : cudaDeviceGetAttribute(bytes, cudaDevAttrL2CacheSize, dev);
  }
  Error DescribeDevice(int d, nlohmann::json* dev) override {
    cudaDeviceProp p{};
    if (const cudaError_t e = cudaGetDeviceProperties(&p, d); e != cudaSuccess) return e;
    device::DescribeCommonProperties(p, dev);
    auto attr = [d](cudaDeviceAttr a) {
      int v = 0;
      cudaDeviceGetAttribute(&v, a, d);
      return v;
    };
    (*dev)["smem_per_block_optin_bytes"] = p.sharedMemPerBlockOptin;
    (*dev)["smem_per_sm_bytes"] = p.sharedMemPerMultiprocessor;
    (*dev)["regs_per_sm"] = p.regsPerMultiprocessor;
    // CUDA 13's cudaDeviceProp has no clocks: attributes.
    (*dev)["sm_clock_khz"] = attr(cudaDevAttrClockRate);
    (*dev)["memory_clock_khz"] = attr(cudaDevAttrMemoryClockRate);
    (*dev)["memory_bus_bits"] = attr(cudaDevAttrGlobalMemoryBusWidth);
    return cudaSuccess;
  }
  std::unique_ptr<Kernel> NamedBaseline(const std::string& name, const v1::Task& task,
                                        const std::vector<Param>& params) override {
    if (name != "cublas") return nullptr;
    return std::make_unique<Kernel>(CublasGemmBaseline(task, params));
  }
  std::vector<std::string> BaselineNames() const override { return {"cublas"}; }
};

}  // namespace
}  // namespace kevo::runner

// See runtime_shim.h: work candidates leave on non-blocking streams is caught.
KEVO_DEVICE_STREAM_INTERPOSERS(cuda)

int main(int argc, char** argv) {
  kevo::runner::CudaRuntime rt;
  int code = kevo::runner::device::RunnerMain(rt, argc, argv);
  // Skip static destructors and atexit handlers (the candidate's, the CUDA
  // runtime's teardown): results are already written.
  _exit(code);
}
