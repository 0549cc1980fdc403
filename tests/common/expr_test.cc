#include "common/expr.h"

#include <cstdint>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kevo {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

int64_t Eval(const std::string& expr, const SymbolValues& symbols = {}) {
  auto v = EvalExpr(expr, symbols);
  EXPECT_TRUE(v.ok()) << expr << ": " << v.status();
  return v.ok() ? *v : -999999;
}

TEST(EvalExprTest, MultiplicationBindsTighterThanAddition) {
  EXPECT_EQ(Eval("2+3*4"), 14);
  EXPECT_EQ(Eval("2*3+4"), 10);
  EXPECT_EQ(Eval("(2+3)*4"), 20);
  EXPECT_EQ(Eval("20-6/3"), 18);
  EXPECT_EQ(Eval("1+7%4"), 4);
}

TEST(EvalExprTest, SameLevelOperatorsAssociateLeft) {
  EXPECT_EQ(Eval("10-4-3"), 3);
  EXPECT_EQ(Eval("64/4/2"), 8);
  EXPECT_EQ(Eval("100/10*2"), 20);
}

TEST(EvalExprTest, UnaryMinusAndIntegerDivision) {
  EXPECT_EQ(Eval("-3+5"), 2);
  EXPECT_EQ(Eval("2*-3"), -6);
  EXPECT_EQ(Eval("--4"), 4);
  EXPECT_EQ(Eval("7/2"), 3);
  EXPECT_EQ(Eval(" 1 +  2 "), 3);
}

TEST(EvalExprTest, Functions) {
  EXPECT_EQ(Eval("min(3, 9)"), 3);
  EXPECT_EQ(Eval("max(3, 9)"), 9);
  EXPECT_EQ(Eval("ceil_div(10, 3)"), 4);
  EXPECT_EQ(Eval("ceil_div(9, 3)"), 3);
  EXPECT_EQ(Eval("2*max(1, min(5, 4))+1"), 9);
}

TEST(EvalExprTest, SymbolsTakeTheirBoundValues) {
  SymbolValues s{{"rows", 33}, {"cols", 1000}, {"k", 5}};
  EXPECT_EQ(Eval("rows*cols", s), 33000);
  EXPECT_EQ(Eval("2*k+1", s), 11);
  EXPECT_EQ(Eval("4*rows*cols + 8*rows", s), 4 * 33000 + 8 * 33);
  EXPECT_EQ(Eval("1099511627776*k", s), int64_t{1099511627776} * 5);  // 64-bit
}

TEST(EvalExprTest, UnboundSymbolIsNotFoundNamingIt) {
  auto v = EvalExpr("rows*cols", {{"rows", 3}});
  EXPECT_EQ(v.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(v.status().message()), HasSubstr("'cols'"));
}

TEST(EvalExprTest, DivisionByZeroIsInvalidArgument) {
  for (const char* expr : {"1/0", "5%(2-2)", "ceil_div(4, 0)", "n/m"}) {
    auto v = EvalExpr(expr, {{"n", 4}, {"m", 0}});
    EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument) << expr;
    EXPECT_THAT(std::string(v.status().message()), HasSubstr("division by zero")) << expr;
  }
}

// A shape must never wrap: 10^6 cubed squared wraps int64 to a small number,
// and (2^32)^2 wraps to exactly 0, which once reached a worker as a size.
TEST(EvalExprTest, ResultsOutsideInt64AreInvalidArgumentNotWrapped) {
  const SymbolValues s{{"n", 1000000}, {"big", int64_t{1} << 32}, {"max", INT64_MAX}, {"min", INT64_MIN}};
  struct Case {
    const char* expr;
    const char* what;
  };
  for (const Case& c :
       {Case{"n*n*n*n", "the product of 1000000000000000000 and 1000000 overflows int64"},
        Case{"big*big", "the product of 4294967296 and 4294967296 overflows int64"},
        Case{"max+1", "the sum of 9223372036854775807 and 1 overflows int64"},
        Case{"min-1", "the difference of -9223372036854775808 and 1 overflows int64"},
        Case{"-min", "the negation of -9223372036854775808 overflows int64"},
        Case{"min/(0-1)", "the quotient of -9223372036854775808 and -1 overflows int64"},
        Case{"min%(0-1)", "overflows int64"},
        Case{"ceil_div(max, 2)", "ceil_div(9223372036854775807, 2) overflows int64"},
        Case{"2*(max/2+1)", "the product"}, Case{"9223372036854775808", "the number does not fit in int64 at column 1"},
        Case{"1+99999999999999999999", "the number does not fit in int64 at column 3"}}) {
    auto v = EvalExpr(c.expr, s);
    EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument) << c.expr << " gave " << v.status();
    EXPECT_THAT(std::string(v.status().message()), HasSubstr(c.what)) << c.expr;
  }
  // The edges themselves still evaluate.
  EXPECT_EQ(Eval("9223372036854775807"), INT64_MAX);
  EXPECT_EQ(Eval("-9223372036854775807-1"), INT64_MIN);
  EXPECT_EQ(Eval("big*(big/4)-1+big*(big/4)", s), INT64_MAX);
  EXPECT_EQ(Eval("ceil_div(max-1, 2)", s), INT64_MAX / 2);
}

TEST(ExprSymbolsTest, ALiteralOutsideInt64IsASyntaxError) {
  auto s = ExprSymbols("rows*99999999999999999999");
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("does not fit in int64"));
}

TEST(EvalExprTest, SyntaxErrorsAreInvalidArgumentWithColumn) {
  struct Case {
    const char* expr;
    const char* what;
  };
  for (const Case& c : {Case{"2+", "unexpected end at column 3"}, Case{"(1+2", "expected ')'"},
                        Case{"3 3", "unexpected character at column 3"}, Case{"2*@", "unexpected '@'"},
                        Case{"min(1)", "min() takes two arguments"}, Case{"pow(2, 3)", "unknown function 'pow'"},
                        Case{"", "unexpected end"}}) {
    auto v = EvalExpr(c.expr, {});
    EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument) << c.expr;
    EXPECT_THAT(std::string(v.status().message()), HasSubstr(c.what)) << c.expr;
  }
}

TEST(ExprSymbolsTest, ListsSymbolsInOrderWithoutFunctionNames) {
  auto s = ExprSymbols("rows*cols + min(rows, k_2)");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_THAT(*s, ElementsAre("rows", "cols", "rows", "k_2"));
  auto none = ExprSymbols("64");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST(ExprSymbolsTest, DoesNotEvaluateSoZeroDivisorsParse) {
  auto s = ExprSymbols("n/(m-m)");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_THAT(*s, ElementsAre("n", "m", "m"));
}

TEST(ExprSymbolsTest, SyntaxErrorIsInvalidArgument) {
  auto s = ExprSymbols("rows*");
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("\"rows*\""));
}

}  // namespace
}  // namespace kevo
