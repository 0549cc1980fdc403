// The amd platform without a GPU, as CI runs it: real hipcc (Debian's HIP
// 5.2) through the backend's sandboxed KernelBuilder for gfx90a and gfx940,
// the resource report read from the code objects' metadata, the static score,
// and the compile-only Hello. Skipped only when hipcc is absent.
#include "worker/backends/amd/amd_backend.h"

#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "common/task/task_loader.h"
#include "tests/testing/process.h"
#include "tests/worker/hip_test_kernels.h"
#include "worker/backends/amd/hip_build.h"

namespace kevo::worker {
namespace {

namespace fs = std::filesystem;
using ::kevo::testing::SourceDir;
using ::testing::HasSubstr;

// 48 live values a thread: about 60 VGPRs unconstrained; capped at 24 VGPRs
// the compiler must spill. Same arithmetic either way.
constexpr char kPressure[] = R"(  float t[48];
#pragma unroll
  for (int k = 0; k < 48; ++k) t[k] = a[(i + k * 977) % n] + b[(i + k * 131) % n];
  float s = 0;
#pragma unroll
  for (int k = 0; k < 48; ++k) s += t[k] * t[47 - k] * t[(k * 5) % 48];
  c[i] = s;)";

class AmdBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (FindHipcc("").empty()) GTEST_SKIP() << "hipcc not found (apt-get install hipcc)";
    backend_ = Create({"gfx90a", "gfx940"});
    // One target is enough where the test is not about targets: half the
    // compile time.
    gfx90a_ = Create({"gfx90a"});
    ASSERT_TRUE(backend_ && gfx90a_);
    auto task = task::LoadTaskDir(SourceDir() + "/tasks/vector_add");
    ASSERT_TRUE(task.ok()) << task.status();
    task_ = *task;
  }

  static std::unique_ptr<Backend> Create(std::vector<std::string> targets) {
    AmdBackendOptions o;
    // Shared between test runs so reruns hit the build cache.
    o.work_dir = (fs::temp_directory_path() / "kevo-amd-backend-test").string();
    o.ignore_gpus = true;
    o.compile_timeout = absl::Seconds(300);
    o.targets = std::move(targets);
    auto b = CreateAmdBackend(o);
    EXPECT_TRUE(b.ok()) << b.status();
    return b.ok() ? std::move(*b) : nullptr;
  }

  v1::Evaluation Evaluate(const std::string& source, Backend* backend = nullptr) {
    v1::Candidate c;
    c.set_language("hip");
    c.set_source(source);
    return (backend != nullptr ? backend : backend_.get())->Evaluate(task_, c, nullptr);
  }

  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Backend> gfx90a_;
  v1::Task task_;
};

TEST_F(AmdBackendTest, DescribesACompileOnlyWorkerWithItsTargets) {
  auto hello = backend_->Describe();
  ASSERT_TRUE(hello.ok()) << hello.status();
  EXPECT_EQ(hello->platform(), "amd");
  EXPECT_TRUE(hello->compile_only());
  EXPECT_THAT(hello->targets(), ::testing::ElementsAre("gfx90a", "gfx940"));
  EXPECT_THAT(hello->languages(), ::testing::ElementsAre("hip"));
  EXPECT_THAT(hello->toolchains(0), HasSubstr("HIP version"));
  EXPECT_THAT(hello->capabilities().at("gfx940"), HasSubstr("gfx942"));
}

TEST_F(AmdBackendTest, CompileOnlyResultIsOkWithResourcesAndAStaticScoreButNoTime) {
  v1::Evaluation ev = Evaluate(VectorKernel("__launch_bounds__(256)", "  c[i] = a[i] + b[i];"));
  ASSERT_EQ(ev.status(), v1::OK) << ev.diagnostics().message() << ev.diagnostics().compiler_output();
  EXPECT_TRUE(ev.compile_only());
  // Full occupancy, no spills, no LDS; 4-byte global accesses: 0.75 + 0.25 x 4/16.
  EXPECT_DOUBLE_EQ(ev.static_score(), 0.8125);
  EXPECT_EQ(ev.timing().median_s(), 0);
  EXPECT_EQ(ev.speedup(), 0);
  for (const char* t : {"gfx90a", "gfx940"}) {
    for (const char* what :
         {"_vgprs", "_agprs", "_sgprs", "_lds_bytes", "_scratch_bytes", "_vgpr_spills", "_sgpr_spills",
          "_occupancy_waves", "_kernels", "_instructions", "_access_bytes", "_mfma"}) {
      EXPECT_TRUE(ev.profile().contains(absl::StrCat(t, what))) << t << what;
    }
    EXPECT_GT(ev.profile().at(absl::StrCat(t, "_vgprs")), 0);
    EXPECT_EQ(ev.profile().at(absl::StrCat(t, "_occupancy_waves")), 8);
    EXPECT_EQ(ev.profile().at(absl::StrCat(t, "_kernels")), 1);
    EXPECT_GT(ev.profile().at(absl::StrCat(t, "_instructions")), 5);
    EXPECT_EQ(ev.profile().at(absl::StrCat(t, "_access_bytes")), 4);  // global_load_dword
    EXPECT_EQ(ev.profile().at(absl::StrCat(t, "_mfma")), 0);
  }
  ASSERT_EQ(ev.events_size(), 2);
  EXPECT_EQ(ev.events(0).stage(), v1::STAGE_COMPILE);
  EXPECT_THAT(ev.events(0).message(), HasSubstr("VGPRs"));
  EXPECT_THAT(ev.events(0).message(), HasSubstr("4 B per global access"));
  EXPECT_EQ(ev.events(1).stage(), v1::STAGE_PROFILE);
  EXPECT_THAT(ev.events(1).message(), HasSubstr("static score"));
  EXPECT_THAT(ev.events(1).message(), HasSubstr("not a measurement"));
}

