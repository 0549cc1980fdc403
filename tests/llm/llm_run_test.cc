// End to end: `kevo run tasks/softmax --platform cpu --proposer llm` against
// the fake-llm-server process (the real HTTP wire protocol), which answers
// four calls from files: a correct kernel, one that does not compile, prose
// without code, and an answer with two candidates (one correct, one wrong).
// The job finishes its budget of 4 evaluations, each kernel gets its status,
// and `kevo llm-log` shows every call with its prompt — the parent's feedback
// and the retrieved knowledge-base documents in it — and the nodes it made.
// (--no-skills changes nothing in a fresh store; the job reports it as stored.)
#include <filesystem>

#include "absl/strings/str_cat.h"
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/testing/process.h"

namespace kevo::testing {
namespace {

using ::testing::HasSubstr;

std::string Answer(const std::string& label, const std::string& code) {
  return absl::StrCat("Transformation: ", label, "\n```cpp\n", code, "```\n");
}

TEST(LlmRunTest, KevoRunWithTheLlmProposerAgainstTheFakeServer) {
  const std::string dir = MakeTempDir("kevo-llm-run");
  const std::string softmax = SourceDir() + "/tasks/softmax";
  WriteTextFile(dir + "/1.md", Answer("online softmax with SIMD", ReadTextFile(softmax + "/examples/fast.cc")));
  WriteTextFile(dir + "/2.md", Answer("broken on purpose",
                                      "#include <cstdint>\nextern \"C\" void softmax(const float* x, float* y, int64_t "
                                      "rows, int64_t cols) { this is not C++; }\n"));
  WriteTextFile(dir + "/3.md", "I would rather not write a kernel today.\n");
  WriteTextFile(dir + "/4.md",
                absl::StrCat("Two more.\n", Answer("the reference, plainly", ReadTextFile(softmax + "/reference.cc")),
                             Answer("skip the normalisation", ReadTextFile(softmax + "/examples/no_normalize.cc"))));

  auto server = ChildProcess::Start({BinDir() + "/fake-llm-server", "--answers",
                                     absl::StrCat(dir, "/1.md,", dir, "/2.md,", dir, "/3.md,", dir, "/4.md")},
                                    dir + "/fake-llm-server.log");
  ASSERT_TRUE(server.ok()) << server.status();
  auto address = (*server)->WaitForLine("listening ", absl::Seconds(30));
  ASSERT_TRUE(address.ok()) << address.status();
  WriteTextFile(dir + "/llm.conf", absl::StrCat("[endpoint fake]\nbase_url = http://", *address,
                                                "/v1\nmodel = fake-coder\nmax_retries = 1\n"));

  // A short profile: the proposer's calls and each kernel's status are what
  // this test checks, not the timing's precision.
  auto run = RunCommand({BinDir() + "/kevo", "run", softmax, "--platform", "cpu", "--proposer", "llm", "--llm-config",
                         dir + "/llm.conf", "--budget", "4", "--db", dir + "/db", "--out", dir + "/best.cc",
                         "--no-skills", "--json", "--profile-cap", "0.3"},
                        absl::Minutes(8));
  ASSERT_EQ(run.exit_code, 0) << run.err << run.out;
  auto job = nlohmann::json::parse(run.out);
  EXPECT_EQ(job["job_state"], "JOB_DONE");
  EXPECT_EQ(job["stop_reason"], "evaluation budget spent");
  EXPECT_EQ(job["evaluations_total"], 4);
  EXPECT_EQ(job["no_skills"], true);  // --no-skills reached the job's stored spec
  EXPECT_EQ(job["evaluations"]["OK"], 2) << run.out;
  EXPECT_EQ(job["evaluations"]["COMPILE_ERROR"], 1) << run.out;
  EXPECT_EQ(job["evaluations"]["WRONG_ANSWER"], 1) << run.out;
  // The good kernel beats the naive reference; its figure against PyTorch is
  // measured too (whether it wins depends on the load beside this test).
  EXPECT_GT(job["speedup_vs_reference"].get<double>(), 1.0) << run.out;
  EXPECT_GT(job["speedup_vs_production"].get<double>(), 0.0) << run.out;
  EXPECT_EQ(job["fitness_baseline"], "production") << run.out;
  const std::string job_id = job["job_id"];

  auto log = RunCommand({BinDir() + "/kevo", "llm-log", job_id, "--db", dir + "/db", "--json"}, absl::Minutes(1));
  ASSERT_EQ(log.exit_code, 0) << log.err;
  auto calls = nlohmann::json::parse(log.out);
  ASSERT_EQ(calls.size(), 4u) << log.out.substr(0, 2000);
  std::vector<std::string> outcomes;
  for (const auto& c : calls) outcomes.push_back(c["outcome"]);
  EXPECT_THAT(outcomes, ::testing::ElementsAre("ok", "ok", "no_code", "ok"));
  for (const auto& c : calls) {
    EXPECT_EQ(c["endpoint"], "fake");
    EXPECT_EQ(c["model"], "fake-coder");
    EXPECT_GT(c["prompt_tokens"].get<int64_t>(), 0);
    EXPECT_TRUE(c["settled"].get<bool>()) << c.dump();
    // Every prompt carries retrieved knowledge-base documents (docs/kb).
    bool has_kb = false;
    for (const auto& part : c["prompt_included"]) has_kb |= part.get<std::string>().rfind("kb:", 0) == 0;
    EXPECT_TRUE(has_kb) << c["prompt_included"].dump();
    EXPECT_FALSE(c["kb_documents"].empty());
  }
  // The good kernel, then the broken one, each with its status.
  ASSERT_EQ(calls[0]["nodes"].size(), 1u);
  EXPECT_EQ(calls[0]["nodes"][0]["status"], "OK");
  EXPECT_EQ(calls[0]["parent_id"], "");
  ASSERT_EQ(calls[1]["nodes"].size(), 1u);
  EXPECT_EQ(calls[1]["nodes"][0]["status"], "COMPILE_ERROR");
  EXPECT_EQ(calls[2]["nodes"].size(), 0u);
  ASSERT_EQ(calls[3]["nodes"].size(), 2u);
  EXPECT_EQ(calls[3]["nodes"][0]["status"], "OK");
  EXPECT_EQ(calls[3]["nodes"][1]["status"], "WRONG_ANSWER");
  // The second call improves the first call's kernel: its prompt holds that
  // kernel and what its evaluation said.
  EXPECT_EQ(calls[1]["parent_id"], calls[0]["nodes"][0]["node_id"]);
  const std::string prompt = calls[1]["prompt"][1]["content"];
  EXPECT_THAT(prompt,
              HasSubstr("## The kernel to improve (node " + calls[0]["nodes"][0]["node_id"].get<std::string>()));
  EXPECT_THAT(prompt, HasSubstr("Status: OK"));
  EXPECT_THAT(prompt, HasSubstr("of the roofline"));
  EXPECT_THAT(prompt, HasSubstr("Bottleneck: "));
  EXPECT_THAT(prompt, HasSubstr("## Hardware and optimisation notes (knowledge base)"));

  // The table names both calls and what became of them.
  auto table = RunCommand({BinDir() + "/kevo", "llm-log", job_id, "--db", dir + "/db"}, absl::Minutes(1));
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr(calls[0]["call_id"].get<std::string>()));
  EXPECT_THAT(table.out, HasSubstr(calls[1]["call_id"].get<std::string>()));
  EXPECT_THAT(table.out, HasSubstr("COMPILE_ERROR"));
  EXPECT_THAT(table.out, HasSubstr("no_code"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kevo::testing
