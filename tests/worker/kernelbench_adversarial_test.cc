// Adversarial KernelBench candidates against the cpu worker's judge: each
// file under tests/data/kernelbench/adversarial/ is a ModelNew that tries to
// look correct or fast without being so (the classes of reward hacking
// KernelBench's own adversarial tests name, and more), evaluated end to end
// as kernelbench_eval_test.cc does: the real CPU backend, the real
// kevo-runner-kernelbench under /usr/bin/python3 with Debian's PyTorch, the
// real sandbox. docs/kernelbench.md ("Adversarial candidates") lists them.
//
// A candidate's first line says what the judge must make of it:
//   # expect: rejected  any status but OK; a `# verdict: STATUS[|STATUS] text`
//                       line names the status and a phrase of the message
//                       (which defence caught it)
//   # expect: honest    OK, at a speedup a correct candidate can have
//   # expect: slow      OK, timed at no less than 90% of the 10 ms each of
//                       its calls costs, and slower than eager: its trick
//                       would have made it look fast
// the second line (`# class: ...`) what it tries, and an optional
// `# problem: F` the problem it targets (relu.py by default).
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "common/task/kernelbench.h"
#include "tests/testing/generated_doc.h"
#include "tests/worker/kernelbench_testing.h"
#include "worker/backends/cpu/cpu_backend.h"

namespace kevo::worker {
namespace {

using ::testing::AnyOfArray;
using ::testing::HasSubstr;

// Every call of a `slow` candidate sleeps 10 ms; the judge may take its
// transport's round trip out (bounded by a few times a trusted one, well
// under a millisecond), never the call's own cost.
constexpr double kSlowCallFloorS = 9e-3;
// A correct ReLU cannot be 100x PyTorch's own (kernelbench_eval_test.cc).
constexpr double kHonestSpeedupCeiling = 100;

std::string DataDir() { return kb_testing::KernelBenchDataDir(); }

struct Adversary {
  std::string name;  // the file's stem
  std::string source;
  std::string expect;  // rejected, honest or slow
  std::string what;    // the `# class:` line
  std::string problem = "relu.py";
  std::vector<std::string> verdict_statuses;  // for `rejected`
  std::string verdict_text;
};
void PrintTo(const Adversary& a, std::ostream* os) { *os << a.name; }

// The candidate at `path` with its header read; `expect` is empty when the
// first two lines are not `# expect:` and `# class:`.
Adversary ReadAdversary(const std::filesystem::path& path) {
  Adversary a;
  a.name = path.stem().string();
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  a.source = text.str();
  std::vector<std::string> lines = absl::StrSplit(a.source, '\n');
  for (size_t i = 0; i < lines.size() && absl::StartsWith(lines[i], "#"); ++i) {
    absl::string_view line = lines[i];
    absl::string_view value = line;
    if (i == 0 && absl::ConsumePrefix(&value, "# expect: ")) a.expect = std::string(value);
    if (i == 1 && absl::ConsumePrefix(&value, "# class: ")) a.what = std::string(value);
    if (absl::ConsumePrefix(&value, "# problem: ")) a.problem = std::string(value);
    if (absl::ConsumePrefix(&value, "# verdict: ")) {
      std::pair<std::string, std::string> parts = absl::StrSplit(value, absl::MaxSplits(' ', 1));
      a.verdict_statuses = absl::StrSplit(parts.first, '|');
      a.verdict_text = parts.second;
    }
  }
  if (a.what.empty()) a.expect.clear();
  return a;
}

// The folder's candidates, in name order; read when the tests are listed,
// so a file added there is a test case at the next build.
std::vector<Adversary> Adversaries() {
  std::vector<Adversary> all;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(DataDir() + "/adversarial", ec)) {
    if (entry.path().extension() == ".py") all.push_back(ReadAdversary(entry.path()));
  }
  std::sort(all.begin(), all.end(), [](const Adversary& a, const Adversary& b) { return a.name < b.name; });
  return all;
}

std::string Explain(const v1::Evaluation& ev) { return kb_testing::ExplainKernelBench(ev); }

class KernelBenchAdversarialTest : public ::testing::TestWithParam<Adversary> {
 protected:
  static void SetUpTestSuite() {
    backend_ = kb_testing::NewKernelBenchBackend("kernelbench_adversarial_test");
    ASSERT_NE(backend_, nullptr);
  }
  static void TearDownTestSuite() { delete backend_; }

