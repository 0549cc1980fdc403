#include "coordinator/llm/answer_parser.h"

#include <random>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace kevo::llm {
namespace {

using ::testing::HasSubstr;

TEST(AnswerParserTest, ExtractsOneCppBlock) {
  auto blocks = ExtractCode("Here:\n```cpp\nint f() { return 1; }\n```\nDone.");
  ASSERT_TRUE(blocks.ok()) << blocks.status();
  ASSERT_EQ(blocks->size(), 1u);
  EXPECT_EQ((*blocks)[0].language, "cpp");
  EXPECT_EQ((*blocks)[0].code, "int f() { return 1; }\n");
}

TEST(AnswerParserTest, NormalisesLanguagesAndKeepsSeveralBlocksInOrder) {
  const std::string answer =
      "First:\n```c++\nint a;\n```\nSecond:\n```cuda\n__global__ void k() {}\n```\n"
      "Third:\n```\nint c;\n```\nFourth:\n~~~cu\n__device__ int d;\n~~~\n"
      "Fifth:\n```C++ title=\"x.cc\"\nint e;\n```\n";
  auto blocks = ExtractCode(answer);
  ASSERT_TRUE(blocks.ok());
  ASSERT_EQ(blocks->size(), 5u);
  EXPECT_EQ((*blocks)[0].language, "cpp");
  EXPECT_EQ((*blocks)[0].code, "int a;\n");
  EXPECT_EQ((*blocks)[1].language, "cuda");
  EXPECT_EQ((*blocks)[1].code, "__global__ void k() {}\n");
  EXPECT_EQ((*blocks)[2].language, "");
  EXPECT_EQ((*blocks)[3].language, "cuda");
  EXPECT_EQ((*blocks)[4].language, "cpp");
  EXPECT_EQ((*blocks)[4].code, "int e;\n");
}

TEST(AnswerParserTest, LanguageFilterSkipsOtherLanguagesButKeepsBareFences) {
  const std::string answer = "Build with:\n```bash\ng++ -O3 k.cc\n```\n```cpp\nint k;\n```\n```\nint bare;\n```\n";
  auto blocks = ExtractCode(answer, {"cpp", "cuda"});
  ASSERT_TRUE(blocks.ok());
  ASSERT_EQ(blocks->size(), 2u);
  EXPECT_EQ((*blocks)[0].code, "int k;\n");
  EXPECT_EQ((*blocks)[1].code, "int bare;\n");
  auto only_bash = ExtractCode("```bash\nls\n```\n", {"cpp"});
  EXPECT_EQ(only_bash.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(only_bash.status().message(), HasSubstr("no_code"));
}

TEST(AnswerParserTest, LongerFencesNestShorterOnes) {
  const std::string answer = "````markdown\n```cpp\nint x;\n```\n````\n";
  auto blocks = FindCodeBlocks(answer);
  ASSERT_EQ(blocks.size(), 1u);
  EXPECT_EQ(blocks[0].language, "markdown");
  EXPECT_EQ(blocks[0].code, "```cpp\nint x;\n```\n");
}

TEST(AnswerParserTest, HandlesCrLfAndIndentedFences) {
  auto blocks = ExtractCode("x\r\n  ```cpp\r\nint y;\r\n  ```\r\n");
  ASSERT_TRUE(blocks.ok());
  ASSERT_EQ(blocks->size(), 1u);
  EXPECT_EQ((*blocks)[0].code, "int y;\n");
}

TEST(AnswerParserTest, EmptyAnswerIsReportedAsEmpty) {
  for (const char* answer : {"", "   \n\t\n"}) {
    ExtractedCode extracted = ClassifyAnswer(answer);
    EXPECT_EQ(extracted.outcome, AnswerOutcome::kEmpty);
    auto status = ExtractCode(answer).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
    EXPECT_THAT(status.message(), HasSubstr("empty answer"));
  }
}

TEST(AnswerParserTest, ProseWithoutCodeIsNoCode) {
  ExtractedCode extracted = ClassifyAnswer("I cannot help with that. Use `std::sort` instead.");
  EXPECT_EQ(extracted.outcome, AnswerOutcome::kNoCode);
  EXPECT_TRUE(extracted.blocks.empty());
  EXPECT_EQ(ExtractCode("no code here").status().code(), absl::StatusCode::kNotFound);
}

TEST(AnswerParserTest, EmptyBlocksAreNoCode) {
  ExtractedCode extracted = ClassifyAnswer("```cpp\n```\n```\n   \n```\n");
  EXPECT_EQ(extracted.outcome, AnswerOutcome::kNoCode);
}

TEST(AnswerParserTest, CutOffBlockIsUnterminatedAndNotUsed) {
  const std::string answer = "```cpp\nint f() {\n  return";
  ExtractedCode extracted = ClassifyAnswer(answer);
  EXPECT_EQ(extracted.outcome, AnswerOutcome::kUnterminated);
  auto all = FindCodeBlocks(answer);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_FALSE(all[0].terminated);
  EXPECT_THAT(ExtractCode(answer).status().message(), HasSubstr("unterminated"));
  // A complete block before the cut one is still used.
  ExtractedCode mixed = ClassifyAnswer("```cpp\nint ok;\n```\n```cpp\nint cut");
  EXPECT_EQ(mixed.outcome, AnswerOutcome::kOk);
  ASSERT_EQ(mixed.blocks.size(), 1u);
  EXPECT_EQ(mixed.blocks[0].code, "int ok;\n");
}

TEST(AnswerParserTest, InlineTripleBackticksAreNotFences) {
  EXPECT_EQ(ClassifyAnswer("write ```int x;``` please").outcome, AnswerOutcome::kNoCode);
}

TEST(AnswerParserTest, RandomGarbageNeverCrashes) {
  std::mt19937 rng(7);
  const std::string alphabet = "`~\n\r cpu+{}ab\0\xff";
  AnswerCounter counter;
  for (int i = 0; i < 2000; ++i) {
    std::string answer;
    const int n = static_cast<int>(rng() % 200);
    for (int j = 0; j < n; ++j) answer += alphabet[rng() % alphabet.size()];
    ExtractedCode extracted =
        ClassifyAnswer(answer, i % 2 ? std::vector<std::string>{"cpp"} : std::vector<std::string>{});
    counter.Record(extracted.outcome);
    for (const CodeBlock& b : extracted.blocks) {
      EXPECT_TRUE(b.terminated);
      EXPECT_FALSE(b.code.empty());
    }
  }
  EXPECT_EQ(counter.total(), 2000);
}

TEST(AnswerParserTest, CounterCountsOutcomes) {
  AnswerCounter counter;
  for (const char* answer : {"", "text", "```cpp\nint x;\n```", "```cpp\nint x;\n```", "```cpp\nx"}) {
    counter.Record(ClassifyAnswer(answer).outcome);
  }
  EXPECT_EQ(counter.count(AnswerOutcome::kOk), 2);
  EXPECT_EQ(counter.count(AnswerOutcome::kEmpty), 1);
  EXPECT_EQ(counter.count(AnswerOutcome::kNoCode), 1);
  EXPECT_EQ(counter.count(AnswerOutcome::kUnterminated), 1);
  EXPECT_STREQ(AnswerOutcomeName(AnswerOutcome::kNoCode), "no_code");
}

}  // namespace
}  // namespace kevo::llm
