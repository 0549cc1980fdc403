// The `kevo` command as a user runs it: embedded evaluation with --json, the
// exit status of a failing candidate, and the error for a malformed task file.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/testing/process.h"

namespace kevo::testing {
namespace {

std::string Kevo() { return BinDir() + "/kevo"; }
std::string Tasks() { return SourceDir() + "/tasks"; }

TEST(CliTest, EvalSoftmaxFastCandidateIsOkFasterAndValidatedPerSeedAndShape) {
  auto r = RunCommand({Kevo(), "eval", Tasks() + "/softmax", Tasks() + "/softmax/examples/fast.cc", "--json"},
                      absl::Minutes(5));
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["status"], "OK") << r.out;
  EXPECT_GT(j["speedup"].get<double>(), 1.0);
  EXPECT_GT(j["roofline_fraction"].get<double>(), 0.0);
  EXPECT_GT(j["baseline_time_s"].get<double>(), 0.0);
  EXPECT_GT(j["time_s"].get<double>(), 0.0);
  // At least 3 seeds x 2 shapes, each one passing, and both shapes present.
  ASSERT_GE(j["validation"].size(), 6u);
  std::set<std::string> bindings;
  std::set<uint64_t> seeds;
  for (const auto& v : j["validation"]) {
    EXPECT_EQ(v["status"], "OK");
    bindings.insert(v["binding"].get<std::string>());
    seeds.insert(v["seed"].get<uint64_t>());
  }
  EXPECT_GE(bindings.size(), 2u);
  EXPECT_GE(seeds.size(), 3u);
}

TEST(CliTest, EvalWrongCandidateExitsThreeWithWrongAnswer) {
  auto r = RunCommand({Kevo(), "eval", Tasks() + "/vector_add", Tasks() + "/vector_add/examples/wrong.cc", "--json"},
                      absl::Minutes(5));
  ASSERT_EQ(r.exit_code, 3) << r.err << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["status"], "WRONG_ANSWER");
  bool has_bad_index = false;
  for (const auto& v : j["validation"]) has_bad_index |= v["first_bad_index"].get<int64_t>() >= 0;
  EXPECT_TRUE(has_bad_index);
}

TEST(CliTest, MalformedTaskFileNamesFileLineAndProblem) {
  std::string dir = MakeTempDir("kevo-badtask");
  std::filesystem::copy(Tasks() + "/vector_add", dir + "/vector_add", std::filesystem::copy_options::recursive);
  {
    std::ofstream out(dir + "/vector_add/task.textproto", std::ios::app);
    out << "inputs {\n  name: \"w\"\n  shpe: [\"n\"]\n}\n";
  }
  int lines = 0;
  {
    std::ifstream in(dir + "/vector_add/task.textproto");
    for (std::string l; std::getline(in, l);) ++lines;
  }
  auto r =
      RunCommand({Kevo(), "eval", dir + "/vector_add", Tasks() + "/vector_add/examples/fast.cc"}, absl::Minutes(1));
  EXPECT_EQ(r.exit_code, 1);
  // The bad field is on the second-to-last line of the file.
  std::string where = "task.textproto:" + std::to_string(lines - 1) + ":";
  EXPECT_NE(r.err.find(where), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("shpe"), std::string::npos) << r.err;
  std::filesystem::remove_all(dir);
}

// A binary file as the candidate is refused before anything starts, naming
// the file and the first byte that is not text (it used to end in an empty
// UNIMPLEMENTED from the protobuf layer).
TEST(CliTest, ABinaryCandidateFileIsAClearError) {
  std::string dir = MakeTempDir("kevo-binary");
  WriteTextFile(dir + "/kernel.cc", std::string("int f() { return 1; }\n") + '\xff' + '\x00' + "junk");
  auto r = RunCommand({Kevo(), "eval", Tasks() + "/vector_add", dir + "/kernel.cc"}, absl::Minutes(1));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("kernel.cc is not a source file: byte 22 is not UTF-8 text"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("UNIMPLEMENTED"), std::string::npos) << r.err;
  std::filesystem::remove_all(dir);
}

// A kernel file that kevo writes names its extra compiler flags on its first
// line ("// kevo-flags: ..."); `kevo eval` compiles the file with them, so the
// kernel is measured as the search measured it.
TEST(CliTest, EvalAppliesTheFlagsLineOfAKernelFile) {
  const std::string dir = MakeTempDir("kevo-flagsline");
  const std::string body = "#ifndef KEVO_FLAGS_LINE_READ\n#error the kevo-flags line was not applied\n#endif\n" +
                           ReadTextFile(Tasks() + "/vector_add/examples/fast.cc");
  WriteTextFile(dir + "/with.cc", "// kevo-flags: -DKEVO_FLAGS_LINE_READ -O3\n" + body);
  WriteTextFile(dir + "/without.cc", body);
  // Timed at 1 Mi elements, not 16 Mi: the flags are under test, not the timing.
  ASSERT_TRUE(CopyTaskReplacing("vector_add", dir, "value: 16777216", "value: 1048576"));
  auto with = RunCommand({Kevo(), "eval", dir + "/vector_add", dir + "/with.cc", "--json"}, absl::Minutes(5));
  ASSERT_EQ(with.exit_code, 0) << with.err << with.out;
  EXPECT_EQ(nlohmann::json::parse(with.out)["status"], "OK");
  auto without = RunCommand({Kevo(), "eval", dir + "/vector_add", dir + "/without.cc", "--json"}, absl::Minutes(5));
  ASSERT_EQ(without.exit_code, 3) << without.err << without.out;
  EXPECT_EQ(nlohmann::json::parse(without.out)["status"], "COMPILE_ERROR");
  std::filesystem::remove_all(dir);
}

