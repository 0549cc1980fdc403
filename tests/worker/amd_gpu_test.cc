// The amd platform on a ROCm GPU: kevo-runner-hip validates and times HIP
// candidates (label "gpu"). No AMD GPU is available to this project, so on
// every host here these tests skip themselves, saying why; they have never
// run on AMD hardware (docs/amd.md).
#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "common/task/task_loader.h"
#include "tests/testing/process.h"
#include "tests/worker/hip_test_kernels.h"
#include "worker/backends/amd/amd_backend.h"

namespace kevo::worker {
namespace {

namespace fs = std::filesystem;
using ::kevo::testing::BinDir;
using ::kevo::testing::SourceDir;
using ::testing::HasSubstr;

std::string VectorAdd(const std::string& body) { return VectorKernel("__launch_bounds__(256)", body); }

class AmdGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const RocmProbe rocm = ProbeRocm();
    if (rocm.gpus == 0) GTEST_SKIP() << "no ROCm GPU on this host (" << rocm.description << ")";
    if (FindHipcc("").empty()) GTEST_SKIP() << "hipcc not found";
    AmdBackendOptions o;
    o.work_dir = (fs::temp_directory_path() / "kevo-amd-gpu-test").string();
    o.runner_path = BinDir() + "/kevo-runner-hip";
    o.cpu_runner_path = BinDir() + "/kevo-runner-cpu";
    o.profile_time_cap_s = 0.5;
    auto b = CreateAmdBackend(o);
    ASSERT_TRUE(b.ok()) << b.status();
    backend_ = std::move(*b);
    auto hello = backend_->Describe();
    ASSERT_TRUE(hello.ok());
    // A GPU of another architecture (gfx942, gfx1100, ...) leaves the worker
    // compile-only, with the reason.
    ASSERT_FALSE(hello->compile_only()) << hello->capabilities().at("compile_only_reason");
    auto task = task::LoadTaskDir(SourceDir() + "/tasks/vector_add");
    ASSERT_TRUE(task.ok()) << task.status();
    task_ = *task;
  }

  v1::Evaluation Evaluate(const std::string& source) {
    v1::Candidate c;
    c.set_language("hip");
    c.set_source(source);
    return backend_->Evaluate(task_, c, nullptr);
  }

  std::unique_ptr<Backend> backend_;
  v1::Task task_;
};

TEST_F(AmdGpuTest, ACorrectKernelIsValidatedAndTimed) {
  v1::Evaluation ev = Evaluate(VectorAdd("c[i] = a[i] + b[i];"));
  ASSERT_EQ(ev.status(), v1::OK) << ev.diagnostics().message();
  EXPECT_FALSE(ev.compile_only());
  EXPECT_GT(ev.timing().median_s(), 0);
  EXPECT_GT(ev.speedup(), 0);
  EXPECT_GT(ev.profile().at("l2_flush_bytes"), 0);
  EXPECT_TRUE(ev.profile().contains("gfx90a_vgprs") || ev.profile().contains("gfx940_vgprs"));
}

TEST_F(AmdGpuTest, AWrongKernelIsAWrongAnswer) {
  v1::Evaluation ev = Evaluate(VectorAdd("c[i] = a[i] - b[i];"));
  EXPECT_EQ(ev.status(), v1::WRONG_ANSWER) << ev.diagnostics().message();
}

TEST_F(AmdGpuTest, AnOutOfBoundsWriteIsCaught) {
  v1::Evaluation ev = Evaluate(VectorAdd("c[i] = a[i] + b[i]; if (i == n - 1) c[n + 3] = 0;"));
  EXPECT_EQ(ev.status(), v1::RUNTIME_ERROR) << ev.diagnostics().message();
  EXPECT_THAT(ev.diagnostics().message(), HasSubstr("wrote past the end of tensor 'c'"));
}

}  // namespace
}  // namespace kevo::worker
