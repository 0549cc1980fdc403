// Integer expressions over named symbols, used for tensor shapes and for the
// bytes-moved / flops formulas of a task: integers, symbols, + - * / % and
// parentheses, and the functions min(a,b), max(a,b), ceil_div(a,b).
// Thread-safe (pure functions).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace kevo {

using SymbolValues = std::map<std::string, int64_t, std::less<>>;

// Evaluates `expr` in int64 arithmetic. Returns InvalidArgument naming the
// position of a syntax error, a division by zero, or an integer literal or
// intermediate result outside int64 ("... overflows int64": never a wrapped
// value), and NotFound naming a symbol missing from `symbols`.
absl::StatusOr<int64_t> EvalExpr(std::string_view expr, const SymbolValues& symbols);

// Parses `expr` without evaluating it and returns the symbols it uses.
// Returns InvalidArgument on a syntax error (or a literal outside int64).
absl::StatusOr<std::vector<std::string>> ExprSymbols(std::string_view expr);

}  // namespace kevo
