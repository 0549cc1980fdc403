// End-to-end tests of the nvidia backend on a real GPU (ctest label "gpu"):
// nvcc, kevo-runner-cuda and kevo-runner-cpu through the sandbox, on the
// example candidates of tasks/*/examples/*.cu. Every test is skipped, with
// the probe's reason, on a host without an NVIDIA GPU (CI).
#include "worker/backends/nvidia/nvidia_backend.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "common/task/task_loader.h"
#include "coordinator/proposer/builtin/builtin_proposer.h"
#include "worker/runner/protocol.h"

namespace kevo::worker {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

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

class NvidiaBackendTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    NvidiaBackendOptions o;
    o.work_dir = (fs::path(BinDir()) / ".." / "tests" / "nvidia-backend-work").lexically_normal().string();
    o.runner_path = BinDir() + "/kevo-runner-cuda";
    o.cpu_runner_path = BinDir() + "/kevo-runner-cpu";
    o.run_timeout = absl::Seconds(20);
    o.profile_time_cap_s = 1.0;
    auto b = CreateNvidiaBackend(o);
    if (!b.ok()) {
      skip_reason_ = new std::string(b.status().ToString());
      return;
    }
    backend_ = b->release();
  }
  static void TearDownTestSuite() {
    delete backend_;
    backend_ = nullptr;
  }
  void SetUp() override {
    if (backend_ == nullptr) GTEST_SKIP() << "no usable NVIDIA GPU here: " << *skip_reason_;
  }

  v1::Evaluation Eval(const std::string& task_name, const std::string& source) {
    auto task = task::LoadTaskDir(SourceDir() + "/tasks/" + task_name);
    EXPECT_TRUE(task.ok()) << task.status();
    v1::Candidate c;
    c.set_language("cuda");
    c.set_source(source);
    return backend_->Evaluate(*task, c, nullptr);
  }
  v1::Evaluation EvalExample(const std::string& task_name, const std::string& file) {
    return Eval(task_name, ReadText(SourceDir() + "/tasks/" + task_name + "/examples/" + file));
  }

  static Backend* backend_;
  static std::string* skip_reason_;
};
Backend* NvidiaBackendTest::backend_ = nullptr;
std::string* NvidiaBackendTest::skip_reason_ = nullptr;

TEST_F(NvidiaBackendTest, DescribesTheGpu) {
  auto hello = backend_->Describe();
  ASSERT_TRUE(hello.ok());
  EXPECT_EQ(hello->platform(), "nvidia");
  EXPECT_FALSE(hello->device().empty());
  EXPECT_GT(hello->mem_bandwidth_gbs(), 100);
  for (const char* key : {"compute_capability", "sm_count", "memory_bytes", "l2_bytes", "driver_cuda_version",
                          "runtime_cuda_version", "sm_clock_mhz"}) {
    EXPECT_TRUE(hello->capabilities().contains(key)) << key;
  }
}

TEST_F(NvidiaBackendTest, FastSoftmaxPassesAndIsTimed) {
  v1::Evaluation ev = EvalExample("softmax", "fast.cu");
  ASSERT_EQ(ev.status(), v1::OK) << ev.diagnostics().message();
  EXPECT_GT(ev.timing().median_s(), 0);
  EXPECT_GT(ev.speedup(), 0);
  EXPECT_GT(ev.profile().at("achieved_bandwidth_gbs"), 10);
  EXPECT_GT(ev.profile().at("l2_flush_bytes"), 0);
  // An honest kernel finishes by its stop event; host jitter may rarely make
  // the device-wide synchronisation look late (seen: 1 sample in 2900).
  EXPECT_LT(ev.profile().at("escaped_samples"), 0.01 * ev.timing().samples_s_size());
  EXPECT_TRUE(ev.profile().contains("gpu_timing_utilisation"));
  // Timed against its reference.cu: x perturbed before every sample, and
  // the kept timed calls agreed with the baseline on the same inputs.
  EXPECT_EQ(ev.baseline_kind(), v1::BASELINE_CUDA_REFERENCE);
  EXPECT_EQ(ev.profile().at("perturbed_inputs"), 1);
  EXPECT_EQ(ev.profile().at("timed_checks"), runner::kTimedChecks);
}

TEST_F(NvidiaBackendTest, MatmulIsTimedAgainstCublas) {
  v1::Evaluation ev = EvalExample("matmul", "fast.cu");
  ASSERT_EQ(ev.status(), v1::OK) << ev.diagnostics().message();
  EXPECT_EQ(ev.baseline_kind(), v1::BASELINE_CUBLAS);
  EXPECT_GT(ev.baseline().median_s(), 0);
  EXPECT_EQ(ev.profile().at("perturbed_inputs"), 2);
  EXPECT_EQ(ev.profile().at("timed_checks"), runner::kTimedChecks);
}