  static Backend* backend_;
};
Backend* KernelBenchAdversarialTest::backend_ = nullptr;

TEST_P(KernelBenchAdversarialTest, IsNotAcceptedAsFasterOrCorrect) {
  const Adversary& a = GetParam();
  ASSERT_FALSE(a.expect.empty()) << a.name << ": the first lines must be '# expect: ...' and '# class: ...'";
  absl::StatusOr<v1::Task> task = task::LoadTaskPath(DataDir() + "/" + a.problem);
  ASSERT_TRUE(task.ok()) << task.status();
  v1::Candidate candidate;
  candidate.set_language("python");
  candidate.set_source(a.source);
  const v1::Evaluation ev = backend_->Evaluate(*task, candidate, nullptr);
  // What caught it (or what it got), for a reader of the test's output.
  std::cout << a.name << " (" << a.what << ") on " << a.problem << ": " << Explain(ev) << "\n  speedup " << ev.speedup()
            << ", candidate median " << ev.timing().median_s() * 1e6 << " us, eager " << ev.baseline().median_s() * 1e6
            << " us\n";
  if (a.expect == "rejected") {
    EXPECT_NE(ev.status(), v1::OK) << Explain(ev);
    ASSERT_FALSE(a.verdict_statuses.empty()) << a.name << " has no '# verdict:' line";
    EXPECT_THAT(v1::EvalStatus_Name(ev.status()), AnyOfArray(a.verdict_statuses)) << Explain(ev);
    EXPECT_THAT(ev.diagnostics().message(), HasSubstr(a.verdict_text)) << Explain(ev);
    EXPECT_EQ(ev.speedup(), 0) << "a rejected candidate has no speedup";
  } else if (a.expect == "honest") {
    ASSERT_EQ(ev.status(), v1::OK) << Explain(ev);
    EXPECT_GT(ev.speedup(), 0);
    EXPECT_LT(ev.speedup(), kHonestSpeedupCeiling) << Explain(ev);
  } else if (a.expect == "slow") {
    ASSERT_EQ(ev.status(), v1::OK) << Explain(ev);
    EXPECT_GE(ev.timing().median_s(), kSlowCallFloorS) << "timed at less than its calls cost: " << Explain(ev);
    EXPECT_GT(ev.speedup(), 0);
    EXPECT_LT(ev.speedup(), 1) << "a candidate that sleeps 10 ms a call is slower than eager: " << Explain(ev);
  } else {
    FAIL() << a.name << ": unknown expectation '" << a.expect << "'";
  }
}

INSTANTIATE_TEST_SUITE_P(Candidates, KernelBenchAdversarialTest, ::testing::ValuesIn(Adversaries()),
                         [](const ::testing::TestParamInfo<Adversary>& info) { return info.param.name; });

// The set the issue asks for: at least 12 rejected candidates (here 14 or
// more) and an honest control, each file with its header.
TEST(KernelBenchAdversarialSetTest, HoldsFourteenRejectedCandidatesAndAnHonestOne) {
  const std::vector<Adversary> all = Adversaries();
  int rejected = 0, honest = 0;
  for (const Adversary& a : all) {
    EXPECT_FALSE(a.expect.empty()) << a.name << ": no '# expect:' and '# class:' header";
    rejected += a.expect == "rejected";
    honest += a.expect == "honest";
    if (a.expect == "rejected") {
      EXPECT_FALSE(a.verdict_statuses.empty()) << a.name << ": no '# verdict:'";
    }
  }
  EXPECT_GE(rejected, 14);
  EXPECT_GE(honest, 1);
}

// docs/reliability.md's KernelBench table is generated from this set: a row
// per candidate, with the outcome its test above enforces. A candidate added,
// removed or changed without the table is a failure here; KEVO_UPDATE_DOCS=1
// rewrites the table in the source tree instead.
std::string ReliabilityTable(const std::vector<Adversary>& all) {
  using ::kevo::testing::MarkdownCell;
  std::string out = "| platform | candidate | what it tries | what kevo does | status |\n|---|---|---|---|---|\n";
  for (const Adversary& a : all) {
    std::string does, status;
    if (a.expect == "rejected") {
      does = absl::StrCat("rejected: the message names \"", a.verdict_text, "\"");
      status = absl::StrJoin(a.verdict_statuses, " or ");
    } else if (a.expect == "slow") {
      does = "timed at its real cost (every call's 10 ms), slower than eager: the trick buys nothing";
      status = "OK, no gain";
    } else {
      does = "accepted: right on every checked call, at a speedup a correct kernel can have";
      status = "OK";
    }
    absl::StrAppend(&out, "| cpu (KernelBench, Python) | `", a.name, "` | ", MarkdownCell(a.what), " | ",
                    MarkdownCell(does), " | ", status, " |\n");
  }
  return out;
}

TEST(KernelBenchAdversarialSetTest, ReliabilityTableMatchesTheCandidates) {
  const std::string failure = ::kevo::testing::MatchGeneratedSection(
      ::kevo::testing::SourceDir() + "/docs/reliability.md", "kernelbench_adversarial_test",
      ReliabilityTable(Adversaries()),
      "KEVO_UPDATE_DOCS=1 build/tests/kernelbench_adversarial_test --gtest_filter='*ReliabilityTable*'");
  EXPECT_EQ(failure, "");
}

}  // namespace
}  // namespace kevo::worker
