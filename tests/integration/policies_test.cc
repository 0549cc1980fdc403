// Every selection policy spends the whole evaluation budget on one
// single-slot worker. A policy that keeps choosing "propose seeds" (UCT at its
// virtual root, greedy when every node so far failed) asks a deterministic
// proposer for one seed at a time and gets the one already evaluated back;
// the job must then ask for more rather than stop at "search space exhausted"
// after one evaluation. mtia-sim keeps each evaluation cheap (simulated time).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/testing/process.h"

namespace kevo::testing {
namespace {

class PoliciesTest : public ::testing::TestWithParam<std::string> {};

TEST_P(PoliciesTest, SpendsTheWholeBudgetOnASingleSlotWorker) {
  const std::string dir = MakeTempDir("kevo-policy-" + GetParam());
  auto r = RunCommand({BinDir() + "/kevo", "run", SourceDir() + "/tasks/softmax", "--platform", "mtia-sim", "--budget",
                       "4", "--policy", GetParam(), "--json", "--db", dir + "/db", "--out", dir + "/best.cc"},
                      absl::Minutes(10));
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["policy"], GetParam());
  EXPECT_EQ(j["evaluations_total"].get<int>(), 4) << r.out;
  EXPECT_EQ(j["stop_reason"], "evaluation budget spent") << r.out;
  EXPECT_EQ(j["status"], "OK") << r.out;
}

INSTANTIATE_TEST_SUITE_P(Policies, PoliciesTest, ::testing::Values("greedy", "uct", "evolution"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace kevo::testing
