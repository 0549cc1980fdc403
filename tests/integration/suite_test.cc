// `kevo suite` as a user runs it: a folder of small tasks (starter tasks with a
// small timed shape) and one malformed task, searched embedded with a small
// budget. Every task gets a row in the JSON and the CSV, the malformed one an
// error row while the others still finish; a second run over the same
// results file skips the finished tasks. KernelBench problems under the folder
// are tasks of the suite too, and a suite of them reports KernelBench's own
// metrics (fast_p against PyTorch eager and torch.compile).
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

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
void CopyTask(const std::string& name, const std::string& dir, const std::string& big, const std::string& small) {
  ASSERT_TRUE(CopyTaskReplacing(name, dir, big, small)) << name;
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
  // Rows and resuming are what this test is about, not timing: a short
  // profile and no production baselines (PyTorch, timed beside each candidate).
  auto r = RunCommand({Kevo(), "suite", tasks, "--platform", "cpu", "--budget", "3", "--jobs", "2", "--out", out,
                       "--profile-cap", "0.3", "--no-production"},
                      absl::Minutes(5));
  // 3: not every task ended with a correct kernel (the broken one).
  ASSERT_EQ(r.exit_code, 3) << r.err << r.out;
  EXPECT_NE(r.out.find("vs median"), std::string::npos) << r.out;
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
    // The best time against the median of the job's three baselines.
    EXPECT_GT(row["median_baseline_time_s"].get<double>(), 0) << row.dump(2);
    EXPECT_NEAR(row["speedup_vs_median_baseline"].get<double>(),
                row["median_baseline_time_s"].get<double>() / row["best_time_s"].get<double>(), 1e-9);
    EXPECT_EQ(row["evaluations"].get<int>(), 3);
    EXPECT_TRUE(fs::exists(row["best_kernel_path"].get<std::string>()));
  }
  EXPECT_EQ(rows["broken"]["status"], "ERROR");
  EXPECT_NE(rows["broken"]["error"].get<std::string>().find("shpe"), std::string::npos) << rows["broken"].dump(2);
  EXPECT_EQ(j["summary"]["tasks"], 3);
  EXPECT_EQ(j["summary"]["errors"], 1);
  // Native tasks only: no KernelBench block, columns or row fields.
  EXPECT_FALSE(j.contains("kernelbench")) << j.dump(2);
  EXPECT_FALSE(rows["relu"].contains("speedup_vs_eager")) << rows["relu"].dump(2);
  EXPECT_EQ(r.out.find("vs eager"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("KernelBench"), std::string::npos) << r.out;

  // The CSV beside it: a header and one line per task.
  std::string csv = ReadAll(dir + "/results/results.csv");
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 4) << csv;
  EXPECT_EQ(csv.rfind("task,family,", 0), 0u) << csv;
  EXPECT_EQ(csv.find("speedup_vs_eager"), std::string::npos) << csv;
  EXPECT_NE(csv.find("\nbroken,"), std::string::npos) << csv;

  // Resume: the finished tasks are skipped (same jobs), the error row is run again.
  auto again = RunCommand({Kevo(), "suite", tasks, "--budget", "3", "--out", out}, absl::Minutes(2));
  ASSERT_EQ(again.exit_code, 3) << again.err << again.out;
  EXPECT_NE(again.err.find("2 of 3 tasks already finished, skipped"), std::string::npos) << again.err;
  auto j2 = nlohmann::json::parse(ReadAll(out));
  ASSERT_EQ(j2["tasks"].size(), 3u);
  for (const auto& row : j2["tasks"]) {
    if (row["task"] != "broken") {
      EXPECT_EQ(row["job_id"], rows[row["task"]]["job_id"]);
    }
  }
  fs::remove_all(dir);
}

// Counts the evaluations the worker of an embedded suite finished so far.
int FinishedEvaluations(const std::string& db) {
  const std::string log = ReadAll(db + "/worker.log");
  int n = 0;
  for (size_t at = 0; (at = log.find(" finished e-", at)) != std::string::npos; ++at) ++n;
  return n;
}

