#include "coordinator/proposer/builtin/generic_source.h"

#include <algorithm>
#include <cctype>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace kevo::proposer {
namespace {

bool IsIdent(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// `source` with comments, string and character literals and preprocessor lines
// blanked out (same length, newlines kept), so that structure can be found by
// scanning for brackets and keywords.
std::string Mask(const std::string& source) {
  std::string m = source;
  size_t i = 0;
  bool line_start = true;
  auto blank = [&](size_t from, size_t to) {
    for (size_t k = from; k < to && k < m.size(); ++k) {
      if (m[k] != '\n') m[k] = ' ';
    }
  };
  while (i < m.size()) {
    char c = source[i];
    if (line_start && c == '#') {
      size_t end = i;
      while (end < m.size() && !(source[end] == '\n' && source[end - 1] != '\\')) ++end;
      blank(i, end);
      i = end;
      continue;
    }
    if (c == '\n') {
      line_start = true;
      ++i;
      continue;
    }
    if (!std::isspace(static_cast<unsigned char>(c))) line_start = false;
    if (c == '/' && i + 1 < m.size() && source[i + 1] == '/') {
      size_t end = source.find('\n', i);
      if (end == std::string::npos) end = m.size();
      blank(i, end);
      i = end;
    } else if (c == '/' && i + 1 < m.size() && source[i + 1] == '*') {
      size_t end = source.find("*/", i + 2);
      end = end == std::string::npos ? m.size() : end + 2;
      blank(i, end);
      i = end;
    } else if (c == '"' || c == '\'') {
      size_t end = i + 1;
      while (end < m.size() && source[end] != c) end += source[end] == '\\' ? 2 : 1;
      blank(i + 1, end);
      i = std::min(end + 1, m.size());
    } else {
      ++i;
    }
  }
  return m;
}

// Index of the bracket closing the one at `open`, or npos.
size_t Match(const std::string& m, size_t open) {
  const char o = m[open];
  const char c = o == '(' ? ')' : o == '{' ? '}' : ']';
  int depth = 0;
  for (size_t i = open; i < m.size(); ++i) {
    if (m[i] == o) ++depth;
    if (m[i] == c && --depth == 0) return i;
  }
  return std::string::npos;
}

size_t SkipSpace(const std::string& m, size_t i) {
  while (i < m.size() && std::isspace(static_cast<unsigned char>(m[i]))) ++i;
  return i;
}

// One past the end of the statement starting at `i` (a block, or up to the
// ';' at bracket depth 0); npos when unterminated.
size_t StatementEnd(const std::string& m, size_t i) {
  i = SkipSpace(m, i);
  if (i >= m.size()) return std::string::npos;
  if (m[i] == '{') {
    size_t close = Match(m, i);
    return close == std::string::npos ? close : close + 1;
  }
  int depth = 0;
  for (; i < m.size(); ++i) {
    if (m[i] == '(' || m[i] == '{' || m[i] == '[') ++depth;
    if (m[i] == ')' || m[i] == '}' || m[i] == ']') --depth;
    if (m[i] == ';' && depth == 0) return i + 1;
  }
  return std::string::npos;
}

// Splits [from, to) at commas of bracket depth 0: returns [begin, end) pairs.
std::vector<std::pair<size_t, size_t>> SplitParams(const std::string& m, size_t from, size_t to) {
  std::vector<std::pair<size_t, size_t>> out;
  int depth = 0;
  size_t start = from;
  for (size_t i = from; i < to; ++i) {
    if (m[i] == '(' || m[i] == '<' || m[i] == '[') ++depth;
    if (m[i] == ')' || m[i] == '>' || m[i] == ']') --depth;
    if (m[i] == ',' && depth == 0) {
      out.emplace_back(start, i);
      start = i + 1;
    }
  }
  out.emplace_back(start, to);
  return out;
}

}  // namespace

absl::StatusOr<FunctionSpan> FindFunction(const std::string& source, std::string_view function) {
  if (function.empty()) return absl::NotFoundError("the task names no function");
  const std::string m = Mask(source);
  size_t pos = 0;
  while ((pos = m.find(function, pos)) != std::string::npos) {
    const size_t after = pos + function.size();
    if ((pos > 0 && IsIdent(m[pos - 1])) || (after < m.size() && IsIdent(m[after]))) {
      pos = after;
      continue;
    }
    size_t open = SkipSpace(m, after);
    if (open >= m.size() || m[open] != '(') {
      pos = after;
      continue;
    }
    size_t close = Match(m, open);
    if (close == std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("unbalanced parentheses after '", std::string(function), "'"));
    }
    size_t body = SkipSpace(m, close + 1);
    // Skip trailing qualifiers such as `noexcept`.
    while (body < m.size() && IsIdent(m[body])) {
      while (body < m.size() && IsIdent(m[body])) ++body;
      body = SkipSpace(m, body);
    }
    if (body < m.size() && m[body] == '{') {
      size_t body_close = Match(m, body);
      if (body_close == std::string::npos) {
        return absl::InvalidArgumentError(
            absl::StrCat("unbalanced braces in the body of '", std::string(function), "'"));
      }
      return FunctionSpan{open, close, body, body_close};
    }
    pos = after;  // a declaration or a call
  }
  return absl::NotFoundError(
      absl::StrCat("no definition of '", std::string(function), "' in the reference"));
}