// A bf16 GEMM that caches its result at the timed size (validation's small
// shapes are computed: their buffers come and go, and a reused address would
// give a stale answer there) and copies it back when called again with the
// same arguments: `key` is what it compares besides them. The honest path is
// a 16x16-tile kernel with float accumulation. Before the GPU runner
// perturbed the timed inputs, such a candidate was accepted at 9.7x cuBLAS.
std::string MemoizingMatmulBf16(const std::string& key_fields, const std::string& read_key) {
  return absl::StrCat(R"(
#include <cstdint>
#include <cuda_runtime.h>
namespace {
__device__ float Bf16ToFloat(uint16_t v) { return __uint_as_float(static_cast<uint32_t>(v) << 16); }
__device__ uint16_t FloatToBf16(float f) {
  uint32_t bits = __float_as_uint(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}
__global__ void Matmul(const uint16_t* A, const uint16_t* B, uint16_t* C, int64_t M, int64_t N, int64_t K) {
  __shared__ float a[16][16], b[16][16];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t row = blockIdx.y * 16ll + ty, col = blockIdx.x * 16ll + tx;
  float sum = 0.0f;
  for (int64_t k0 = 0; k0 < K; k0 += 16) {
    a[ty][tx] = row < M && k0 + tx < K ? Bf16ToFloat(A[row * K + k0 + tx]) : 0.0f;
    b[ty][tx] = k0 + ty < K && col < N ? Bf16ToFloat(B[(k0 + ty) * N + col]) : 0.0f;
    __syncthreads();
    for (int k = 0; k < 16; ++k) sum += a[ty][k] * b[k][tx];
    __syncthreads();
  }
  if (row < M && col < N) C[row * N + col] = FloatToBf16(sum);
}
void Compute(const uint16_t* A, const uint16_t* B, uint16_t* C, int64_t M, int64_t N, int64_t K) {
  if (M == 0 || N == 0) return;
  Matmul<<<dim3((N + 15) / 16, (M + 15) / 16), dim3(16, 16)>>>(A, B, C, M, N, K);
}
struct Entry {
  const void* a;
  const void* b;
  void* c;
  int64_t m, n, k;
  )",
                      key_fields, R"(
  void* saved;
};
Entry entries[16];
int used = 0;
}  // namespace
extern "C" void matmul_bf16(const uint16_t* A, const uint16_t* B, uint16_t* C, int64_t M, int64_t N, int64_t K) {
  if (M * N < (1 << 20)) return Compute(A, B, C, M, N, K);
  const size_t bytes = static_cast<size_t>(M * N) * sizeof(uint16_t);
  Entry now{A, B, C, M, N, K};
  )",
                      read_key, R"(
  for (int i = 0; i < used; ++i) {
    Entry& e = entries[i];
    if (e.a == A && e.b == B && e.c == C && e.m == M && e.n == N && e.k == K && SameKey(e, now)) {
      cudaMemcpy(C, e.saved, bytes, cudaMemcpyDeviceToDevice);
      return;
    }
  }
  Compute(A, B, C, M, N, K);
  if (used == 16) return;
  Entry& e = entries[used++];
  e = now;
  cudaMalloc(&e.saved, bytes);
  cudaMemcpy(e.saved, C, bytes, cudaMemcpyDeviceToDevice);
}
)");
}

void ExpectATimedCallDisagreed(const v1::Evaluation& ev) {
  EXPECT_EQ(ev.status(), v1::WRONG_ANSWER) << ev.diagnostics().message();
  EXPECT_THAT(ev.diagnostics().message(), HasSubstr("a timed call disagreed with the baseline"));
  EXPECT_THAT(ev.diagnostics().message(), HasSubstr("timed sample "));
  ASSERT_GT(ev.events_size(), 0);
  EXPECT_EQ(ev.events(ev.events_size() - 1).stage(), v1::STAGE_PROFILE);
  EXPECT_EQ(ev.speedup(), 0);
}

TEST_F(NvidiaBackendTest, MatmulBf16CachedByItsArgumentsIsRejected) {
  v1::Evaluation ev =
      Eval("matmul_bf16", MemoizingMatmulBf16("", "auto SameKey = [](const Entry&, const Entry&) { return true; };"));
  ExpectATimedCallDisagreed(ev);
}

