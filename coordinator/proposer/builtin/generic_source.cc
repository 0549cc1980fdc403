#include "coordinator/proposer/builtin/generic_source.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
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
      return absl::InvalidArgumentError(absl::StrCat("unbalanced parentheses after '", std::string(function), "'"));
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
  return absl::NotFoundError(absl::StrCat("no definition of '", std::string(function), "' in the reference"));
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

namespace {

// The identifier words of m[from, to), skipping the spans in `holes`.
std::set<std::string> Words(const std::string& m, size_t from, size_t to,
                            const std::vector<std::pair<size_t, size_t>>& holes = {}) {
  std::set<std::string> out;
  for (size_t i = from; i < to;) {
    bool skipped = false;
    for (const auto& [b, e] : holes) {
      if (i >= b && i < e) {
        i = e;
        skipped = true;
        break;
      }
    }
    if (skipped) continue;
    if (IsIdent(m[i]) && !std::isdigit(static_cast<unsigned char>(m[i])) && (i == 0 || !IsIdent(m[i - 1]))) {
      size_t e = i;
      while (e < to && IsIdent(m[e])) ++e;
      out.insert(m.substr(i, e - i));
      i = e;
    } else {
      ++i;
    }
  }
  return out;
}

bool HasWord(const std::string& text, std::string_view word) {
  for (size_t p = text.find(word); p != std::string::npos; p = text.find(word, p + 1)) {
    const size_t e = p + word.size();
    if ((p == 0 || !IsIdent(text[p - 1])) && (e >= text.size() || !IsIdent(text[e]))) return true;
  }
  return false;
}

// The last non-space character before `i`, or '\0'.
char PrevChar(const std::string& m, size_t i, size_t* at = nullptr) {
  while (i > 0) {
    --i;
    if (!std::isspace(static_cast<unsigned char>(m[i]))) {
      if (at != nullptr) *at = i;
      return m[i];
    }
  }
  return '\0';
}

// Length of the assignment operator at `i` (`=`, `+=`, `<<=`, ...), or 0.
size_t AssignmentAt(const std::string& m, size_t i) {
  if (i >= m.size()) return 0;
  if (m[i] == '=') return i + 1 < m.size() && m[i + 1] == '=' ? 0 : 1;
  if (m.compare(i, 3, "<<=") == 0 || m.compare(i, 3, ">>=") == 0) return 3;
  if (i + 1 < m.size() && m[i + 1] == '=' && std::string_view("+-*/%&|^").find(m[i]) != std::string_view::npos) {
    return 2;
  }
  return 0;
}

// The statement of `fn` (parameter or declaration) that first names `word`
// before `before`: a parameter's text, or the body's statement around it.
std::string Declaration(const std::string& m, const FunctionSpan& fn, const std::string& word, size_t before) {
  for (auto [b, e] : SplitParams(m, fn.params_open + 1, fn.params_close)) {
    std::string param = m.substr(b, e - b);
    if (HasWord(param, word)) return param;
  }
  for (size_t p = m.find(word, fn.body_open); p != std::string::npos && p < before; p = m.find(word, p + 1)) {
    const size_t e = p + word.size();
    if (IsIdent(m[p - 1]) || IsIdent(m[e])) continue;
    size_t start = m.find_last_of(";{}", p);
    size_t end = m.find(';', p);
    start = start == std::string::npos ? 0 : start + 1;
    return m.substr(start, (end == std::string::npos ? m.size() : end) - start);
  }
  return "";
}

}  // namespace

