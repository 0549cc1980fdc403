#include "common/expr.h"

#include <algorithm>
#include <cctype>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace kevo {
namespace {

// Recursive-descent parser. With `symbols == nullptr` it only checks syntax
// and collects symbol names into `used`.
class Parser {
 public:
  Parser(std::string_view text, const SymbolValues* symbols, std::vector<std::string>* used)
      : text_(text), symbols_(symbols), used_(used) {}

  absl::StatusOr<int64_t> Parse() {
    auto v = Sum();
    if (!v.ok()) return v;
    SkipSpace();
    if (pos_ != text_.size()) return Error("unexpected character");
    return v;
  }

 private:
  absl::Status Error(std::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("expression \"", std::string(text_), "\": ", std::string(what), " at column ", pos_ + 1));
  }
  // A result outside int64: refused rather than wrapped, so that a shape
  // cannot wrap to a small (or zero) size that then passes every check.
  absl::Status Overflow(std::string_view op, int64_t a, int64_t b) const {
    return Error(absl::StrCat(std::string(op), " of ", a, " and ", b, " overflows int64"));
  }
  void SkipSpace() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool Eat(char c) {
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  absl::StatusOr<int64_t> Sum() {
    auto lhs = Product();
    if (!lhs.ok()) return lhs;
    int64_t v = *lhs;
    while (true) {
      if (Eat('+')) {
        auto rhs = Product();
        if (!rhs.ok()) return rhs;
        int64_t sum;
        if (__builtin_add_overflow(v, *rhs, &sum)) return Overflow("the sum", v, *rhs);
        v = sum;
      } else if (Eat('-')) {
        auto rhs = Product();
        if (!rhs.ok()) return rhs;
        int64_t difference;
        if (__builtin_sub_overflow(v, *rhs, &difference)) return Overflow("the difference", v, *rhs);
        v = difference;
      } else {
        return v;
      }
    }
  }

  absl::StatusOr<int64_t> Product() {
    auto lhs = Unary();
    if (!lhs.ok()) return lhs;
    int64_t v = *lhs;
    while (true) {
      char op = 0;
      if (Eat('*'))
        op = '*';
      else if (Eat('/'))
        op = '/';
      else if (Eat('%'))
        op = '%';
      else
        return v;
      auto rhs = Unary();
      if (!rhs.ok()) return rhs;
      if (op == '*') {
        int64_t product;
        if (__builtin_mul_overflow(v, *rhs, &product)) return Overflow("the product", v, *rhs);
        v = product;
      } else if (symbols_ != nullptr) {
        if (*rhs == 0) return Error("division by zero");
        // INT64_MIN / -1 is the one quotient that does not fit (and traps).
        if (v == INT64_MIN && *rhs == -1) return Overflow("the quotient", v, *rhs);
        v = op == '/' ? v / *rhs : v % *rhs;
      }
    }
  }

  absl::StatusOr<int64_t> Unary() {
    if (Eat('-')) {
      auto v = Unary();
      if (!v.ok()) return v;
      int64_t negated;
      if (__builtin_sub_overflow(int64_t{0}, *v, &negated)) {
        return Error(absl::StrCat("the negation of ", *v, " overflows int64"));
      }
      return negated;
    }
    return Primary();
  }

  absl::StatusOr<int64_t> Primary() {
    SkipSpace();
    if (pos_ >= text_.size()) return Error("unexpected end");
    char c = text_[pos_];
    if (c == '(') {
      ++pos_;
      auto v = Sum();
      if (!v.ok()) return v;
      if (!Eat(')')) return Error("expected ')'");
      return v;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) {
      const size_t start = pos_;
      int64_t v = 0;
      while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
        if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, text_[pos_++] - '0', &v)) {
          pos_ = start;
          return Error("the number does not fit in int64");
        }
      }
      return v;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t start = pos_;
      while (pos_ < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_')) {
        ++pos_;
      }
      std::string name(text_.substr(start, pos_ - start));
      if (Eat('(')) return Call(name);
      if (used_ != nullptr) used_->push_back(name);
      if (symbols_ == nullptr) return 1;
      auto it = symbols_->find(name);
      if (it == symbols_->end()) {
        return absl::NotFoundError(
            absl::StrCat("expression \"", std::string(text_), "\": symbol '", name, "' has no value"));
      }
      return it->second;
    }
    return Error(absl::StrCat("unexpected '", std::string(1, c), "'"));
  }

  absl::StatusOr<int64_t> Call(const std::string& name) {
    auto a = Sum();
    if (!a.ok()) return a;
    if (!Eat(',')) return Error(absl::StrCat(name, "() takes two arguments"));
    auto b = Sum();
    if (!b.ok()) return b;
    if (!Eat(')')) return Error("expected ')'");
    if (name == "min") return std::min(*a, *b);
    if (name == "max") return std::max(*a, *b);
    if (name == "ceil_div") {
      if (symbols_ == nullptr) return 1;
      if (*b == 0) return Error("division by zero");
      int64_t b_minus_1, sum;
      if (__builtin_sub_overflow(*b, 1, &b_minus_1) || __builtin_add_overflow(*a, b_minus_1, &sum)) {
        return Error(absl::StrCat("ceil_div(", *a, ", ", *b, ") overflows int64"));
      }
      if (sum == INT64_MIN && *b == -1) return Overflow("the quotient", sum, *b);
      return sum / *b;
    }
    return Error(absl::StrCat("unknown function '", name, "'"));
  }

  std::string_view text_;
  size_t pos_ = 0;
  const SymbolValues* symbols_;
  std::vector<std::string>* used_;
};

}  // namespace

absl::StatusOr<int64_t> EvalExpr(std::string_view expr, const SymbolValues& symbols) {
  return Parser(expr, &symbols, nullptr).Parse();
}

absl::StatusOr<std::vector<std::string>> ExprSymbols(std::string_view expr) {
  std::vector<std::string> used;
  auto v = Parser(expr, nullptr, &used).Parse();
  if (!v.ok()) return v.status();
  return used;
}

}  // namespace kevo
