// `kevo eval` and `kevo run` on KernelBench-format problems, as a user runs
// them: embedded coordinator and cpu worker, Python runner under
// /usr/bin/python3 with Debian's PyTorch. Problems and candidates are the
// ones written for the tests under tests/data/kernelbench/.
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/testing/process.h"

namespace kevo::testing {
namespace {

namespace fs = std::filesystem;

std::string Kevo() { return BinDir() + "/kevo"; }
std::string Data() { return SourceDir() + "/tests/data/kernelbench"; }

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(KernelBenchCliTest, EvalReluIsOkWithASpeedupOverPyTorchEager) {
  auto r =
      RunCommand({Kevo(), "eval", Data() + "/relu.py", Data() + "/candidates/relu_new.py", "--json"}, absl::Minutes(5));
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["status"], "OK");
  EXPECT_EQ(j["baseline_kind"], "pytorch_eager");
  EXPECT_GT(j["speedup"].get<double>(), 0.0);
  EXPECT_GT(j["baseline_time_s"].get<double>(), 0.0);
  EXPECT_EQ(j["validation"].size(), 3u);
  EXPECT_TRUE(j["notes"].contains("baseline_torch_compile")) << r.out;
}

TEST(KernelBenchCliTest, EvalWrongModelNewExitsThreeWithWrongAnswer) {
  auto r = RunCommand({Kevo(), "eval", Data() + "/relu.py", Data() + "/candidates/relu_wrong.py", "--json"},
                      absl::Minutes(5));
  ASSERT_EQ(r.exit_code, 3) << r.err << r.out;
  EXPECT_EQ(nlohmann::json::parse(r.out)["status"], "WRONG_ANSWER");
}

TEST(KernelBenchCliTest, RunOnAFolderSearchesEveryProblemAndWritesPythonKernels) {
  const std::string dir = MakeTempDir("kevo-kb-run");
  fs::create_directories(dir + "/problems");
  fs::copy_file(Data() + "/relu.py", dir + "/problems/relu.py");
  fs::copy_file(Data() + "/matmul.py", dir + "/problems/matmul.py");
  // kevo run writes kevo-out/TASK/best.py under the current folder.
  auto r =
      RunCommand({"/bin/sh", "-c", "cd '" + dir + "' && exec '" + Kevo() + "' run problems --budget 1 --max-wall 240"},
                 absl::Minutes(9));
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("task          matmul"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("task          relu"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("PyTorch eager"), std::string::npos) << r.out;
  for (const char* name : {"relu", "matmul"}) {
    const std::string best = ReadText(dir + "/kevo-out/" + name + "/best.py");
    EXPECT_NE(best.find("class ModelNew"), std::string::npos) << name;
    EXPECT_NE(best.find("pytorch_rewrite"), std::string::npos) << name;
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kevo::testing
