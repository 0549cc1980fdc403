// The LLM proposer's prompts: every part present where it belongs, the
// platform instructions, the bottleneck label, and the token budget trimming
// the least useful parts first, in TrimOrder().
#include "coordinator/llm/prompt.h"

#include <cstdlib>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/task/task_loader.h"

namespace kevo::llm {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

v1::Task Softmax() {
  const char* src = std::getenv("KEVO_SOURCE_DIR");
  auto task = task::LoadTaskDir(absl::StrCat(src == nullptr ? "." : src, "/tasks/softmax"));
  EXPECT_TRUE(task.ok()) << task.status();
  return task.ok() ? *task : v1::Task();
}

// A parent that failed validation, with compiler warnings, profile counters
// and three children.
proposer::ParentInfo WrongParent() {
  proposer::ParentInfo p;
  p.node_id = "n00007";
  p.candidate.set_language("c++");
  p.candidate.set_source("// PARENT-KERNEL-MARKER\nextern \"C\" void softmax() {}\n");
  v1::Evaluation& e = p.evaluation;
  e.set_status(v1::WRONG_ANSWER);
  e.mutable_diagnostics()->set_message("output y differs from the reference on binding odd");
  std::string compiler;
  for (int i = 0; i < 50; ++i) absl::StrAppend(&compiler, "source.cc:", i, ": warning: line ", i, "\n");
  e.mutable_diagnostics()->set_compiler_output(compiler);
  v1::CaseResult* c = e.add_validation();
  c->set_binding("odd");
  c->set_seed(2);
  c->set_status(v1::WRONG_ANSWER);
  c->set_output("y");
  c->set_max_abs_err(0.25);
  c->set_max_rel_err(3.5);
  c->set_first_bad_index(1001);
  e.add_validation()->set_status(v1::OK);
  (*e.mutable_profile())["achieved_bandwidth_gbs"] = 12.5;
  for (int i = 0; i < 3; ++i) {
    proposer::ChildInfo child;
    child.node_id = absl::StrCat("n0001", i);
    child.proposer = "llm:m";
    child.mutation = absl::StrCat("llm: SIBLING-", i);
    child.status = v1::COMPILE_ERROR;
    child.message = absl::StrCat("SIBLING-MESSAGE-", i);
    p.children.push_back(child);
  }
  return p;
}

std::vector<kb::KbDoc> Docs() {
  std::vector<kb::KbDoc> docs;
  for (int i = 0; i < 3; ++i) {
    kb::KbDoc d;
    d.id = absl::StrCat("hardware/cpu/doc", i);
    d.title = absl::StrCat("DOC-TITLE-", i);
    d.text = absl::StrCat("DOC-TEXT-", i, " ", std::string(400, 'x'));
    d.score = 3.0 - i;
    docs.push_back(d);
  }
  return docs;
}

std::vector<skills::Skill> Skills() {
  std::vector<skills::Skill> out;
  for (int i = 0; i < 2; ++i) {
    skills::Skill s;
    s.platform = "cpu";
    s.family = "softmax";
    s.transformation = absl::StrCat("SKILL-", i);
    s.mean_gain = 2.0 - i * 0.5;
    s.evidence_count = 3;
    out.push_back(s);
  }
  return out;
}

PromptInputs FullInputs(const v1::Task* task, const proposer::ParentInfo* parent) {
  PromptInputs in;
  in.task = task;
  in.platform = "cpu";
  in.parent = parent;
  in.documents = Docs();
  in.skills = Skills();
  in.candidates = 3;
  return in;
}

TEST(PromptTest, EveryPartIsPresentWithinABudget) {
  const v1::Task task = Softmax();
  const proposer::ParentInfo parent = WrongParent();
  auto prompt = BuildPrompt(FullInputs(&task, &parent), PromptOptions{.token_budget = 100000});
  ASSERT_TRUE(prompt.ok()) << prompt.status();
  ASSERT_EQ(prompt->messages.size(), 2u);
  EXPECT_TRUE(prompt->dropped.empty());
  const std::string& system = prompt->messages[0].content;
  const std::string& user = prompt->messages[1].content;
  EXPECT_EQ(prompt->messages[0].role, "system");
  EXPECT_EQ(prompt->messages[1].role, "user");
  // Constraints and the answer format.
  EXPECT_THAT(system, HasSubstr("extern \"C\" void softmax(const float* x, float* y, int64_t rows, int64_t cols);"));
  EXPECT_THAT(system, HasSubstr("No vendor-library calls"));
  EXPECT_THAT(system, HasSubstr("Never modify the inputs"));
  EXPECT_THAT(system, HasSubstr("3 candidates"));
  EXPECT_THAT(system, HasSubstr("Transformation:"));
  EXPECT_THAT(system, HasSubstr("```cpp"));
  EXPECT_THAT(system, HasSubstr("Platform: cpu"));
  // The task: signature, shapes, the reference source.
  EXPECT_THAT(user, HasSubstr("## Task: softmax"));
  EXPECT_THAT(user, HasSubstr(task.description()));
  EXPECT_THAT(user, HasSubstr("x: f32[rows, cols]"));
  EXPECT_THAT(user, HasSubstr("odd {cols=1001, rows=33}"));
  EXPECT_THAT(user, HasSubstr("timed {cols=1024, rows=4096}"));
  EXPECT_THAT(user, HasSubstr(task.reference().source().substr(0, 200)));
  // The parent and its feedback: compiler output, the mismatch summary.
  EXPECT_THAT(user, HasSubstr("PARENT-KERNEL-MARKER"));
  EXPECT_THAT(user, HasSubstr("Status: WRONG_ANSWER"));
  EXPECT_THAT(user, HasSubstr("output y differs"));
  EXPECT_THAT(user, HasSubstr("source.cc:0: warning"));
  EXPECT_THAT(user, HasSubstr("source.cc:49: warning"));
  EXPECT_THAT(user, HasSubstr("max abs error 0.25, max rel error 3.5, first bad index 1001"));
  EXPECT_THAT(user, HasSubstr("Failing validation cases (1 of 2)"));
  EXPECT_THAT(user, HasSubstr("Bottleneck: wrong-answer"));
  EXPECT_THAT(user, HasSubstr("achieved_bandwidth_gbs=12.5"));
  // Siblings, documents, skills.
  for (int i = 0; i < 3; ++i) {
    EXPECT_THAT(user, HasSubstr(absl::StrCat("SIBLING-", i)));
    EXPECT_THAT(user, HasSubstr(absl::StrCat("SIBLING-MESSAGE-", i)));
    EXPECT_THAT(user, HasSubstr(absl::StrCat("DOC-TITLE-", i)));
    EXPECT_THAT(user, HasSubstr(absl::StrCat("DOC-TEXT-", i)));
  }
  EXPECT_THAT(user, HasSubstr("SKILL-0 (cpu, softmax): x2.00 mean gain over 3 improving steps"));
  EXPECT_THAT(user, HasSubstr("SKILL-1"));
  EXPECT_THAT(user, HasSubstr("First make the kernel correct"));
  EXPECT_THAT(prompt->included,
              ElementsAre("task", "reference", "parent", "feedback", "compiler_rest", "profile", "sibling:n00010",
                          "sibling:n00011", "sibling:n00012", "kb:hardware/cpu/doc0", "kb:hardware/cpu/doc1",
                          "kb:hardware/cpu/doc2", "skill:SKILL-0", "skill:SKILL-1", "request"));
  EXPECT_GT(prompt->estimated_tokens, 0);
  EXPECT_LE(prompt->estimated_tokens, 100000);
}

TEST(PromptTest, OkParentGetsTimingRooflineAndBottleneck) {
  const v1::Task task = Softmax();
  proposer::ParentInfo parent;
  parent.node_id = "n00001";
  parent.fitness = 1.5;
  parent.candidate.set_source("int x;\n");
  parent.evaluation.set_status(v1::OK);
  parent.evaluation.mutable_timing()->set_median_s(0.002);
  parent.evaluation.mutable_baseline()->set_median_s(0.003);
  parent.evaluation.set_speedup(1.5);
  parent.evaluation.set_roofline_fraction(0.25);
  PromptInputs in;
  in.task = &task;
  in.platform = "cpu";
  in.parent = &parent;
  auto prompt = BuildPrompt(in);
  ASSERT_TRUE(prompt.ok()) << prompt.status();
  const std::string& user = prompt->messages[1].content;
  EXPECT_THAT(user, HasSubstr("Time: 2.000 ms median"));
  EXPECT_THAT(user, HasSubstr("baseline 3.000 ms; speedup 1.50x; 25.0% of the roofline"));
  EXPECT_THAT(user, HasSubstr("Bottleneck: memory"));  // softmax: 5 flops per 8 bytes
  EXPECT_THAT(user, HasSubstr("1.50x over the baseline"));
  EXPECT_THAT(user, HasSubstr("Make them faster"));
}

// Drops parts at ever smaller budgets: each budget drops a prefix of the
// order the smallest feasible one drops, and that order is TrimOrder()'s,
// weakest instance first.
TEST(PromptTest, BudgetDropsLeastUsefulPartsFirst) {
  const v1::Task task = Softmax();
  const proposer::ParentInfo parent = WrongParent();
  const PromptInputs in = FullInputs(&task, &parent);
  auto full = BuildPrompt(in, PromptOptions{.token_budget = 100000});
  ASSERT_TRUE(full.ok());
  const int64_t all = full->estimated_tokens;

  // One token short of everything: only the raw profile counters go.
  auto one_less = BuildPrompt(in, PromptOptions{.token_budget = all - 1});
  ASSERT_TRUE(one_less.ok());
  EXPECT_THAT(one_less->dropped, ElementsAre("profile"));
  EXPECT_LE(one_less->estimated_tokens, all - 1);

  // The smallest budget that fits.
  int64_t lo = 1, hi = all;
  while (lo < hi) {
    int64_t mid = (lo + hi) / 2;
    if (BuildPrompt(in, PromptOptions{.token_budget = mid}).ok())
      hi = mid;
    else
      lo = mid + 1;
  }
  auto minimal = BuildPrompt(in, PromptOptions{.token_budget = lo});
  ASSERT_TRUE(minimal.ok());
  EXPECT_THAT(minimal->dropped, ElementsAre("profile", "kb:hardware/cpu/doc2", "kb:hardware/cpu/doc1",
                                            "kb:hardware/cpu/doc0", "skill:SKILL-1", "skill:SKILL-0", "sibling:n00010",
                                            "sibling:n00011", "sibling:n00012", "reference", "compiler_rest"));
  EXPECT_THAT(minimal->included, ElementsAre("task", "parent", "feedback", "request"));
  const std::string& user = minimal->messages[1].content;
  EXPECT_THAT(user, HasSubstr("PARENT-KERNEL-MARKER"));
  EXPECT_THAT(user, HasSubstr("source.cc:29: warning"));  // the first 30 lines stay
  EXPECT_THAT(user, Not(HasSubstr("source.cc:30: warning")));
  EXPECT_THAT(user, Not(HasSubstr("DOC-TEXT")));
  EXPECT_THAT(user, Not(HasSubstr("SIBLING-")));
  for (int64_t budget = lo; budget <= all; budget += std::max<int64_t>(1, (all - lo) / 40)) {
    auto p = BuildPrompt(in, PromptOptions{.token_budget = budget});
    ASSERT_TRUE(p.ok());
    ASSERT_LE(p->dropped.size(), minimal->dropped.size());
    for (size_t i = 0; i < p->dropped.size(); ++i) EXPECT_EQ(p->dropped[i], minimal->dropped[i]);
    EXPECT_LE(p->estimated_tokens, budget);
  }

  // Below that, the mandatory parts do not fit.
  auto too_small = BuildPrompt(in, PromptOptions{.token_budget = lo - 1});
  EXPECT_EQ(too_small.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(too_small.status().message()), HasSubstr("budget"));
}

TEST(PromptTest, FirstGenerationImprovesTheReferenceWhichIsNeverDropped) {
  const v1::Task task = Softmax();
  PromptInputs in;
  in.task = &task;
  in.platform = "cpu";
  in.documents = Docs();
  auto prompt = BuildPrompt(in);
  ASSERT_TRUE(prompt.ok());
  EXPECT_THAT(prompt->messages[1].content, HasSubstr(task.reference().source().substr(0, 100)));
  EXPECT_THAT(prompt->messages[1].content, Not(HasSubstr("## The kernel to improve")));
  // Too small for the documents: they go, the reference stays.
  auto tight = BuildPrompt(in, PromptOptions{.token_budget = prompt->estimated_tokens - 150});
  ASSERT_TRUE(tight.ok()) << tight.status();
  EXPECT_THAT(tight->dropped, Not(::testing::Contains("reference")));
  EXPECT_THAT(tight->dropped, ::testing::Contains("kb:hardware/cpu/doc2"));
}

TEST(PromptTest, PlatformInstructions) {
  const v1::Task task = Softmax();
  PromptInputs in;
  in.task = &task;

  in.platform = "mtia-sim";
  auto mtia = BuildPrompt(in);
  ASSERT_TRUE(mtia.ok()) << mtia.status();
  EXPECT_THAT(mtia->messages[0].content, HasSubstr("kevo_mtia_launch(kevo::mtia::Grid& grid, void** args)"));
  EXPECT_THAT(mtia->messages[0].content, HasSubstr("mtia_sim/mtia.h"));
  EXPECT_THAT(mtia->messages[0].content, HasSubstr("pe.ReduceRows"));
  // The naive MTIA baseline is the kernel to improve.
  EXPECT_THAT(mtia->messages[1].content, HasSubstr("The platform's naive baseline (mtia-c++; improve this one)"));
  EXPECT_THAT(mtia->messages[1].content, HasSubstr("grid.Launch"));

  in.platform = "nvidia";
  auto cuda = BuildPrompt(in);
  ASSERT_TRUE(cuda.ok());
  EXPECT_THAT(cuda->messages[0].content, HasSubstr("CUDA C++"));
  EXPECT_THAT(cuda->messages[0].content, HasSubstr("device pointers"));
  EXPECT_THAT(cuda->messages[0].content, HasSubstr("```cuda"));
  EXPECT_THAT(cuda->messages[0].content, HasSubstr("No cuBLAS"));
  // The task's GPU timed binding (time_on), not the CPU's, is the timed shape.
  EXPECT_THAT(cuda->messages[1].content, HasSubstr("timed_gpu {cols=1024, rows=65536}"));
  EXPECT_THAT(cuda->messages[1].content, Not(HasSubstr("rows=4096}")));
  EXPECT_THAT(mtia->messages[1].content, HasSubstr("timed {cols=1024, rows=4096}"));

  in.platform = "amd";
  auto hip = BuildPrompt(in);
  ASSERT_TRUE(hip.ok());
  EXPECT_THAT(hip->messages[0].content, HasSubstr("HIP C++"));
  EXPECT_THAT(hip->messages[0].content, HasSubstr("```hip"));

  in.platform = "tpu";
  EXPECT_EQ(BuildPrompt(in).status().code(), absl::StatusCode::kInvalidArgument);
  in.task = nullptr;
  in.platform = "cpu";
  EXPECT_EQ(BuildPrompt(in).status().code(), absl::StatusCode::kInvalidArgument);

  EXPECT_EQ(*CandidateLanguage("cpu"), "c++");
  EXPECT_EQ(*CandidateLanguage("nvidia"), "cuda");
  EXPECT_EQ(*CandidateLanguage("mtia-sim"), "mtia-c++");
  EXPECT_EQ(*CandidateLanguage("amd"), "hip");
}

TEST(PromptTest, BottleneckLabels) {
  const v1::Task task = Softmax();
  v1::Evaluation e;
  e.set_status(v1::COMPILE_ERROR);
  EXPECT_EQ(BottleneckLabel(task, e), "compile");
  e.set_status(v1::NONFINITE);
  EXPECT_EQ(BottleneckLabel(task, e), "nan");
  e.set_status(v1::RUNTIME_ERROR);
  EXPECT_EQ(BottleneckLabel(task, e), "crash");
  e.set_status(v1::OK);
  e.mutable_timing()->set_median_s(1e-3);
  EXPECT_EQ(BottleneckLabel(task, e), "memory");
  e.mutable_timing()->set_median_s(5e-6);
  e.set_roofline_fraction(0.01);
  EXPECT_EQ(BottleneckLabel(task, e), "latency");
  v1::Task gemm = task;
  gemm.set_flops("1000*rows*cols");
  e.mutable_timing()->set_median_s(1e-3);
  EXPECT_EQ(BottleneckLabel(gemm, e), "compute");
  // The simulator's unit counters decide on mtia-sim.
  (*e.mutable_profile())["dram_utilization"] = 0.3;
  (*e.mutable_profile())["pe_utilization"] = 0.9;
  EXPECT_EQ(BottleneckLabel(task, e), "compute");
}

}  // namespace
}  // namespace kevo::llm
