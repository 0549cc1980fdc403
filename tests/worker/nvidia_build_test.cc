// The nvidia platform's compile stage without a GPU (runs in CI, where nvcc
// is installed but there is no GPU): real nvcc through KernelBuilder and the
// sandbox, then the symbol checks CompileCudaCandidate makes. Also the
// no-GPU path of the probe. Skipped only when nvcc is absent.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "common/sandbox/sandbox.h"
#include "common/task/kernelbench.h"
#include "common/task/task_loader.h"
#include "worker/backends/nvidia/cuda_build.h"
#include "worker/backends/nvidia/nvidia_backend.h"
#include "worker/pipeline/elf_symbols.h"

namespace kevo::worker {
namespace {

namespace fs = std::filesystem;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

std::string SourceDir() {
  const char* v = std::getenv("KEVO_SOURCE_DIR");
  return v != nullptr && *v ? v : ".";
}
std::string BinDir() {
  const char* v = std::getenv("KEVO_BIN_DIR");
  return v != nullptr && *v ? v : (fs::read_symlink("/proc/self/exe").parent_path() / ".." / "bin").string();
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

class NvidiaBuildTest : public ::testing::Test {
 protected:
  void SetUp() override {
    nvcc_ = FindNvcc("");
    if (nvcc_.empty()) GTEST_SKIP() << "nvcc not found (set CUDACXX or install /usr/local/cuda)";
    auto sb = sandbox::Sandbox::Create({});
    ASSERT_TRUE(sb.ok()) << sb.status();
    sandbox_ = std::move(*sb);
    // Shared between test processes so reruns hit the cache.
    cache_ = (fs::path(BinDir()) / ".." / "tests" / "nvidia-build-cache").lexically_normal().string();
    fs::create_directories(cache_);
    builder_ = std::make_unique<KernelBuilder>(sandbox_.get(), nvcc_, "nvidia_build_test", cache_, absl::Seconds(600),
                                               int64_t{8} << 30, std::vector<std::string>{}, NvccLayout());
  }

  v1::Task Load(const std::string& name) {
    auto task = task::LoadTaskDir(SourceDir() + "/tasks/" + name);
    EXPECT_TRUE(task.ok()) << task.status();
    return task.ok() ? *task : v1::Task();
  }

  CudaCompileResult Compile(const v1::Task& task, const std::string& source, std::vector<std::string> flags = {}) {
    v1::Candidate c;
    c.set_language("cuda");
    c.set_source(source);
    for (const auto& f : flags) c.add_extra_flags(f);
    return CompileCudaCandidate(*builder_, task, c, "sm_90a");
  }

  std::string nvcc_;
  std::string cache_;
  std::unique_ptr<sandbox::Sandbox> sandbox_;
  std::unique_ptr<KernelBuilder> builder_;
};

TEST_F(NvidiaBuildTest, SoftmaxFastCuBuildsIntoASharedObjectWithTheEntryPoints) {
  v1::Task task = Load("softmax");
  CudaCompileResult r = Compile(task, ReadText(SourceDir() + "/tasks/softmax/examples/fast.cu"));
  ASSERT_EQ(r.status, v1::OK) << r.message << "\n" << r.build.compiler_output;
  ASSERT_TRUE(fs::exists(r.build.library_path));
  auto symbols = ReadElfSymbols(r.build.library_path);
  ASSERT_TRUE(symbols.ok()) << symbols.status();
  std::vector<std::string> defined, imported;
  for (const ElfSymbol& s : *symbols) (s.undefined ? imported : defined).push_back(s.name);
  EXPECT_THAT(defined, Contains("kevo_entry"));
  EXPECT_THAT(defined, Contains("softmax"));
  // One CUDA runtime per process: the .so imports it (--cudart shared)
  // rather than carrying a static copy.
  EXPECT_THAT(imported, Contains(HasSubstr("__cudaRegisterFatBinary")));
  EXPECT_THAT(defined, Not(Contains("cudaMalloc")));
  // The object's imports are the launch stubs nvcc generates, all allowed.
  EXPECT_THAT(r.imports, Contains("__cudaPushCallConfiguration"));
  EXPECT_TRUE(r.forbidden.empty());
  // ptxas's resource use, from the build or, on a cache hit, kept beside it.
  EXPECT_GT(r.max_registers, 0) << r.build.compiler_output;
  const CudaCompileResult again = Compile(task, ReadText(SourceDir() + "/tasks/softmax/examples/fast.cu"));
  ASSERT_EQ(again.status, v1::OK) << again.message;
  EXPECT_TRUE(again.build.cache_hit);
  EXPECT_EQ(again.max_registers, r.max_registers) << again.build.compiler_output;
  EXPECT_EQ(again.spill_bytes, r.spill_bytes);
}

TEST_F(NvidiaBuildTest, VectorAddAndMatmulExamplesBuild) {
  for (const auto& [task_name, file] :
       std::vector<std::pair<std::string, std::string>>{{"vector_add", "fast.cu"},
                                                        {"vector_add", "side_stream.cu"},
                                                        {"vector_add", "memoize.cu"},
                                                        {"vector_add", "no_write.cu"},
                                                        {"layer_norm", "../reference.cu"},
                                                        {"gelu_erf", "../reference.cu"},
                                                        {"gelu_tanh", "../reference.cu"},
                                                        {"matmul", "fast.cu"}}) {
    CudaCompileResult r = Compile(Load(task_name), ReadText(SourceDir() + "/tasks/" + task_name + "/examples/" + file));
    EXPECT_EQ(r.status, v1::OK) << task_name << "/" << file << ": " << r.message << "\n" << r.build.compiler_output;
  }
}

// nvcc gives every non-inline __device__ function a host stub that calls
// exit() (dead code: host code cannot call it), so `exit` is imported by
// most hand-written kernels; such a candidate must not be refused for it.
TEST_F(NvidiaBuildTest, APlainDeviceHelperFunctionPassesTheSymbolCheck) {
  CudaCompileResult r = Compile(Load("vector_add"), R"(
#include <cstdint>
#include <cuda_runtime.h>
__device__ float Add(float a, float b) { return a + b; }
__global__ void K(const float* x, const float* y, float* z, int64_t n) {
  const int64_t i = blockIdx.x * 256ll + threadIdx.x;
  if (i < n) z[i] = Add(x[i], y[i]);
}
extern "C" void vector_add(const float* x, const float* y, float* z, int64_t n) {
  if (n > 0) K<<<(n + 255) / 256, 256>>>(x, y, z, n);
}
)");
  EXPECT_EQ(r.status, v1::OK) << r.message << "\n" << r.build.compiler_output;
}

TEST_F(NvidiaBuildTest, CublasCallIsAVendorLibraryViolation) {
  CudaCompileResult r = Compile(Load("vector_add"), ReadText(SourceDir() + "/tasks/vector_add/examples/cublas.cu"));
  EXPECT_EQ(r.status, v1::SANDBOX_VIOLATION) << r.message << "\n" << r.build.compiler_output;
  EXPECT_THAT(r.message, HasSubstr("vendor library"));
  EXPECT_THAT(r.forbidden, Contains("cublasSaxpy_v2"));
}

TEST_F(NvidiaBuildTest, DeviceResetIsForbidden) {
  CudaCompileResult r = Compile(Load("vector_add"), R"(
#include <cstdint>
#include <cuda_runtime.h>
extern "C" void vector_add(const float* x, const float* y, float* z, int64_t n) { cudaDeviceReset(); }
)");
  EXPECT_EQ(r.status, v1::SANDBOX_VIOLATION) << r.message;
  EXPECT_THAT(r.forbidden, Contains("cudaDeviceReset"));
}

TEST_F(NvidiaBuildTest, MissingExternCFunctionIsACompileError) {
  CudaCompileResult r = Compile(Load("vector_add"), R"(
#include <cstdint>
// C++ linkage: the wrapper's extern "C" vector_add stays undefined.
void vector_add(const float* x, const float* y, float* z, int64_t n) {}
)");
  EXPECT_EQ(r.status, v1::COMPILE_ERROR) << r.message;
  EXPECT_THAT(r.message, HasSubstr("does not define extern \"C\" vector_add"));
}

TEST_F(NvidiaBuildTest, SyntaxErrorIsACompileErrorWithNvccOutput) {
  CudaCompileResult r = Compile(Load("vector_add"), "__global__ void k( { }\n");
  EXPECT_EQ(r.status, v1::COMPILE_ERROR);
  EXPECT_THAT(r.build.compiler_output, HasSubstr("error"));
}

TEST_F(NvidiaBuildTest, RefusedExtraFlagNeverReachesNvcc) {
  CudaCompileResult r = Compile(Load("vector_add"), "int x;\n", {"-Xcompiler=-fplugin=/tmp/evil.so"});
  EXPECT_EQ(r.status, v1::COMPILE_ERROR);
  EXPECT_THAT(r.message, HasSubstr("is not allowed"));
  EXPECT_TRUE(r.build.library_path.empty());
}

TEST(CudaBuildPolicyTest, ExtraFlags) {
  EXPECT_TRUE(
      CheckNvccExtraFlags({"-O2", "--use_fast_math", "-maxrregcount=64", "-DTILE=32", "-lineinfo", "-Xptxas=-v"}).ok());
  for (const char* bad : {"-I/etc", "-o", "/tmp/x.cu", "-Xcompiler", "-ccbin=/bin/sh", "--keep", "-rdc=true",
                          "-lcublas", "-Xlinker=-rpath"}) {
    absl::Status s = CheckNvccExtraFlags({bad});
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(CudaBuildPolicyTest, Imports) {
  for (const char* ok : {"cudaLaunchKernel", "__cudaRegisterFunction", "cudaStreamCreateWithFlags", "cudaMemsetAsync",
                         "cudaFuncSetAttribute", "expf", "memcpy", "atexit", "exit"}) {
    EXPECT_TRUE(IsAllowedCudaImport(ok)) << ok;
  }
  for (const char* bad : {"cudaDeviceReset", "cudaMallocManaged", "cudaSetDevice", "cublasSgemm_v2", "cudnnCreate",
                          "socket", "fork", "system", "cudaIpcOpenMemHandle"}) {
    EXPECT_FALSE(IsAllowedCudaImport(bad)) << bad;
  }
  EXPECT_TRUE(IsVendorLibrarySymbol("cublasLtMatmul"));
  EXPECT_FALSE(IsVendorLibrarySymbol("cudaLaunchKernel"));
}

TEST(CudaBuildPolicyTest, ArchForComputeCapability) {
  EXPECT_EQ(CudaArchFor("9.0"), "sm_90a");
  EXPECT_EQ(CudaArchFor("8.0"), "sm_80");
  EXPECT_EQ(CudaArchFor("12.0"), "sm_120");
  EXPECT_EQ(CudaArchFor("x"), "");
  EXPECT_THAT(NvccCandidateFlags("sm_90a"), Contains("-gencode=arch=compute_90a,code=sm_90a"));
}

TEST(GpuProbeTest, MissingRunnerMeansNoGpu) {
  auto sb = sandbox::Sandbox::Create({});
  ASSERT_TRUE(sb.ok());
  auto probe = ProbeGpus(**sb, NvidiaVendor(), "/nonexistent/kevo-runner-cuda", ::testing::TempDir() + "/probe", false);
  EXPECT_EQ(probe.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(probe.status().message(), HasSubstr("no NVIDIA GPU found (kevo-runner-cuda probe: "));
}

TEST(GpuProbeTest, ParsesTheProbeJson) {
  auto p = ParseGpuProbe(R"({"driver_version": 13000, "runtime_version": 13000, "devices": [
      {"index": 0, "name": "NVIDIA H200", "compute_capability": "9.0", "sm_count": 132,
       "memory_bytes": 150000000000, "l2_bytes": 62914560, "copy_bandwidth_gbs": 4300.5}]})");
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->gpus.size(), 1u);
  EXPECT_EQ(p->gpus[0].name, "NVIDIA H200");
  EXPECT_EQ(p->gpus[0].sm_count, 132);
  EXPECT_DOUBLE_EQ(p->gpus[0].copy_bandwidth_gbs, 4300.5);
  EXPECT_EQ(ParseGpuProbe(R"({"devices": []})").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseGpuProbe("not json").status().code(), absl::StatusCode::kInvalidArgument);
}

// The tensor-core roof of f16/bf16 GEMMs: NVIDIA's datasheet figure for the
// GPUs it is known for, 0 (the FP32 rate then) for others; none for ROCm.
TEST(GpuProbeTest, TensorCorePeakIsTheDatasheetFigureOfKnownGpusOnly) {
  auto peak = [](const std::string& name) {
    GpuInfo g;
    g.name = name;
    return NvidiaVendor().tensor_peak_gflops(g);
  };
  EXPECT_DOUBLE_EQ(peak("NVIDIA H200"), 989.4e3);
  EXPECT_DOUBLE_EQ(peak("NVIDIA H100 80GB HBM3"), 989.4e3);
  EXPECT_DOUBLE_EQ(peak("NVIDIA H100 PCIe"), 0);
  EXPECT_DOUBLE_EQ(peak("NVIDIA A100-SXM4-80GB"), 0);
  EXPECT_EQ(RocmVendor().tensor_peak_gflops, nullptr);
}

TEST(GpuProbeTest, GemmTasksAreKnownByTheirHintsAndOperandType) {
  auto gemm = task::LoadTaskPath(SourceDir() + "/tasks/matmul_bf16");
  ASSERT_TRUE(gemm.ok()) << gemm.status();
  EXPECT_TRUE(IsGemmTask(*gemm));
  v1::Task no_k = *gemm;
  no_k.mutable_hints()->erase("k");
  EXPECT_FALSE(IsGemmTask(no_k));
  auto softmax = task::LoadTaskPath(SourceDir() + "/tasks/softmax");
  ASSERT_TRUE(softmax.ok()) << softmax.status();
  EXPECT_FALSE(IsGemmTask(*softmax));
}

// On this host (CI has no GPU) the real runner either finds GPUs or says
// plainly that it found none.
TEST(GpuProbeTest, RealRunnerFindsAGpuOrSaysNoGpu) {
  const std::string runner = BinDir() + "/kevo-runner-cuda";
  if (!fs::exists(runner)) GTEST_SKIP() << "kevo-runner-cuda not built (no nvcc at configure time)";
  auto sb = sandbox::Sandbox::Create({});
  ASSERT_TRUE(sb.ok());
  auto probe = ProbeGpus(**sb, NvidiaVendor(), runner, ::testing::TempDir() + "/probe-real", false);
  if (probe.ok()) {
    ASSERT_FALSE(probe->gpus.empty());
    EXPECT_FALSE(probe->gpus[0].name.empty());
    EXPECT_GT(probe->gpus[0].sm_count, 0);
  } else {
    EXPECT_EQ(probe.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(probe.status().message(), HasSubstr("no NVIDIA GPU found (kevo-runner-cuda probe: "));
  }
}

// A stand-in for kevo-runner-cuda whose probe reports one GPU, so that the
// backend can be created on a host without one and its KernelBench routing
// checked.
std::string FakeCudaRunner(const std::string& dir) {
  fs::create_directories(dir);
  const std::string path = dir + "/kevo-runner-cuda";
  std::ofstream(path) << R"SH(#!/bin/sh
[ "$1" = probe ] || { echo "fake runner: only probe" >&2; exit 3; }
for a in "$@"; do case "$a" in --result=*) out="${a#--result=}";; esac; done
printf '%s' '{"driver_version": 13000, "runtime_version": 13000, "devices": [{"index": 0,
  "name": "Fake GPU", "compute_capability": "9.0", "sm_count": 132, "memory_bytes": 1000000000,
  "l2_bytes": 62914560}]}' > "$out"
)SH";
  fs::permissions(path, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read |
                            fs::perms::others_exec);
  return path;
}

