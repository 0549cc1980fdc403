// kevo-runner-hip where there is no AMD GPU (what CI has): the runner is
// built (with Debian's HIP runtime and hipcc-built kernels), and every mode
// that needs a device ends with the runner's specific error and exit status,
// not a crash. On a host with a ROCm GPU these tests skip themselves;
// amd_gpu_test covers that host.
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "common/task/task_loader.h"
#include "tests/testing/process.h"
#include "worker/backends/amd/amd_backend.h"
#include "worker/runner/protocol.h"

namespace kevo::worker {
namespace {

namespace fs = std::filesystem;
using ::kevo::testing::BinDir;
using ::kevo::testing::RunCommand;
using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

class HipRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    runner_ = BinDir() + "/kevo-runner-hip";
    if (!fs::exists(runner_)) {
      GTEST_SKIP() << "kevo-runner-hip not built (no hipcc or libamdhip64-dev at configure time)";
    }
    if (ProbeRocm().gpus > 0) GTEST_SKIP() << "this host has a ROCm GPU; amd_gpu_test covers it";
    dir_ = kevo::testing::MakeTempDir("hip-runner");
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }

  // Runs the runner with `args`, the report in dir_/report.txt.
  kevo::testing::CommandResult Run(std::vector<std::string> args) {
    std::vector<std::string> argv = {runner_};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.push_back("--report=" + dir_ + "/report.txt");
    return RunCommand(argv, absl::Seconds(60));
  }
  std::string Report() const { return ReadAll(dir_ + "/report.txt"); }

  std::string runner_;
  std::string dir_;
};

TEST_F(HipRunnerTest, ProbeSaysTheRuntimeFoundNoDevice) {
  auto r = Run({"probe", "--result=" + dir_ + "/probe.json"});
  EXPECT_EQ(r.exit_code, runner::kExitInfra) << r.err;
  EXPECT_THAT(Report(), StartsWith("error hipGetDeviceCount: hipError"));
  EXPECT_THAT(r.err, HasSubstr("kevo-runner-hip: hipGetDeviceCount: hipError"));
  EXPECT_EQ(ReadAll(dir_ + "/probe.json"), "");
}

// A validation run stops at the context, before any kernel is loaded or any
// output written: an infrastructure error naming HIP's answer.
TEST_F(HipRunnerTest, RunStopsAtTheContextWithHipsError) {
  auto task = task::LoadTaskDir(kevo::testing::SourceDir() + "/tasks/vector_add");
  ASSERT_TRUE(task.ok()) << task.status();
  std::ofstream(dir_ + "/task.pb", std::ios::binary) << task->SerializeAsString();
  std::ofstream(dir_ + "/kernel.so") << "never loaded";
  auto r = Run({"run", "--task=" + dir_ + "/task.pb", "--kernel=" + dir_ + "/kernel.so", "--seeds=1",
                "--outputs=" + dir_ + "/out.bin", "--result=" + dir_ + "/result.json"});
  EXPECT_EQ(r.exit_code, runner::kExitInfra) << r.err;
  EXPECT_THAT(Report(), StartsWith("error HIP creating the context: hipError"));
  EXPECT_EQ(ReadAll(dir_ + "/result.json"), "");
  const runner::Report parsed = runner::ParseReport(Report());
  EXPECT_THAT(parsed.error, HasSubstr("hipError"));
}

TEST_F(HipRunnerTest, HealthCheckFailsAsADeviceError) {
  auto r = Run({"health"});
  EXPECT_EQ(r.exit_code, runner::kExitDeviceFault) << r.err;
  EXPECT_THAT(Report(), StartsWith("device_error health kernel: hipError"));
}

TEST_F(HipRunnerTest, UnknownModeIsAnInfraError) {
  auto r = Run({"bogus"});
  EXPECT_EQ(r.exit_code, runner::kExitInfra);
  EXPECT_THAT(Report(), HasSubstr("usage: kevo-runner-hip probe|health|run|profile"));
}

}  // namespace
}  // namespace kevo::worker
