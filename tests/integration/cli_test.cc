// The `kevo` command as a user runs it: embedded evaluation with --json, the
// exit status of a failing candidate, and the error for a malformed task file.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "tests/testing/process.h"

namespace kevo::testing {
namespace {

std::string Kevo() { return BinDir() + "/kevo"; }
std::string Tasks() { return SourceDir() + "/tasks"; }

TEST(CliTest, EvalSoftmaxFastCandidateIsOkFasterAndValidatedPerSeedAndShape) {
  auto r = RunCommand({Kevo(), "eval", Tasks() + "/softmax", Tasks() + "/softmax/examples/fast.cc",
                       "--json"},
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
  auto r = RunCommand({Kevo(), "eval", Tasks() + "/vector_add",
                       Tasks() + "/vector_add/examples/wrong.cc", "--json"},
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
  std::filesystem::copy(Tasks() + "/vector_add", dir + "/vector_add",
                        std::filesystem::copy_options::recursive);
  {
    std::ofstream out(dir + "/vector_add/task.textproto", std::ios::app);
    out << "inputs {\n  name: \"w\"\n  shpe: [\"n\"]\n}\n";
  }
  int lines = 0;
  {
    std::ifstream in(dir + "/vector_add/task.textproto");
    for (std::string l; std::getline(in, l);) ++lines;
  }
  auto r = RunCommand({Kevo(), "eval", dir + "/vector_add", Tasks() + "/vector_add/examples/fast.cc"},
                      absl::Minutes(1));
  EXPECT_EQ(r.exit_code, 1);
  // The bad field is on the second-to-last line of the file.
  std::string where = "task.textproto:" + std::to_string(lines - 1) + ":";
  EXPECT_NE(r.err.find(where), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("shpe"), std::string::npos) << r.err;
  std::filesystem::remove_all(dir);
}

TEST(CliTest, UnknownCommandIsAUsageError) {
  auto r = RunCommand({Kevo(), "frobnicate"}, absl::Seconds(10));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown command"), std::string::npos);
}

}  // namespace
}  // namespace kevo::testing