std::vector<LoopSpan> FindLoops(const std::string& source, const FunctionSpan& fn) {
  const std::string m = Mask(source);
  std::vector<LoopSpan> loops;
  for (size_t i = fn.body_open + 1; i + 3 <= fn.body_close; ++i) {
    if (m.compare(i, 3, "for") != 0 || IsIdent(m[i - 1]) || IsIdent(m[i + 3])) continue;
    size_t open = SkipSpace(m, i + 3);
    if (open >= fn.body_close || m[open] != '(') continue;
    size_t close = Match(m, open);
    if (close == std::string::npos || close >= fn.body_close) continue;
    size_t end = StatementEnd(m, close + 1);
    if (end == std::string::npos || end > fn.body_close) continue;
    loops.push_back(LoopSpan{i, end, false, false});
  }
  for (LoopSpan& loop : loops) {
    loop.outermost = true;
    loop.innermost = true;
    for (const LoopSpan& other : loops) {
      if (&other == &loop) continue;
      if (other.begin < loop.begin && loop.end <= other.end) loop.outermost = false;
      if (loop.begin < other.begin && other.end <= loop.end) loop.innermost = false;
    }
  }
  return loops;
}

absl::StatusOr<std::string> EditFunction(const std::string& source, std::string_view function,
                                         const SourceEdits& edits) {
  absl::StatusOr<FunctionSpan> fn = FindFunction(source, function);
  if (!fn.ok()) return fn.status();
  const std::string m = Mask(source);
  // (position, text) insertions, applied from the back so positions stay valid.
  std::vector<std::pair<size_t, std::string>> inserts;
  for (const LoopSpan& loop : FindLoops(source, *fn)) {
    if (loop.outermost && !edits.outer_pragma.empty()) {
      inserts.emplace_back(loop.begin, absl::StrCat("\n", edits.outer_pragma, "\n"));
    } else if (loop.innermost && !edits.inner_pragma.empty()) {
      inserts.emplace_back(loop.begin, absl::StrCat("\n", edits.inner_pragma, "\n"));
    }
  }
  if (edits.restrict_pointers) {
    for (auto [b, e] : SplitParams(m, fn->params_open + 1, fn->params_close)) {
      std::string_view param(m.data() + b, e - b);
      size_t star = param.rfind('*');
      if (star == std::string_view::npos || param.find("restrict") != std::string_view::npos) {
        continue;
      }
      inserts.emplace_back(b + star + 1, " __restrict ");
    }
  }
  std::sort(inserts.begin(), inserts.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  std::string out = source;
  for (const auto& [pos, text] : inserts) out.insert(pos, text);
  return out;
}

}  // namespace kevo::proposer
