#include "coordinator/llm/endpoint_selector.h"

#include <map>
#include <random>

#include <gtest/gtest.h>

namespace kevo::llm {
namespace {

EndpointConfig Endpoint(const std::string& name, double weight = 1) {
  EndpointConfig e;
  e.name = name;
  e.weight = weight;
  return e;
}

// A synthetic environment: each endpoint yields `gain` with probability `p`
// and always costs `tokens`.
struct Arm {
  double p;
  double gain;
  int64_t tokens;
};

// Runs `rounds` calls and returns how often each endpoint was picked in the
// last quarter.
std::map<std::string, int> Simulate(EndpointSelector& selector, const std::map<std::string, Arm>& arms, int rounds,
                                    uint64_t env_seed) {
  std::mt19937_64 rng(env_seed);
  std::uniform_real_distribution<double> u(0, 1);
  std::map<std::string, int> late;
  for (int i = 0; i < rounds; ++i) {
    const std::string name = selector.Select();
    const Arm& arm = arms.at(name);
    const double gain = u(rng) < arm.p ? arm.gain : 0;
    EXPECT_TRUE(selector.RecordOutcome(name, gain, arm.tokens).ok());
    if (i >= rounds * 3 / 4) ++late[name];
  }
  return late;
}

TEST(EndpointSelectorTest, ConvergesToTheEndpointWithTheBetterYieldPerCall) {
  auto selector = EndpointSelector::Create({Endpoint("weak"), Endpoint("strong")});
  ASSERT_TRUE(selector.ok());
  auto late = Simulate(**selector, {{"weak", {0.3, 1.0, 1000}}, {"strong", {0.6, 1.0, 1000}}}, 4000, 1);
  EXPECT_GT(late["strong"], 0.85 * 1000) << "weak=" << late["weak"];
  auto stats = (*selector)->Stats();
  EXPECT_NEAR(stats[1].gain_per_call(), 0.6, 0.05);
}

TEST(EndpointSelectorTest, PerTokenObjectivePrefersTheCheaperEndpoint) {
  // "big" gains twice as much per call but uses four times the tokens.
  const std::map<std::string, Arm> arms = {{"big", {0.6, 1.0, 4000}}, {"small", {0.6, 0.5, 1000}}};
  SelectorOptions per_call;
  auto a = EndpointSelector::Create({Endpoint("big"), Endpoint("small")}, per_call);
  auto late_call = Simulate(**a, arms, 4000, 2);
  EXPECT_GT(late_call["big"], 800);

  SelectorOptions per_token;
  per_token.objective = SelectorOptions::Objective::kGainPerKiloToken;
  auto b = EndpointSelector::Create({Endpoint("big"), Endpoint("small")}, per_token);
  auto late_token = Simulate(**b, arms, 4000, 2);
  EXPECT_GT(late_token["small"], 800);
}

TEST(EndpointSelectorTest, SameSeedSameSequence) {
  const std::map<std::string, Arm> arms = {{"a", {0.5, 1.0, 100}}, {"b", {0.5, 1.0, 100}}, {"c", {0.4, 1.5, 100}}};
  auto sequence = [&](uint64_t seed) {
    SelectorOptions options;
    options.seed = seed;
    auto s = EndpointSelector::Create({Endpoint("a"), Endpoint("b"), Endpoint("c")}, options);
    std::mt19937_64 rng(9);
    std::string out;
    for (int i = 0; i < 300; ++i) {
      std::string name = (*s)->Select();
      out += name;
      const Arm& arm = arms.at(name);
      (void)(*s)->RecordOutcome(name, std::uniform_real_distribution<double>(0, 1)(rng) < arm.p ? arm.gain : 0,
                                arm.tokens);
    }
    return out;
  };
  EXPECT_EQ(sequence(5), sequence(5));
}

TEST(EndpointSelectorTest, TriesHeavierEndpointsFirstAndSkipsWeightZero) {
  auto s =
      EndpointSelector::Create({Endpoint("light", 0.5), Endpoint("off", 0), Endpoint("heavy", 3), Endpoint("mid", 1)});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)->Select(), "heavy");
  EXPECT_EQ((*s)->Select(), "mid");
  EXPECT_EQ((*s)->Select(), "light");
  for (int i = 0; i < 200; ++i) {
    std::string name = (*s)->Select();
    EXPECT_NE(name, "off");
    ASSERT_TRUE((*s)->RecordOutcome(name, 0.1, 10).ok());
  }
}

TEST(EndpointSelectorTest, ConcurrentCallersSpreadBeforeOutcomesArrive) {
  auto s = EndpointSelector::Create({Endpoint("a"), Endpoint("b"), Endpoint("c")});
  std::map<std::string, int> picks;
  for (int i = 0; i < 3; ++i) ++picks[(*s)->Select()];
  EXPECT_EQ(picks.size(), 3u);
}

TEST(EndpointSelectorTest, RejectsBadEndpointListsAndUnknownNames) {
  EXPECT_EQ(EndpointSelector::Create({}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(EndpointSelector::Create({Endpoint("a"), Endpoint("a")}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(EndpointSelector::Create({Endpoint("a", 0)}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(EndpointSelector::Create({Endpoint("a", -1)}).status().code(), absl::StatusCode::kInvalidArgument);
  auto s = EndpointSelector::Create({Endpoint("a")});
  EXPECT_EQ((*s)->RecordOutcome("zzz", 1, 1).code(), absl::StatusCode::kNotFound);
}

TEST(EndpointSelectorTest, NegativeGainsCountAsZero) {
  auto s = EndpointSelector::Create({Endpoint("a")});
  ASSERT_TRUE((*s)->RecordOutcome("a", -5, 100).ok());
  ASSERT_TRUE((*s)->RecordOutcome("a", 1, 100).ok());
  auto stats = (*s)->Stats();
  EXPECT_DOUBLE_EQ(stats[0].total_gain, 1);
  EXPECT_EQ(stats[0].calls, 2);
  EXPECT_EQ(stats[0].total_tokens, 200);
  EXPECT_DOUBLE_EQ(stats[0].gain_per_ktok(), 5);
}

}  // namespace
}  // namespace kevo::llm