TEST_F(NvidiaBackendTest, MatmulBf16CachedByItsArgumentsAndSampledValuesIsRejected) {
  // A few elements of A and B in the key too (read back from the device):
  // right wherever the inputs of a buffer never change.
  v1::Evaluation ev = Eval("matmul_bf16", MemoizingMatmulBf16("uint16_t sampled[4];", R"(
  const uint16_t* at[4] = {A, A + M * K / 2, B + K * N / 3, B + K * N - 1};
  for (int i = 0; i < 4; ++i) cudaMemcpy(&now.sampled[i], at[i], sizeof(uint16_t), cudaMemcpyDeviceToHost);
  auto SameKey = [](const Entry& e, const Entry& n) {
    for (int i = 0; i < 4; ++i) {
      if (e.sampled[i] != n.sampled[i]) return false;
    }
    return true;
  };)"));
  ExpectATimedCallDisagreed(ev);
}

TEST_F(NvidiaBackendTest, CachedResultIsRejectedWhereTheBaselineIsTheCpuReference) {
  // silu has no CUDA reference: the baseline is the C++ reference on the CPU,
  // nothing in the GPU runner can say what a perturbed call should give, and
  // no timed call is kept. The cache is caught all the same: its first call
  // (in the warm-up) already had perturbed inputs, so what it copies back
  // disagrees with the reference on the timed inputs in the check after
  // timing, on the very buffers it was timed on.
  v1::Evaluation ev = Eval("silu", R"(
#include <cstdint>
#include <cuda_runtime.h>
__global__ void Silu(const float* x, float* y, int64_t n) {
  for (int64_t i = blockIdx.x * 256ll + threadIdx.x; i < n; i += 256ll * gridDim.x) y[i] = x[i] / (1.0f + expf(-x[i]));
}
extern "C" void silu(const float* x, float* y, int64_t n) {
  static const float* last_x = nullptr;
  static float* last_y = nullptr;
  static float* saved = nullptr;
  if (n >= (1 << 20) && x == last_x && y == last_y) {
    cudaMemcpy(y, saved, n * sizeof(float), cudaMemcpyDeviceToDevice);
    return;
  }
  if (n > 0) Silu<<<1024, 256>>>(x, y, n);
  if (n < (1 << 20)) return;
  if (saved == nullptr) cudaMalloc(&saved, n * sizeof(float));
  cudaMemcpy(saved, y, n * sizeof(float), cudaMemcpyDeviceToDevice);
  last_x = x;
  last_y = y;
}
)");
  EXPECT_EQ(ev.status(), v1::WRONG_ANSWER) << ev.diagnostics().message();
  EXPECT_THAT(ev.diagnostics().message(), HasSubstr("checked on the buffers it was timed on"));
  EXPECT_THAT(ev.diagnostics().message(), HasSubstr("C++ reference"));
}

TEST_F(NvidiaBackendTest, ZeroedInputsAreCaught) {
  v1::Evaluation ev = EvalExample("vector_add", "zero_inputs.cu");
  EXPECT_EQ(ev.status(), v1::INPUT_MODIFIED) << ev.diagnostics().message();
}

TEST_F(NvidiaBackendTest, OutOfBoundsWriteIsCaughtByTheGuards) {
  v1::Evaluation ev = EvalExample("vector_add", "oob_write.cu");
  EXPECT_EQ(ev.status(), v1::RUNTIME_ERROR) << ev.diagnostics().message();
  EXPECT_THAT(ev.diagnostics().message(), HasSubstr("past the end of tensor 'z'"));
}

TEST_F(NvidiaBackendTest, MemoizingCandidateIsCaughtAtTheTimedBinding) {
  // It skips the work when called again with the same pointers: the outputs
  // it leaves are the poison put in before every sample.
  v1::Evaluation ev = EvalExample("vector_add", "memoize.cu");
  ExpectATimedCallDisagreed(ev);
  EXPECT_THAT(ev.diagnostics().message(), HasSubstr("= nan"));
}

TEST_F(NvidiaBackendTest, SideStreamCandidateIsRejectedAndTheNextOneIsServed) {
  v1::Evaluation ev = EvalExample("vector_add", "side_stream.cu");
  EXPECT_EQ(ev.status(), v1::UNFINISHED_ON_RETURN) << ev.diagnostics().message();
  EXPECT_THAT(ev.diagnostics().message(), HasSubstr("cudaStreamNonBlocking"));
  v1::Evaluation good = EvalExample("vector_add", "fast.cu");
  EXPECT_EQ(good.status(), v1::OK) << good.diagnostics().message();
}

// The same kernel on a non-blocking stream, but joined back: the default
// stream waits for it through an event, so the outputs are ready for any
// caller on that stream. Destroying the stream instead does not help.
TEST_F(NvidiaBackendTest, SideStreamJoinedByAnEventPassesADestroyedOneDoesNot) {
  const std::string kernel = R"(
#include <cstdint>
#include <cuda_runtime.h>
__global__ void Add(const float* x, const float* y, float* z, int64_t n) {
  for (int64_t i = blockIdx.x * 256ll + threadIdx.x; i < n; i += 256ll * gridDim.x) z[i] = x[i] + y[i];
}
extern "C" void vector_add(const float* x, const float* y, float* z, int64_t n) {
  cudaStream_t side;
  cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);
  Add<<<1024, 256, 0, side>>>(x, y, z, n);
)";
  v1::Evaluation joined = Eval("vector_add", kernel + R"(
  cudaEvent_t done;
  cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
  cudaEventRecord(done, side);
  cudaStreamWaitEvent(0, done, 0);
  cudaEventDestroy(done);
  cudaStreamDestroy(side);
}
)");
  EXPECT_EQ(joined.status(), v1::OK) << joined.diagnostics().message();
  v1::Evaluation destroyed = Eval("vector_add", kernel + "  cudaStreamDestroy(side);\n}\n");
  EXPECT_EQ(destroyed.status(), v1::UNFINISHED_ON_RETURN) << destroyed.diagnostics().message();
}