LoopSharing AnalyseLoop(const std::string& source, const FunctionSpan& fn, const LoopSpan& loop) {
  const std::string m = Mask(source);
  LoopSharing out;
  const size_t open = SkipSpace(m, loop.begin + 3);
  // The loop variable: the name before the `=` of the header's init.
  const size_t init_end = m.find(';', open);
  const size_t eq = m.find('=', open);
  std::string var;
  if (eq != std::string::npos && eq < init_end && AssignmentAt(m, eq) == 1) {
    size_t e = eq;
    while (e > open && std::isspace(static_cast<unsigned char>(m[e - 1]))) --e;
    size_t b = e;
    while (b > open && IsIdent(m[b - 1])) --b;
    var = m.substr(b, e - b);
  }
  if (var.empty()) {
    out.reason = "its header declares no loop variable";
    return out;
  }
  // Names visible before the loop: parameters, the body up to the loop
  // (without earlier loops, whose names are scoped) and whatever precedes
  // the function (globals).
  const std::vector<LoopSpan> loops = FindLoops(source, fn);
  std::vector<std::pair<size_t, size_t>> earlier;
  for (const LoopSpan& l : loops) {
    if (l.end <= loop.begin) earlier.emplace_back(l.begin, l.end);
  }
  const std::set<std::string> params = Words(m, fn.params_open, fn.params_close);
  const std::set<std::string> locals = Words(m, fn.body_open, loop.begin, earlier);
  const std::set<std::string> globals = Words(m, 0, fn.params_open);
  auto is_outer = [&](const std::string& w) { return locals.contains(w) || params.contains(w) || globals.contains(w); };
  auto unshareable = [&](std::string reason) {
    out.shareable = false;
    out.reductions.clear();
    out.reason = std::move(reason);
    return out;
  };

  struct Use {
    int total = 0;
    int accumulations = 0;  // +=, -=, ++, --
  };
  std::map<std::string, Use> uses;
  std::vector<std::string> order;
  for (size_t i = open; i < loop.end;) {
    if (!IsIdent(m[i]) || std::isdigit(static_cast<unsigned char>(m[i])) || IsIdent(m[i - 1])) {
      ++i;
      continue;
    }
    size_t e = i;
    while (e < loop.end && IsIdent(m[e])) ++e;
    const std::string w = m.substr(i, e - i);
    const size_t b = i;
    i = e;
    size_t prev_at = 0;
    const char prev = PrevChar(m, b, &prev_at);
    if (prev == '.' || (prev == '>' && prev_at > 0 && m[prev_at - 1] == '-') ||
        (prev == ':' && prev_at > 0 && m[prev_at - 1] == ':')) {
      continue;  // a member or a qualified name
    }
    if (w == "return" || w == "goto") return unshareable(absl::StrCat("it contains `", w, "`"));
    if (w == "break") {
      bool inner = false;
      for (const LoopSpan& l : loops) {
        inner |= l.begin > loop.begin && l.begin < b && b < l.end;
      }
      if (!inner) return unshareable("it contains a `break` out of it");
      continue;
    }
    if (w == var || !is_outer(w)) continue;
    const size_t after = SkipSpace(m, e);
    if (after < m.size() && m[after] == '(') continue;  // a call (or a functional cast)
    const bool pre_step = prev_at > 0 && (prev == '+' || prev == '-') && m[prev_at - 1] == prev;
    const bool post_step = m.compare(after, 2, "++") == 0 || m.compare(after, 2, "--") == 0;
    const size_t assign = AssignmentAt(m, after);
    const std::string decl = Declaration(m, fn, w, loop.begin);
    const bool local = locals.contains(w) && !params.contains(w);
    const bool buffer = decl.find_first_of("*[<&") != std::string::npos;
    Use& use = uses[w];
    if (use.total++ == 0) order.push_back(w);
    if (after < m.size() && m[after] == '[') {
      const size_t index_close = Match(m, after);
      if (index_close == std::string::npos || index_close > loop.end) {
        return unshareable("unbalanced brackets");
      }
      const size_t next = SkipSpace(m, index_close + 1);
      const bool written = AssignmentAt(m, next) > 0 || m.compare(next, 2, "++") == 0 ||
                           m.compare(next, 2, "--") == 0 ||
                           (prev_at > 0 && (prev == '+' || prev == '-') && m[prev_at - 1] == prev);
      if (written && !HasWord(m.substr(after + 1, index_close - after - 1), var)) {
        return unshareable(absl::StrCat("iterations write `", w, "[", m.substr(after + 1, index_close - after - 1),
                                        "]`, an index that does not name `", var, "`"));
      }
      use.accumulations = -1;  // an array, never a reduction
      continue;
    }
    if (prev == '*' && assign > 0) {
      return unshareable(absl::StrCat("iterations write through `*", w, "`"));
    }
    if (local && buffer) {
      return unshareable(absl::StrCat("the buffer `", w, "` declared before it is used whole in it"));
    }
    const bool accumulate = pre_step || post_step || m.compare(after, 2, "+=") == 0 || m.compare(after, 2, "-=") == 0;
    if (accumulate || assign > 0) {
      if (!accumulate || buffer || !local) {
        return unshareable(absl::StrCat("iterations assign `", w, "`, declared before it"));
      }
      if (use.accumulations >= 0) ++use.accumulations;
    }
  }
  for (const std::string& w : order) {
    const Use& use = uses[w];
    if (use.accumulations <= 0) continue;
    if (use.accumulations != use.total) {
      return unshareable(absl::StrCat("`", w, "` is accumulated and also read in it (a running value)"));
    }
    out.reductions.push_back(w);
  }
  out.shareable = true;
  return out;
}

