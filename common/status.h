// Status helpers shared by every kevo component. Debian's Abseil (20220623) has
// no status macros, so they live here, once.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define KEVO_CONCAT_INNER_(a, b) a##b
#define KEVO_CONCAT_(a, b) KEVO_CONCAT_INNER_(a, b)

// Returns from the enclosing function when `expr` (an absl::Status) is not OK.
#define KEVO_RETURN_IF_ERROR(expr)               \
  do {                                           \
    ::absl::Status kevo_status_ = (expr);        \
    if (!kevo_status_.ok()) return kevo_status_; \
  } while (0)

// `lhs = value of rexpr` (an absl::StatusOr<T>), or returns its error status.
#define KEVO_ASSIGN_OR_RETURN(lhs, rexpr) \
  KEVO_ASSIGN_OR_RETURN_IMPL_(KEVO_CONCAT_(kevo_statusor_, __LINE__), lhs, rexpr)
// `lhs` is a declaration or an lvalue: it cannot be parenthesized.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define KEVO_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                                \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()
// NOLINTEND(bugprone-macro-parentheses)