// Starts `kevo suite` and SIGKILLs it once it has started its job and the
// worker has finished `after` evaluations in all: an interruption in the
// middle of a job. (Counting evaluations alone, a run could be killed before
// it had opened the store and said what it did with the earlier run's job.)
void RunSuiteAndKillIt(const std::vector<std::string>& argv, const std::string& db, const std::string& log, int after) {
  auto child = ChildProcess::Start(argv, log);
  ASSERT_TRUE(child.ok()) << child.status();
  const absl::Time deadline = absl::Now() + absl::Minutes(3);
  while ((FinishedEvaluations(db) < after || !absl::StrContains(ReadAll(log), ": started")) && (*child)->Running() &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(100));
  }
  ASSERT_TRUE((*child)->Running()) << "the suite ended before it could be interrupted: " << ReadAll(log);
  ASSERT_GE(FinishedEvaluations(db), after) << ReadAll(log);
  (*child)->Kill(SIGKILL);
  ASSERT_TRUE((*child)->Wait(absl::Seconds(30)).ok());
}

// The job id in "<what> job <id>" in `text`, or "".
std::string JobAfter(const std::string& text, const std::string& what) {
  const size_t at = text.find(what + " job ");
  if (at == std::string::npos) return "";
  const size_t start = at + what.size() + 5;
  return text.substr(start, text.find_first_of(" \n", start) - start);
}

TEST(SuiteTest, AResumedSuiteContinuesTheJobItsInterruptedRunLeftAndCancelsAStaleOne) {
  std::string dir = MakeTempDir("kevo-suite-resume");
  std::string tasks = dir + "/tasks";
  fs::create_directories(tasks);
  CopyTask("relu", tasks, "value: 8388608", "value: 262144");
  const std::string db = dir + "/db", out = dir + "/results/results.json";
  auto suite = [&](const std::string& budget) {
    // Resuming is what this test is about, not timing: no production
    // baselines and a short profile. A short lease: the evaluation a killed
    // run left in flight goes back to the queue after 10 s, not 120.
    std::vector<std::string> argv = {Kevo(), "suite", tasks, "--budget", budget, "--jobs",
                                     "1",    "--db",  db,    "--out",    out};
    argv.insert(argv.end(), {"--no-production", "--profile-cap", "0.3", "--lease-seconds", "10"});
    return argv;
  };
  // Interrupted with budget 3; the coordinator resumes that job whenever the
  // db is opened again. Run again with budget 2: another spec, so that job is
  // cancelled (it would take the worker's slot) and a new one submitted.
  RunSuiteAndKillIt(suite("3"), db, dir + "/first.log", 1);
  RunSuiteAndKillIt(suite("2"), db, dir + "/second.log", FinishedEvaluations(db) + 1);
  const std::string second = ReadAll(dir + "/second.log");
  const std::string stale = JobAfter(second, "cancelled");
  ASSERT_FALSE(stale.empty()) << second;
  EXPECT_EQ(JobAfter(second, "continues"), "") << second;

  // Run again with budget 2: the second run's job is this run's, so it is
  // continued to the end of its budget, not submitted again. (The stale job
  // may be cancelled again: a cancelled job ends when its evaluations in
  // flight are recorded, and the second run was killed before that.)
  auto third = RunCommand(suite("2"), absl::Minutes(5));
  ASSERT_EQ(third.exit_code, 0) << third.err << third.out;
  const std::string continued = JobAfter(third.err, "relu continues");
  ASSERT_FALSE(continued.empty()) << third.err;
  EXPECT_NE(continued, stale);
  const std::string cancelled_again = JobAfter(third.err, "cancelled");
  EXPECT_TRUE(cancelled_again.empty() || cancelled_again == stale) << third.err;
  auto j = nlohmann::json::parse(ReadAll(out));
  ASSERT_EQ(j["tasks"].size(), 1u) << j.dump(2);
  const auto& row = j["tasks"][0];
  EXPECT_EQ(row["job_id"], continued) << row.dump(2);
  EXPECT_EQ(row["status"], "OK") << row.dump(2);
  EXPECT_EQ(row["evaluations"], 2) << row.dump(2);
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
  auto r = RunCommand({Kevo(), "suite", tasks, "--platform", "cpu", "--budget", "1", "--max-wall", "240", "--out", out},
                      absl::Minutes(9));
  // 0 where the worker has PyTorch, 3 where the KernelBench jobs found no
  // correct kernel (no python3-torch); never a usage or load error.
  ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 3) << r.exit_code << r.err << r.out;
  auto j = nlohmann::json::parse(ReadAll(out));
  std::map<std::string, nlohmann::json> rows;
  for (const auto& row : j["tasks"]) rows[row["task"].get<std::string>()] = row;
  ASSERT_EQ(rows.size(), 3u) << j.dump(2);
  ASSERT_TRUE(rows.contains("vector_add") && rows.contains("relu.py") && rows.contains("level1/matmul.py"))
      << j.dump(2);
  EXPECT_EQ(rows["vector_add"]["status"], "OK") << rows["vector_add"].dump(2);
  EXPECT_FALSE(rows["vector_add"].contains("speedup_vs_eager")) << rows["vector_add"].dump(2);
  // KernelBench's metrics are over the two problems, not the native task.
  EXPECT_EQ(j["kernelbench"]["problems"], 2) << j.dump(2);
  for (const char* name : {"relu.py", "level1/matmul.py"}) {
    const auto& row = rows[name];
    // Loaded as a KernelBench problem, not rejected as a folder without a task file.
    EXPECT_EQ(row["op_family"], "kernelbench") << row.dump(2);
    EXPECT_TRUE(row.contains("speedup_vs_eager")) << row.dump(2);
    if (row["status"] == "OK") {
      const std::string kernel = row["best_kernel_path"].get<std::string>();
      EXPECT_TRUE(kernel.ends_with(".py") && fs::exists(kernel)) << row.dump(2);
      EXPECT_NE(ReadAll(kernel).find("class ModelNew"), std::string::npos) << kernel;
    }
  }
  fs::remove_all(dir);
}