absl::StatusOr<EditedSource> EditFunction(const std::string& source, std::string_view function,
                                          const SourceEdits& edits) {
  absl::StatusOr<FunctionSpan> fn = FindFunction(source, function);
  if (!fn.ok()) return fn.status();
  const std::string m = Mask(source);
  EditedSource result;
  bool regions = false;  // whether a loop got a reduction region (needs omp.h)
  // (position, text) insertions, applied from the back so positions stay valid.
  std::vector<std::pair<size_t, std::string>> inserts;
  for (const LoopSpan& loop : FindLoops(source, *fn)) {
    if (loop.outermost && !edits.outer_pragma.empty()) {
      LoopSharing sharing = AnalyseLoop(source, *fn, loop);
      if (!sharing.shareable) {
        result.unshared.push_back(absl::StrCat("the loop at offset ", loop.begin, ": ", sharing.reason));
      } else if (sharing.reductions.empty()) {
        ++result.shared_loops;
        inserts.emplace_back(loop.begin, absl::StrCat("\n", edits.outer_pragma, "\n"));
        continue;
      } else {
        ++result.shared_loops;
        regions = true;
        std::string before =
            "\n{  // kevo: each thread accumulates into its own copy\n"
            "const int kevo_threads = omp_get_max_threads() < 64 ? "
            "omp_get_max_threads() : 64;\n";
        std::string inside, after_loop = "\n", combine;
        for (const std::string& r : sharing.reductions) {
          absl::StrAppend(&before, "decltype(", r, ") kevo_part_", r, "[64] = {};\n");
          absl::StrAppend(&inside, "decltype(", r, ") ", r, " = 0;\n");
          absl::StrAppend(&after_loop, "kevo_part_", r, "[omp_get_thread_num()] = ", r, ";\n");
          absl::StrAppend(&combine, r, " += kevo_part_", r, "[kevo_t];\n");
        }
        absl::StrAppend(&before, "#pragma omp parallel num_threads(kevo_threads)\n{\n", inside, edits.outer_for_pragma,
                        "\n");
        absl::StrAppend(&after_loop, "}\nfor (int kevo_t = 0; kevo_t < kevo_threads; ++kevo_t) {\n", combine, "}\n}\n");
        inserts.emplace_back(loop.end, after_loop);
        inserts.emplace_back(loop.begin, before);
        continue;
      }
    }
    if (loop.innermost && !edits.inner_pragma.empty()) {
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
  std::stable_sort(inserts.begin(), inserts.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  result.source = source;
  for (const auto& [pos, text] : inserts) result.source.insert(pos, text);
  if (regions) result.source.insert(0, "#include <omp.h>\n");
  return result;
}

}  // namespace kevo::proposer
