// Tests of common/task/kernelbench.h: loading KernelBench-format problems and
// loading any task (native folder or .py file) by path.
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "common/task/kernelbench.h"
#include "common/task/task_loader.h"

namespace kevo::task {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string SourceDir() {
  const char* v = std::getenv("KEVO_SOURCE_DIR");
  return v != nullptr && *v != '\0' ? v : ".";
}
std::string DataDir() { return SourceDir() + "/tests/data/kernelbench"; }

class KernelBenchLoaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / absl::StrCat("kevo_kb_loader_", getpid(), "_",
                                                    ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void Write(const std::string& rel, const std::string& text) {
    fs::create_directories((dir_ / rel).parent_path());
    std::ofstream(dir_ / rel) << text;
  }
  fs::path dir_;
};

TEST_F(KernelBenchLoaderTest, LoadsTheReluProblemAsAKernelBenchTask) {
  absl::StatusOr<v1::Task> task = LoadTaskPath(DataDir() + "/relu.py");
  ASSERT_TRUE(task.ok()) << task.status();
  EXPECT_EQ(task->name(), "relu");
  EXPECT_EQ(task->format(), v1::TASK_FORMAT_KERNELBENCH);
  EXPECT_EQ(task->op_family(), kKernelBenchFamily);
  EXPECT_EQ(task->reference().language(), "python");
  EXPECT_EQ(task->reference().file(), "relu.py");
  EXPECT_THAT(task->reference().source(), HasSubstr("def get_init_inputs():"));
  EXPECT_EQ(task->seeds(), kDefaultSeeds);
  EXPECT_EQ(task->time().name(), kKernelBenchBinding);
  EXPECT_TRUE(ValidateKernelBenchTask(*task).ok());
}

TEST_F(KernelBenchLoaderTest, NamesTheTaskAfterTheFileStem) {
  Write("level1/19_ReLU.py",
        "import torch\nclass Model(torch.nn.Module):\n    pass\n"
        "def get_inputs():\n    return []\ndef get_init_inputs():\n    return []\n");
  absl::StatusOr<v1::Task> task = LoadKernelBenchFile((dir_ / "level1/19_ReLU.py").string());
  ASSERT_TRUE(task.ok()) << task.status();
  EXPECT_EQ(task->name(), "19_ReLU");
}

TEST_F(KernelBenchLoaderTest, RejectsAFileWithoutGetInputsNamingTheFile) {
  Write("bad.py", "class Model:\n    pass\ndef get_init_inputs():\n    return []\n");
  const std::string path = (dir_ / "bad.py").string();
  absl::StatusOr<v1::Task> task = LoadTaskPath(path);
  ASSERT_EQ(task.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(task.status().message(), HasSubstr(path));
  EXPECT_THAT(task.status().message(), HasSubstr("no def get_inputs()"));
}

TEST_F(KernelBenchLoaderTest, AnIndentedDefinitionDoesNotCount) {
  EXPECT_FALSE(LooksLikeKernelBench(
      "class Model:\n    def get_inputs(self):\n        pass\ndef get_init_inputs():\n  return []\n"));
}

TEST_F(KernelBenchLoaderTest, MissingFileIsNotFound) {
  EXPECT_EQ(LoadTaskPath((dir_ / "nope.py").string()).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(KernelBenchLoaderTest, LoadTaskPathStillLoadsNativeFolders) {
  absl::StatusOr<v1::Task> task = LoadTaskPath(SourceDir() + "/tasks/vector_add");
  ASSERT_TRUE(task.ok()) << task.status();
  EXPECT_EQ(task->format(), v1::TASK_FORMAT_NATIVE);
  EXPECT_EQ(task->reference().language(), "c++");
}

TEST_F(KernelBenchLoaderTest, FindsProblemsAndNativeFoldersSkippingOtherPython) {
  const std::string problem =
      "class Model(nn.Module):\n    pass\ndef get_inputs():\n    return []\n"
      "def get_init_inputs():\n    return []\n";
  Write("level1/2_b.py", problem);
  Write("level1/1_a.py", problem);
  Write("level1/notes.txt", problem);
  Write("scripts/eval.py", "import sys\n");                 // not a problem
  Write("runs/1_a_new.py", "class ModelNew:\n    pass\n");  // a candidate
  Write("native/task.textproto", "name: \"x\"\n");
  Write("native/helper.py", problem);  // inside a task folder: not searched
  absl::StatusOr<std::vector<std::string>> found = FindTaskPaths(dir_.string());
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_THAT(*found, ElementsAre((dir_ / "level1/1_a.py").string(), (dir_ / "level1/2_b.py").string(),
                                  (dir_ / "native").string()));
  EXPECT_THAT(*FindTaskPaths((dir_ / "level1/1_a.py").string()), ElementsAre((dir_ / "level1/1_a.py").string()));
}

TEST_F(KernelBenchLoaderTest, TheTestProblemsFolderHoldsExactlyTheProblems) {
  absl::StatusOr<std::vector<std::string>> found = FindTaskPaths(DataDir());
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_THAT(*found,
              ElementsAre(DataDir() + "/col_norms.py", DataDir() + "/conv3d.py", DataDir() + "/cross_entropy.py",
                          DataDir() + "/gelu_chain.py", DataDir() + "/group_norm.py", DataDir() + "/hinge.py",
                          DataDir() + "/instance_norm.py", DataDir() + "/layer_norm_relu.py", DataDir() + "/losses.py",
                          DataDir() + "/matmul.py", DataDir() + "/noisy_relu.py", DataDir() + "/pools.py",
                          DataDir() + "/reductions.py", DataDir() + "/relu.py", DataDir() + "/row_norms.py",
                          DataDir() + "/scans.py", DataDir() + "/softmax_gelu_cumsum.py"));
}

TEST_F(KernelBenchLoaderTest, ValidateRejectsAWireTaskWithoutSource) {
  v1::Task task;
  task.set_name("x");
  task.set_format(v1::TASK_FORMAT_KERNELBENCH);
  task.mutable_reference()->set_language("python");
  absl::Status s = ValidateKernelBenchTask(task);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("no class Model"));
}

// What the coordinator runs on every task it receives: each kind checked by
// its own rules, native ones with the size limits and a reference read in.
TEST_F(KernelBenchLoaderTest, AReceivedTaskIsCheckedByItsKind) {
  absl::StatusOr<v1::Task> kb = LoadTaskPath(DataDir() + "/relu.py");
  ASSERT_TRUE(kb.ok()) << kb.status();
  EXPECT_TRUE(ValidateReceivedTask(*kb).ok());
  kb->mutable_reference()->set_source("print('no model here')\n");
  EXPECT_THAT(ValidateReceivedTask(*kb).message(), HasSubstr("no class Model"));

  absl::StatusOr<v1::Task> native = LoadTaskPath(SourceDir() + "/tasks/vector_add");
  ASSERT_TRUE(native.ok()) << native.status();
  EXPECT_TRUE(ValidateReceivedTask(*native).ok());
  v1::Task huge = *native;
  for (auto& [symbol, value] : *huge.mutable_time()->mutable_values()) value = 1000000000000;  // 10^12
  absl::Status s = ValidateReceivedTask(huge);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("task: time binding: tensor '"));
  EXPECT_THAT(s.message(), HasSubstr("above the limit of 8 GiB per tensor"));
  EXPECT_TRUE(ValidateReceivedTask(huge, TaskLimits{INT64_MAX, INT64_MAX}).ok());

  v1::Task unread = *native;
  unread.mutable_reference()->clear_source();
  absl::Status no_source = ValidateReceivedTask(unread);
  EXPECT_EQ(no_source.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(no_source.message(), HasSubstr("has no source"));
}

}  // namespace
}  // namespace kevo::task
