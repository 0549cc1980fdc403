// Source-level surgery on a C++ reference, for the generic recipe: finds the
// definition of the exported function (skipping comments and literals), its
// parameters and its for-loops, and applies edits. Internal to
// kevo_builtin_proposer. Pure functions, thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace kevo::proposer {

struct FunctionSpan {
  size_t params_open = 0;   // '(' of the parameter list
  size_t params_close = 0;  // its ')'
  size_t body_open = 0;     // '{' of the body
  size_t body_close = 0;    // its '}'
};

struct LoopSpan {
  size_t begin = 0;  // the 'f' of `for`
  size_t end = 0;    // one past the last character of its body
  bool outermost = false;
  bool innermost = false;
};

// The definition (not a declaration) of `function` in `source`. NotFound when
// there is none; InvalidArgument when its braces or parentheses do not match.
absl::StatusOr<FunctionSpan> FindFunction(const std::string& source, std::string_view function);

// The for-loops of the body of `fn`, in source order.
std::vector<LoopSpan> FindLoops(const std::string& source, const FunctionSpan& fn);

struct SourceEdits {
  bool restrict_pointers = false;
  std::string outer_pragma;  // before each outermost loop; empty: none
  std::string inner_pragma;  // before each innermost loop that has no outer_pragma
};

// `source` with `edits` applied to the definition of `function`. Errors as
// FindFunction.
absl::StatusOr<std::string> EditFunction(const std::string& source, std::string_view function,
                                         const SourceEdits& edits);

}  // namespace kevo::proposer
