// Extracts candidate kernels from an LLM's answer: the fenced code blocks
// (```cpp, ```c++, ```cuda, ~~~, a bare ```), several per answer. Answers
// without usable code are a normal outcome of talking to a model, reported
// with a specific status and counted, never a crash. Pure functions and a
// thread-safe counter.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace kevo::llm {

struct CodeBlock {
  // The fence's language, lower-cased and normalised: "cpp" for cpp / c++ /
  // cxx / cc / h / hpp, "cuda" for cuda / cu, "hip", "c", "python", ...; "" for
  // a bare fence.
  std::string language;
  std::string code;        // between the fences, without them; ends with '\n'
  bool terminated = true;  // false: the answer ended inside the block
};

enum class AnswerOutcome {
  kOk,           // at least one usable block
  kEmpty,        // the answer is empty or whitespace
  kNoCode,       // text, but no fenced block (of a wanted language) with code in it
  kUnterminated  // the only candidates are cut off (answer hit max_tokens?)
};
// "ok", "empty", "no_code", "unterminated" (the metrics' outcome label).
const char* AnswerOutcomeName(AnswerOutcome outcome);

// Every fenced block of `answer` in order, terminated or not, empty or not.
std::vector<CodeBlock> FindCodeBlocks(std::string_view answer);

struct ExtractedCode {
  AnswerOutcome outcome = AnswerOutcome::kOk;
  std::vector<CodeBlock> blocks;  // usable ones: terminated, non-blank, wanted language
};

// The usable blocks of `answer`. `languages` (normalised names, see
// CodeBlock::language) filters them; bare fences are always accepted; empty
// accepts all. Never fails; see ExtractCode for a Status.
ExtractedCode ClassifyAnswer(std::string_view answer, const std::vector<std::string>& languages = {});

// The usable blocks, or NotFound ("empty answer", "no fenced code block ...",
// "... unterminated ...") when there are none. The message names the outcome.
absl::StatusOr<std::vector<CodeBlock>> ExtractCode(std::string_view answer,
                                                   const std::vector<std::string>& languages = {});

// Counts answers by outcome. Thread-safe.
class AnswerCounter {
 public:
  void Record(AnswerOutcome outcome);
  int64_t count(AnswerOutcome outcome) const;
  int64_t total() const;

 private:
  mutable absl::Mutex mu_;
  int64_t counts_[4] ABSL_GUARDED_BY(mu_) = {0, 0, 0, 0};
};

}  // namespace kevo::llm
