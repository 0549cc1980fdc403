// The fault-injection cases, in one place: each row says what fault a test
// under tests/fault/ causes, what kevo does about it and what the client is
// given. docs/reliability.md's fault table is generated from these rows
// (fault_table_test compares it), and each test checks its own rows'
// outcome with ExpectOutcome(), so the table says what the tests enforce.
#pragma once

#include <string>
#include <vector>

namespace kevo::testing {

struct FaultCase {
  const char* id = "";     // how its test names it
  const char* test = "";   // the test that enforces it: tests/fault/<test>.cc
  const char* fault = "";  // what the test does to kevo
  const char* kevo_does = "";
  // What the client is given, exactly as the test composes it from what it
  // saw (a status, a state, an exit code, and whatever else the row says).
  const char* client_gets = "";
  // A phrase of the message the client (or the operator) is given; "" when
  // the row checks none.
  const char* told = "";
};

// Every case, in the order of the table.
const std::vector<FaultCase>& FaultCases();
// The case `id`; a test failure (and an empty case) for an unknown id.
const FaultCase& FaultCaseNamed(const std::string& id);
// Checks a test's observation against its row: `client_gets` must be the
// row's exactly, and `message` must contain the row's `told` phrase.
void ExpectOutcome(const FaultCase& row, const std::string& client_gets, const std::string& message = "");
// The markdown table of FaultCases() (header included).
std::string FaultTable();

}  // namespace kevo::testing
