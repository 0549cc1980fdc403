#include "coordinator/llm/answer_parser.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace kevo::llm {
namespace {

std::string NormaliseLanguage(std::string_view info) {
  while (!info.empty() && absl::ascii_isspace(static_cast<unsigned char>(info.front()))) {
    info.remove_prefix(1);
  }
  size_t end = 0;
  while (end < info.size() && !absl::ascii_isspace(static_cast<unsigned char>(info[end])) && info[end] != '{' &&
         info[end] != ',') {
    ++end;
  }
  std::string lang = absl::AsciiStrToLower(std::string(info.substr(0, end)));
  if (!lang.empty() && lang[0] == '.') lang.erase(0, 1);
  if (lang == "c++" || lang == "cxx" || lang == "cc" || lang == "hpp" || lang == "h" || lang == "cplusplus") {
    return "cpp";
  }
  if (lang == "cu") return "cuda";
  if (lang == "py") return "python";
  return lang;
}

// A fence line: up to three spaces, then 3+ backticks or tildes. Returns the
// fence's character and length, and the info string after it.
bool IsFence(std::string_view line, char* fence_char, size_t* fence_len, std::string_view* info) {
  size_t i = 0;
  while (i < line.size() && i < 3 && line[i] == ' ') ++i;
  if (i >= line.size() || (line[i] != '`' && line[i] != '~')) return false;
  const char c = line[i];
  size_t n = 0;
  while (i + n < line.size() && line[i + n] == c) ++n;
  if (n < 3) return false;
  std::string_view rest = line.substr(i + n);
  if (c == '`' && rest.find('`') != std::string_view::npos) return false;  // inline code
  *fence_char = c;
  *fence_len = n;
  *info = rest;
  return true;
}

bool Blank(std::string_view text) {
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return absl::ascii_isspace(static_cast<unsigned char>(c)); });
}

}  // namespace

const char* AnswerOutcomeName(AnswerOutcome outcome) {
  switch (outcome) {
    case AnswerOutcome::kOk:
      return "ok";
    case AnswerOutcome::kEmpty:
      return "empty";
    case AnswerOutcome::kNoCode:
      return "no_code";
    case AnswerOutcome::kUnterminated:
      return "unterminated";
  }
  return "unknown";
}

std::vector<CodeBlock> FindCodeBlocks(std::string_view answer) {
  std::vector<CodeBlock> blocks;
  bool inside = false;
  char open_char = 0;
  size_t open_len = 0;
  CodeBlock current;
  size_t pos = 0;
  while (pos < answer.size()) {
    size_t end = answer.find('\n', pos);
    std::string_view line = answer.substr(pos, end == std::string_view::npos ? answer.npos : end - pos);
    pos = end == std::string_view::npos ? answer.size() : end + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    char c = 0;
    size_t n = 0;
    std::string_view info;
    if (!inside) {
      if (IsFence(line, &c, &n, &info)) {
        inside = true;
        open_char = c;
        open_len = n;
        current = CodeBlock();
        current.language = NormaliseLanguage(info);
      }
      continue;
    }
    if (IsFence(line, &c, &n, &info) && c == open_char && n >= open_len && Blank(info)) {
      inside = false;
      blocks.push_back(std::move(current));
      current = CodeBlock();
      continue;
    }
    current.code += std::string(line);
    current.code += '\n';
  }
  if (inside) {
    current.terminated = false;
    blocks.push_back(std::move(current));
  }
  return blocks;
}

ExtractedCode ClassifyAnswer(std::string_view answer, const std::vector<std::string>& languages) {
  ExtractedCode result;
  if (Blank(answer)) {
    result.outcome = AnswerOutcome::kEmpty;
    return result;
  }
  bool saw_unterminated = false;
  for (CodeBlock& block : FindCodeBlocks(answer)) {
    if (Blank(block.code)) continue;
    if (!languages.empty() && !block.language.empty() &&
        std::find(languages.begin(), languages.end(), block.language) == languages.end()) {
      continue;
    }
    if (!block.terminated) {
      saw_unterminated = true;
      continue;
    }
    result.blocks.push_back(std::move(block));
  }
  if (result.blocks.empty()) {
    result.outcome = saw_unterminated ? AnswerOutcome::kUnterminated : AnswerOutcome::kNoCode;
  }
  return result;
}

absl::StatusOr<std::vector<CodeBlock>> ExtractCode(std::string_view answer, const std::vector<std::string>& languages) {
  ExtractedCode extracted = ClassifyAnswer(answer, languages);
  switch (extracted.outcome) {
    case AnswerOutcome::kOk:
      return std::move(extracted.blocks);
    case AnswerOutcome::kEmpty:
      return absl::NotFoundError("empty answer: the model returned no text");
    case AnswerOutcome::kNoCode: {
      std::string wanted;
      for (const std::string& l : languages) absl::StrAppend(&wanted, wanted.empty() ? "" : ", ", l);
      return absl::NotFoundError(absl::StrCat("no_code: the answer (", answer.size(),
                                              " bytes) has no fenced code block",
                                              wanted.empty() ? "" : absl::StrCat(" in ", wanted), " with code in it"));
    }
    case AnswerOutcome::kUnterminated:
      return absl::NotFoundError("unterminated: the answer ended inside its code block (raise max_tokens?)");
  }
  return absl::InternalError("unknown answer outcome");
}

void AnswerCounter::Record(AnswerOutcome outcome) {
  absl::MutexLock l(&mu_);
  ++counts_[static_cast<int>(outcome)];
}

int64_t AnswerCounter::count(AnswerOutcome outcome) const {
  absl::MutexLock l(&mu_);
  return counts_[static_cast<int>(outcome)];
}

int64_t AnswerCounter::total() const {
  absl::MutexLock l(&mu_);
  return counts_[0] + counts_[1] + counts_[2] + counts_[3];
}

}  // namespace kevo::llm