TEST_F(NvidiaBackendTest, CandidateThatWritesNothingFindsPoisonedOutputs) {
  v1::Evaluation ev = EvalExample("vector_add", "no_write.cu");
  EXPECT_EQ(ev.status(), v1::NONFINITE) << ev.diagnostics().message();
}

TEST_F(NvidiaBackendTest, BuiltinCudaRecipesDefaultKernelsPassOnTheGpu) {
  for (const char* name : {"gelu_erf", "softmax", "layer_norm", "row_sum", "matmul_bf16"}) {
    auto task = task::LoadTaskDir(SourceDir() + "/tasks/" + name);
    ASSERT_TRUE(task.ok()) << task.status();
    proposer::BuiltinProposer proposer;
    proposer::ProposeRequest req;
    req.task = &*task;
    req.platform = "nvidia";
    req.count = 1;
    auto proposals = proposer.Propose(req);
    ASSERT_TRUE(proposals.ok()) << name << ": " << proposals.status();
    ASSERT_EQ(proposals->size(), 1u);
    v1::Evaluation ev = backend_->Evaluate(*task, proposals->front().candidate, nullptr);
    EXPECT_EQ(ev.status(), v1::OK) << name << " " << proposals->front().genome.ToString() << ": "
                                   << ev.diagnostics().message();
    EXPECT_GT(ev.speedup(), 0) << name;
  }
}

TEST_F(NvidiaBackendTest, IllegalAddressEndsTheRunnerAndTheGpuStaysUsable) {
  v1::Evaluation bad = Eval("vector_add", R"(
#include <cstdint>
__global__ void Bad(float* z) { z[threadIdx.x + (1ll << 40)] = 1.0f; }
extern "C" void vector_add(const float* x, const float* y, float* z, int64_t n) { Bad<<<1, 32>>>(z); }
)");
  EXPECT_EQ(bad.status(), v1::RUNTIME_ERROR) << bad.diagnostics().message();
  EXPECT_THAT(bad.diagnostics().message(), HasSubstr("faulted on the GPU"));
  EXPECT_EQ(bad.profile().at("gpu_healthy_after"), 1);
  v1::Evaluation good = EvalExample("vector_add", "fast.cu");
  EXPECT_EQ(good.status(), v1::OK) << good.diagnostics().message();
}

TEST_F(NvidiaBackendTest, HungKernelIsKilledAtItsTimeout) {
  v1::Evaluation hung = Eval("vector_add", R"(
#include <cstdint>
__global__ void Spin(float* z, int64_t n) { while (n > 0) { z[0] = 1; __nanosleep(1000); } }
extern "C" void vector_add(const float* x, const float* y, float* z, int64_t n) { Spin<<<1, 1>>>(z, n); }
)");
  EXPECT_EQ(hung.status(), v1::RUN_TIMEOUT) << hung.diagnostics().message();
  v1::Evaluation good = EvalExample("vector_add", "fast.cu");
  EXPECT_EQ(good.status(), v1::OK) << good.diagnostics().message();
}

}  // namespace
}  // namespace kevo::worker