// Whether /usr/bin/python3's torch (what the cpu worker's KernelBench runner
// uses) has torch.compile: Debian's 1.13 has not.
bool WorkerTorchHasCompile() {
  auto r = RunCommand({"/usr/bin/python3", "-c", "import sys, torch; sys.exit(0 if hasattr(torch, 'compile') else 1)"},
                      absl::Minutes(2));
  return r.exit_code == 0;
}

TEST(SuiteTest, AKernelBenchSuiteReportsFastPAgainstEagerAndTorchCompileAndResumesOlderRows) {
  std::string dir = MakeTempDir("kevo-suite-fastp");
  const std::string out = dir + "/results.json", problems = dir + "/problems";
  // The problems of tests/data/kernelbench (copied, so that a problem added
  // there later does not change what this test counts).
  fs::create_directories(problems);
  for (const char* name : {"relu.py", "matmul.py"}) {
    fs::copy_file(SourceDir() + "/tests/data/kernelbench/" + name, problems + "/" + name);
  }
  auto r =
      RunCommand({Kevo(), "suite", problems, "--platform", "cpu", "--budget", "1", "--max-wall", "240", "--out", out},
                 absl::Minutes(9));
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  auto j = nlohmann::json::parse(ReadAll(out));
  ASSERT_EQ(j["tasks"].size(), 2u) << j.dump(2);
  ASSERT_TRUE(j.contains("kernelbench")) << j.dump(2);
  const nlohmann::json kb = j["kernelbench"];
  EXPECT_EQ(kb["problems"], 2) << kb.dump(2);
  EXPECT_EQ(kb["correct"], 2) << kb.dump(2);
  EXPECT_EQ(kb["baseline_problems"]["eager"], 2) << kb.dump(2);
  // Each fast_p against eager is the fraction of rows more than p times faster.
  int evaluations = 0;
  double wall_s = 0;
  for (const auto& row : j["tasks"]) {
    EXPECT_EQ(row["speedup_vs_eager"], row["speedup"]) << row.dump(2);
    EXPECT_NEAR(row["seconds_per_evaluation"].get<double>(),
                row["wall_s"].get<double>() / row["evaluations"].get<int>(), 1e-9);
    evaluations += row["evaluations"].get<int>();
    wall_s += row["wall_s"].get<double>();
  }
  for (const auto& [p, threshold] :
       std::vector<std::pair<std::string, double>>{{"0", 0}, {"1", 1}, {"1.5", 1.5}, {"2", 2}}) {
    int fast = 0;
    for (const auto& row : j["tasks"]) fast += row["speedup_vs_eager"].get<double>() > threshold;
    ASSERT_TRUE(kb["fast_p"]["eager"][p].is_number()) << kb.dump(2);
    EXPECT_DOUBLE_EQ(kb["fast_p"]["eager"][p].get<double>(), fast / 2.0) << p << kb.dump(2);
  }
  EXPECT_DOUBLE_EQ(kb["fast_p"]["eager"]["0"].get<double>(), 1.0);
  EXPECT_EQ(kb["evaluations"], evaluations);
  EXPECT_NEAR(kb["seconds_per_evaluation"].get<double>(), wall_s / evaluations, 1e-9);
  if (!WorkerTorchHasCompile()) {
    // No torch.compile on the worker: against it is n/a, not 0.
    EXPECT_EQ(kb["baseline_problems"]["compile"], 0) << kb.dump(2);
    for (const char* p : {"0", "1", "1.5", "2"}) EXPECT_EQ(kb["fast_p"]["compile"][p], "n/a") << kb.dump(2);
    EXPECT_NE(kb["compile_unavailable"].get<std::string>().find("torch.compile"), std::string::npos) << kb.dump(2);
    for (const auto& row : j["tasks"]) {
      EXPECT_TRUE(row["speedup_vs_compile"].is_null()) << row.dump(2);
      EXPECT_FALSE(row["torch_compile_note"].get<std::string>().empty()) << row.dump(2);
    }
    EXPECT_NE(r.out.find("torch.compile n/a: "), std::string::npos) << r.out;
  } else {
    EXPECT_EQ(kb["baseline_problems"]["compile"], 2) << kb.dump(2);
    EXPECT_TRUE(kb["fast_p"]["compile"]["1"].is_number()) << kb.dump(2);
  }
  // The table's KernelBench columns and block.
  for (const char* text : {"vs eager", "vs compile", "s/eval", "KernelBench: 2 problems, 2 correct (100.0%)",
                           "fast_1.5", "PyTorch eager  2 ", "seconds per evaluation: "}) {
    EXPECT_NE(r.out.find(text), std::string::npos) << text << "\n" << r.out;
  }
  EXPECT_NE(ReadAll(dir + "/results.csv").find(",speedup_vs_eager,speedup_vs_compile,seconds_per_evaluation\n"),
            std::string::npos);

  // Resume from a results file with one row as this run wrote it (nulls where
  // nothing was measured) and one as written before these fields existed:
  // both are read, skipped, and counted in the block (fast_p against eager
  // from their speedup).
  nlohmann::json old = j;
  old.erase("kernelbench");
  for (auto& row : old["tasks"]) {
    if (row["task"] != "relu.py") continue;
    for (const char* key : {"speedup_vs_eager", "speedup_vs_compile", "torch_compile_time_s", "torch_compile_note",
                            "seconds_per_evaluation"}) {
      row.erase(key);
    }
  }
  std::ofstream(out, std::ios::trunc) << old.dump(2);
  auto again = RunCommand({Kevo(), "suite", problems, "--platform", "cpu", "--budget", "1", "--out", out, "--markdown"},
                          absl::Minutes(2));
  ASSERT_EQ(again.exit_code, 0) << again.err << again.out;
  EXPECT_NE(again.err.find("2 of 2 tasks already finished, skipped"), std::string::npos) << again.err;
  auto j2 = nlohmann::json::parse(ReadAll(out));
  EXPECT_EQ(j2["kernelbench"]["fast_p"]["eager"], kb["fast_p"]["eager"]) << j2.dump(2);
  EXPECT_EQ(j2["kernelbench"]["problems"], 2);
  for (const auto& row : j2["tasks"]) EXPECT_EQ(row["speedup_vs_eager"], row["speedup"]) << row.dump(2);
  EXPECT_NE(again.out.find("| PyTorch eager | 2 | 100.0% (2/2) |"), std::string::npos) << again.out;
  EXPECT_NE(again.out.find("| vs eager | vs compile | s/eval |"), std::string::npos) << again.out;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kevo::testing
