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

// Whether OpenMP threads may share the iterations of an outermost loop, from
// what its body writes. A write to a variable declared outside the loop (a
// local before it, a parameter or a global) races unless it is
//   - an element write `v[index] = ...` whose index names the loop's own
//     variable (each iteration writes its own elements), or
//   - an accumulation: every use of a scalar in the loop is `v += e`,
//     `v -= e`, `++v` or `v++` (and `--`), which becomes a reduction.
// Anything else (scratch written at indices of an inner loop, a running
// offset read by later iterations, a plain assignment, a local passed to a
// call, `return`/`break`/`goto` out of the loop, a header that declares no
// loop variable) makes the loop unshareable.
struct LoopSharing {
  bool shareable = false;
  std::vector<std::string> reductions;  // the accumulated scalars, in source order
  std::string reason;                   // why not, when !shareable
};

LoopSharing AnalyseLoop(const std::string& source, const FunctionSpan& fn, const LoopSpan& loop);

struct SourceEdits {
  bool restrict_pointers = false;
  // Before each outermost loop that AnalyseLoop finds shareable, e.g.
  // "#pragma omp parallel for schedule(static)"; empty: none. A loop with
  // reductions instead gets a parallel region in which each thread
  // accumulates into its own copy (declared with the outer variable's name,
  // so the body is unchanged) over a static partition of the iterations,
  // and the copies are added to the variable in thread order afterwards:
  // deterministic for a given thread count, unlike OpenMP's reduction
  // clause, whose combining order depends on which thread finishes first.
  // `outer_for_pragma` is then the worksharing pragma inside the region.
  std::string outer_pragma;
  std::string outer_for_pragma = "#pragma omp for schedule(static)";
  std::string inner_pragma;  // before each innermost loop that has no outer_pragma
};

struct EditedSource {
  std::string source;
  int shared_loops = 0;               // outermost loops that got outer_pragma (or a reduction region)
  std::vector<std::string> unshared;  // why each other outermost loop did not
};

// `source` with `edits` applied to the definition of `function`. Errors as
// FindFunction.
absl::StatusOr<EditedSource> EditFunction(const std::string& source, std::string_view function,
                                          const SourceEdits& edits);

}  // namespace kevo::proposer
