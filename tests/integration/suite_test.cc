// `kevo suite` as a user runs it: a folder of small tasks (starter tasks with a
// small timed shape) and one malformed task, searched embedded with a small
// budget. Every task gets a row in the JSON and the CSV, the malformed one an
// error row while the others still finish; a second run over the same
// results file skips the finished tasks. KernelBench problems under the folder
// are tasks of the suite too.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "absl/strings/str_replace.h"
#include "tests/testing/process.h"

namespace kevo::testing {
namespace {

namespace fs = std::filesystem;

std::string Kevo() { return BinDir() + "/kevo"; }

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Copies tasks/NAME into DIR, timing a smaller shape so the test stays fast.
void CopyTask(const std::string& name, const std::string& dir, const std::string& big,
              const std::string& small) {
  fs::copy(SourceDir() + "/tasks/" + name, dir + "/" + name, fs::copy_options::recursive);
  std::string path = dir + "/" + name + "/task.textproto";
  std::string text = ReadAll(path);
  ASSERT_NE(text.find(big), std::string::npos) << name;
  std::ofstream(path, std::ios::trunc) << absl::StrReplaceAll(text, {{big, small}});
}

TEST(SuiteTest, RunsEveryTaskWritesJsonAndCsvAndKeepsGoingPastABrokenTask) {
  std::string dir = MakeTempDir("kevo-suite");
  std::string tasks = dir + "/tasks";
  fs::create_directories(tasks);
  CopyTask("relu", tasks, "value: 8388608", "value: 262144");
  CopyTask("vector_add", tasks, "value: 16777216", "value: 262144");
  // A task whose file does not parse.
  fs::create_directories(tasks + "/broken");
  std::ofstream(tasks + "/broken/task.textproto") << "name: \"broken\"\nshpe: [\"n\"]\n";

  std::string out = dir + "/results/results.json";
  auto r = RunCommand({Kevo(), "suite", tasks, "--platform", "cpu", "--budget", "3", "--jobs", "2",
                       "--out", out},
                      absl::Minutes(5));
  // 3: not every task ended with a correct kernel (the broken one).
  ASSERT_EQ(r.exit_code, 3) << r.err << r.out;
  EXPECT_NE(r.out.find("task"), std::string::npos);
  // The summary line.
  EXPECT_NE(r.out.find("/3 tasks ("), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("2 correct, 1 with an error"), std::string::npos) << r.out;

  auto j = nlohmann::json::parse(ReadAll(out));
  ASSERT_EQ(j["tasks"].size(), 3u) << j.dump(2);
  std::map<std::string, nlohmann::json> rows;
  for (const auto& row : j["tasks"]) rows[row["task"].get<std::string>()] = row;
  ASSERT_TRUE(rows.contains("relu") && rows.contains("vector_add") && rows.contains("broken"));
  for (const char* name : {"relu", "vector_add"}) {
    const auto& row = rows[name];
    EXPECT_EQ(row["status"], "OK") << row.dump(2);
    EXPECT_TRUE(row["correct"].get<bool>());
    EXPECT_EQ(row["family"], "elementwise");
    EXPECT_GT(row["baseline_time_s"].get<double>(), 0);
    EXPECT_GT(row["best_time_s"].get<double>(), 0);
    EXPECT_GT(row["speedup"].get<double>(), 0);
    EXPECT_EQ(row["evaluations"].get<int>(), 3);
    EXPECT_TRUE(fs::exists(row["best_kernel_path"].get<std::string>()));
  }
  EXPECT_EQ(rows["broken"]["status"], "ERROR");
  EXPECT_NE(rows["broken"]["error"].get<std::string>().find("shpe"), std::string::npos)
      << rows["broken"].dump(2);
  EXPECT_EQ(j["summary"]["tasks"], 3);
  EXPECT_EQ(j["summary"]["errors"], 1);

  // The CSV beside it: a header and one line per task.
  std::string csv = ReadAll(dir + "/results/results.csv");
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 4) << csv;
  EXPECT_EQ(csv.rfind("task,family,", 0), 0u) << csv;
  EXPECT_NE(csv.find("\nbroken,"), std::string::npos) << csv;

  // Resume: the finished tasks are skipped (same jobs), the error row is run again.
  auto again = RunCommand({Kevo(), "suite", tasks, "--budget", "3", "--out", out},
                          absl::Minutes(2));
  ASSERT_EQ(again.exit_code, 3) << again.err << again.out;
  EXPECT_NE(again.err.find("2 of 3 tasks already finished, skipped"), std::string::npos)
      << again.err;
  auto j2 = nlohmann::json::parse(ReadAll(out));
  ASSERT_EQ(j2["tasks"].size(), 3u);
  for (const auto& row : j2["tasks"]) {
    if (row["task"] != "broken") {
      EXPECT_EQ(row["job_id"], rows[row["task"]]["job_id"]);
    }
  }
  fs::remove_all(dir);
}

TEST(SuiteTest, FindsKernelBenchProblemsBesideNativeTasksAndSkipsOtherPython) {
  std::string dir = MakeTempDir("kevo-suite-kb");
  std::string tasks = dir + "/tasks";
  fs::create_directories(tasks + "/level1");
  CopyTask("vector_add", tasks, "value: 16777216", "value: 262144");
  const std::string data = SourceDir() + "/tests/data/kernelbench/";
  fs::copy_file(data + "relu.py", tasks + "/relu.py");
  fs::copy_file(data + "matmul.py", tasks + "/level1/matmul.py");
  // A script beside the problems (as a KernelBench checkout has): not a task.
  std::ofstream(tasks + "/level1/helper.py") << "import torch\nprint(torch.__version__)\n";

  std::string out = dir + "/results.json";
  auto r = RunCommand({Kevo(), "suite", tasks, "--platform", "cpu", "--budget", "1", "--max-wall",
                       "240", "--out", out},
                      absl::Minutes(9));
  // 0 where the worker has PyTorch, 3 where the KernelBench jobs found no
  // correct kernel (no python3-torch); never a usage or load error.
  ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 3) << r.exit_code << r.err << r.out;
  auto j = nlohmann::json::parse(ReadAll(out));
  std::map<std::string, nlohmann::json> rows;
  for (const auto& row : j["tasks"]) rows[row["task"].get<std::string>()] = row;
  ASSERT_EQ(rows.size(), 3u) << j.dump(2);
  ASSERT_TRUE(rows.contains("vector_add") && rows.contains("relu.py") &&
              rows.contains("level1/matmul.py"))
      << j.dump(2);
  EXPECT_EQ(rows["vector_add"]["status"], "OK") << rows["vector_add"].dump(2);
  for (const char* name : {"relu.py", "level1/matmul.py"}) {
    const auto& row = rows[name];
    // Loaded as a KernelBench problem, not rejected as a folder without a task file.
    EXPECT_EQ(row["op_family"], "kernelbench") << row.dump(2);
    if (row["status"] == "OK") {
      const std::string kernel = row["best_kernel_path"].get<std::string>();
      EXPECT_TRUE(kernel.ends_with(".py") && fs::exists(kernel)) << row.dump(2);
      EXPECT_NE(ReadAll(kernel).find("class ModelNew"), std::string::npos) << kernel;
    }
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kevo::testing