TEST_F(AmdBackendTest, KernelNeedingMoreLdsThanTheTargetHasIsACompileErrorWithTheCompilersMessage) {
  v1::Evaluation ev = Evaluate(VectorKernel("", R"(  __shared__ float big[20000];  // 80000 B > 64 KiB
  big[threadIdx.x] = a[i];
  __syncthreads();
  c[i] = big[(threadIdx.x * 7) % 20000] + b[i];)"),
                               gfx90a_.get());
  EXPECT_EQ(ev.status(), v1::COMPILE_ERROR);
  EXPECT_THAT(ev.diagnostics().compiler_output(), HasSubstr("local memory (80000) exceeds limit (65536)"));
  EXPECT_THAT(ev.diagnostics().message(), HasSubstr("exceeds limit"));
}

TEST_F(AmdBackendTest, CandidateWithRegisterSpillsScoresBelowTheSameKernelWithout) {
  v1::Evaluation free = Evaluate(VectorKernel("__launch_bounds__(256)", kPressure), gfx90a_.get());
  v1::Evaluation capped =
      Evaluate(VectorKernel("__launch_bounds__(256) __attribute__((amdgpu_num_vgpr(24)))", kPressure), gfx90a_.get());
  ASSERT_EQ(free.status(), v1::OK) << free.diagnostics().compiler_output();
  ASSERT_EQ(capped.status(), v1::OK) << capped.diagnostics().compiler_output();
  EXPECT_EQ(free.profile().at("gfx90a_vgpr_spills"), 0);
  EXPECT_GT(capped.profile().at("gfx90a_vgpr_spills"), 0);
  EXPECT_GT(capped.profile().at("gfx90a_scratch_bytes"), 0);
  EXPECT_GT(free.static_score(), 0);
  EXPECT_LT(capped.static_score(), free.static_score());
}

TEST_F(AmdBackendTest, SixteenByteGlobalAccessesScoreAboveFourByteOnesAtEqualOccupancy) {
  v1::Evaluation narrow = Evaluate(VectorKernel("__launch_bounds__(256)", "  c[i] = a[i] + b[i];"), gfx90a_.get());
  v1::Evaluation wide = Evaluate(VectorKernel("__launch_bounds__(256)", R"(  if (4 * i + 3 >= n) return;
  const float4 x = reinterpret_cast<const float4*>(a)[i], y = reinterpret_cast<const float4*>(b)[i];
  reinterpret_cast<float4*>(c)[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);)"),
                                 gfx90a_.get());
  ASSERT_EQ(narrow.status(), v1::OK) << narrow.diagnostics().compiler_output();
  ASSERT_EQ(wide.status(), v1::OK) << wide.diagnostics().compiler_output();
  EXPECT_EQ(narrow.profile().at("gfx90a_occupancy_waves"), wide.profile().at("gfx90a_occupancy_waves"));
  EXPECT_EQ(wide.profile().at("gfx90a_access_bytes"), 16);  // global_load_dwordx4
  EXPECT_DOUBLE_EQ(wide.static_score(), 1.0);
  EXPECT_LT(narrow.static_score(), wide.static_score());
}

TEST_F(AmdBackendTest, OtherLanguagesAndForbiddenImportsAreRefused) {
  v1::Candidate cuda;
  cuda.set_language("cuda");
  cuda.set_source("__global__ void k() {}");
  EXPECT_EQ(gfx90a_->Evaluate(task_, cuda, nullptr).status(), v1::COMPILE_ERROR);
  v1::Evaluation ev = Evaluate(absl::StrCat("#include <cstdlib>\n", VectorKernel("", "  c[i] = a[i];"),
                                            "extern \"C\" void leak() { system(\"true\"); }\n"),
                               gfx90a_.get());
  EXPECT_EQ(ev.status(), v1::SANDBOX_VIOLATION);
  EXPECT_EQ(ev.diagnostics().violation(), "system");
}