// `kevo run TASK_DIR --platform cpu --budget N --json`, its database in
// DIR/db and its best kernel in DIR/best.cc; a short profile (the runs'
// results, not their precision, are what the tests read).
CommandResult RunSearch(const std::string& task_dir, int budget, const std::string& dir) {
  return RunCommand({Kevo(), "run", task_dir, "--platform", "cpu", "--budget", std::to_string(budget), "--json", "--db",
                     dir + "/db", "--out", dir + "/best.cc", "--profile-cap", "0.3"},
                    absl::Minutes(5));
}

// `kevo run` writes the best kernel with the flags it was compiled with: on
// box_cox the first seed is elementwise_rows' default, whose libmvec calls
// compile with -fno-math-errno.
TEST(CliTest, RunWritesTheBestKernelWithItsFlags) {
  const std::string dir = MakeTempDir("kevo-runflags");
  auto r = RunSearch(Tasks() + "/box_cox", 1, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["status"], "OK") << r.out;
  const std::string flags = j["best_kernel_flags"].get<std::string>();
  ASSERT_NE(flags.find("-fno-math-errno"), std::string::npos) << r.out;
  const std::string text = ReadTextFile(dir + "/best.cc");
  EXPECT_EQ(text.substr(0, text.find('\n')), "// kevo-flags: " + flags);
  std::filesystem::remove_all(dir);
}

// `kevo nodes JOB --db DIR` reads a finished `kevo run --db DIR` job's tree:
// every evaluated node with the times its evaluation measured, in creation
// order, the job's best (chosen side by side, not always the highest
// fitness) being the node the run names, with the run's speedup; and the run's JSON carries
// the median of those baselines with the best time against it.
TEST(CliTest, NodesListsAFinishedRunsTreeAndTheRunItsMedianBaseline) {
  const std::string dir = MakeTempDir("kevo-nodes");
  // Timed at 1 Mi elements, not 16 Mi: about 3 s an evaluation instead of 10.
  ASSERT_TRUE(CopyTaskReplacing("vector_add", dir, "value: 16777216", "value: 1048576"));
  auto r = RunSearch(dir + "/vector_add", 2, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  auto run = nlohmann::json::parse(r.out);
  auto n =
      RunCommand({Kevo(), "nodes", run["job_id"].get<std::string>(), "--db", dir + "/db", "--json"}, absl::Minutes(1));
  ASSERT_EQ(n.exit_code, 0) << n.err << n.out;
  auto nodes = nlohmann::json::parse(n.out);
  ASSERT_EQ(nodes.size(), 2u) << n.out;
  double best = 0;
  bool best_listed = false;
  double baselines = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    baselines += nodes[i]["baseline_time_s"].get<double>();
    EXPECT_EQ(nodes[i]["status"], "OK") << n.out;
    EXPECT_GT(nodes[i]["time_s"].get<double>(), 0);
    EXPECT_GT(nodes[i]["baseline_time_s"].get<double>(), 0);
    if (i > 0) {
      EXPECT_GT(nodes[i]["sequence"].get<int>(), nodes[i - 1]["sequence"].get<int>());
    }
    if (nodes[i]["node_id"] == run["best_node"]) {
      best = nodes[i]["fitness"].get<double>();
      best_listed = true;
    }
  }
  ASSERT_TRUE(best_listed) << "the run's best node " << run["best_node"] << " is not in " << n.out;
  EXPECT_DOUBLE_EQ(best, run["speedup"].get<double>());
  // Two evaluations: the median is their mean.
  EXPECT_EQ(run["baseline_evaluations"].get<int>(), 2) << r.out;
  EXPECT_NEAR(run["median_baseline_time_s"].get<double>(), baselines / 2, 1e-12) << r.out;
  EXPECT_NEAR(run["speedup_vs_median_baseline"].get<double>(), baselines / 2 / run["best_time_s"].get<double>(), 1e-9)
      << r.out;
  auto table = RunCommand({Kevo(), "nodes", run["job_id"].get<std::string>(), "--db", dir + "/db"}, absl::Minutes(1));
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find(run["best_node"].get<std::string>()), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("reference over 2 evaluations"), std::string::npos) << table.out;
  // The production figure leads: its columns, and the best node's value.
  EXPECT_NE(table.out.find("VS PROD"), std::string::npos) << table.out;
  EXPECT_GT(run["speedup_vs_production"].get<double>(), 0) << r.out;
  auto unknown = RunCommand({Kevo(), "nodes", "j-nope", "--db", dir + "/db"}, absl::Minutes(1));
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_NE(unknown.err.find("no nodes of job j-nope"), std::string::npos) << unknown.err;
  std::filesystem::remove_all(dir);
}

TEST(CliTest, UnknownCommandIsAUsageError) {
  auto r = RunCommand({Kevo(), "frobnicate"}, absl::Seconds(10));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown command"), std::string::npos);
}

}  // namespace
}  // namespace kevo::testing
