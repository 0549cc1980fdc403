// docs/reliability.md's fault table is generated from the cases in
// fault_cases.cc, which the tests under tests/fault/ check one by one: a case
// added, removed or changed without the table fails here (KEVO_UPDATE_DOCS=1
// rewrites the table instead), and so does a case that names no test that
// checks it.
#include <filesystem>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include <gtest/gtest.h>

#include "tests/fault/fault_cases.h"
#include "tests/testing/generated_doc.h"
#include "tests/testing/process.h"

namespace kevo::testing {
namespace {

TEST(FaultTableTest, ReliabilityTableMatchesTheCases) {
  const std::string mismatch = MatchGeneratedSection(SourceDir() + "/docs/reliability.md", "fault_table_test",
                                                     FaultTable(), "KEVO_UPDATE_DOCS=1 build/tests/fault_table_test");
  EXPECT_EQ(mismatch, "") << "(the table follows tests/fault/fault_cases.cc)";
}

// Each case names the test that checks it, and that test's source asks for
// the case by its id (FaultCaseNamed("...")), to check its outcome.
TEST(FaultTableTest, EveryCaseIsCheckedByTheTestItNames) {
  std::set<std::string> ids;
  for (const FaultCase& c : FaultCases()) {
    EXPECT_TRUE(ids.insert(c.id).second) << "two cases named " << c.id;
    const std::string source = absl::StrCat(SourceDir(), "/tests/fault/", c.test, ".cc");
    ASSERT_TRUE(std::filesystem::exists(source)) << c.id << " names " << c.test << ", which has no " << source;
    EXPECT_TRUE(absl::StrContains(ReadTextFile(source), absl::StrCat("\"", c.id, "\"")))
        << c.test << ".cc never asks for the case " << c.id << ", so nothing checks its outcome";
  }
}

}  // namespace
}  // namespace kevo::testing