// Without a Python whose torch has CUDA (Debian's torch is CPU-only) the
// worker still serves CUDA C++, says in its Hello why it takes no
// KernelBench problems, and answers one with INFRA_ERROR giving that reason,
// from the Python runner's probe, instead of sending it to nvcc.
TEST(NvidiaKernelBenchRoutingTest, WithoutACudaTorchKernelBenchTasksAreRefusedWithTheReason) {
  if (FindNvcc("").empty()) GTEST_SKIP() << "nvcc not found";
  const std::string work = ::testing::TempDir() + "/nvidia-kb-routing";
  NvidiaBackendOptions o;
  o.work_dir = work + "/work";
  o.runner_path = FakeCudaRunner(work + "/bin");
  o.cpu_runner_path = BinDir() + "/kevo-runner-cpu";
  o.kernelbench_python = "/usr/bin/python3";
  o.kernelbench_runner_path = BinDir() + "/kevo-runner-kernelbench";
  o.measure = false;
  auto backend = CreateNvidiaBackend(o);
  ASSERT_TRUE(backend.ok()) << backend.status();
  auto hello = (*backend)->Describe();
  ASSERT_TRUE(hello.ok());
  EXPECT_EQ(hello->device(), "Fake GPU");
  EXPECT_THAT(hello->languages(), Contains("cuda"));
  // No datasheet tensor-core figure for this GPU.
  EXPECT_FALSE(hello->capabilities().contains("bf16_tensor_peak_gflops"));
  const std::string kb = hello->capabilities().at("kernelbench");
  if (!absl::StartsWith(kb, "unavailable: ")) GTEST_SKIP() << "this host's Python has a CUDA torch: " << kb;
  EXPECT_THAT(hello->languages(), Not(Contains("python")));
  EXPECT_THAT(kb, HasSubstr("/usr/bin/python3: "));
  // Debian's python3-torch: the probe names the CPU-only build.
  if (absl::StrContains(kb, "torch ")) EXPECT_THAT(kb, HasSubstr("CPU-only build"));

  auto task = task::LoadTaskPath(SourceDir() + "/tests/data/kernelbench/relu.py");
  ASSERT_TRUE(task.ok()) << task.status();
  v1::Candidate c;
  c.set_language("python");
  c.set_source(ReadText(SourceDir() + "/tests/data/kernelbench/candidates/relu_new.py"));
  v1::Evaluation ev = (*backend)->Evaluate(*task, c, nullptr);
  EXPECT_EQ(ev.status(), v1::INFRA_ERROR);
  EXPECT_EQ(ev.platform(), "nvidia");
  EXPECT_THAT(ev.diagnostics().message(), HasSubstr("cannot run KernelBench problems: "));
  EXPECT_THAT(ev.diagnostics().message(), HasSubstr(kb.substr(std::string("unavailable: ").size())));
  // Routed to the Python path: nvcc never saw it.
  for (const auto& e : ev.events()) EXPECT_THAT(e.message(), Not(HasSubstr("nvcc"))) << e.message();
}

}  // namespace
}  // namespace kevo::worker