TEST(HipBuildTest, TargetsAreCheckedAndGfx942PointsAtItsStandIn) {
  auto ok = ParseAmdTargets("gfx90a, gfx940");
  ASSERT_TRUE(ok.ok());
  EXPECT_THAT(*ok, ::testing::ElementsAre("gfx90a", "gfx940"));
  auto gfx942 = ParseAmdTargets("gfx942");
  EXPECT_EQ(gfx942.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(gfx942.status().message()), HasSubstr("gfx940"));
  EXPECT_EQ(ParseAmdTargets("sm_90").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseAmdTargets("gfx90a,gfx90a").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(HipBuildTest, OccupancyFollowsRegistersAndLds) {
  const AmdTarget& t = *FindAmdTarget("gfx90a");
  KernelResources k;
  k.target = "gfx90a";
  k.vgprs = 60;
  k.sgprs = 20;
  EXPECT_EQ(OccupancyWavesPerSimd(t, k), 8);
  k.vgprs = 128;  // 512 / 128
  EXPECT_EQ(OccupancyWavesPerSimd(t, k), 4);
  k.agprs = 128;  // unified file: 256 registers a lane
  EXPECT_EQ(OccupancyWavesPerSimd(t, k), 2);
  k = KernelResources{};
  k.target = "gfx90a";
  k.vgprs = 16;
  k.lds_bytes = 32768;  // two 256-thread workgroups a CU: 8 waves over 4 SIMDs
  k.max_workgroup_size = 256;
  EXPECT_EQ(OccupancyWavesPerSimd(t, k), 2);
  k.lds_bytes = 70000;
  EXPECT_EQ(OccupancyWavesPerSimd(t, k), 0);
  EXPECT_EQ(StaticScore({k}), 0);
}

TEST(HipBuildTest, DisassemblySummaryCountsInstructionsAccessWidthsAndMfma) {
  std::vector<KernelResources> kernels(3);
  kernels[0].target = kernels[1].target = "gfx90a";
  kernels[2].target = "gfx940";
  kernels[0].kernel = kernels[2].kernel = "_Z1KPKfPf";
  kernels[1].kernel = "_Z5OtherPf";
  SummarizeHipIsa(R"(
k.co:	file format elf64-amdgpu

Disassembly of section .text:

0000000000001700 <_Z1KPKfPf>:
	s_load_dwordx4 s[0:3], s[4:5], 0x0                         // 000000001700:
	global_load_dwordx4 v[2:5], v1, s[0:1]                     // 000000001708:
	global_load_ushort v6, v1, s[0:1]                          // 000000001710:
	scratch_store_dword off, v7, s0                            // 000000001718:
	v_mfma_f32_32x32x8bf16_1k a[0:15], v[8:9], v[6:7], a[0:15] // 000000001720:
	global_store_dword v0, v2, s[2:3]                          // 000000001728:
	s_endpgm                                                   // 000000001730:

0000000000001800 <_Z9NotOursPf>:
	global_load_dword v0, v1, s[0:1]                           // 000000001800:
)",
                  "gfx90a", kernels);
  EXPECT_TRUE(kernels[0].disassembled);
  EXPECT_EQ(kernels[0].instructions, 7);
  EXPECT_EQ(kernels[0].global_accesses, 3);  // not s_load, not scratch_
  EXPECT_EQ(kernels[0].global_access_bytes, 16 + 2 + 4);
  EXPECT_EQ(kernels[0].mfma_instructions, 1);
  EXPECT_FALSE(kernels[1].disassembled);  // not in the text
  EXPECT_FALSE(kernels[2].disassembled);  // another target's kernel of the same name
  // 22 / 3 bytes an access: 0.75 + 0.25 x 22 / 48.
  kernels[0].vgprs = 16;
  EXPECT_DOUBLE_EQ(StaticScore({kernels[0]}), 0.75 + 0.25 * 22.0 / 48.0);
  EXPECT_EQ(ResourceCounters({kernels[0]}).at("gfx90a_mfma"), 1);
}

TEST(HipBuildTest, CudaReferencePortsToHip) {
  EXPECT_EQ(PortCudaToHip("#include <cuda_runtime.h>\ncudaStream_t s; cudaMemsetAsync(p, 0, n, s);"),
            "#include <hip/hip_runtime.h>\nhipStream_t s; hipMemsetAsync(p, 0, n, s);");
}

}  // namespace
}  // namespace kevo::worker
